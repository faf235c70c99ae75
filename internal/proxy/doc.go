// Package proxy is Tollgate's data path: listeners, the broker address map,
// and one session per client connection that forwards frames to the
// upstream broker its port stands for and returns responses in request
// order.
//
// The path, top to bottom: accept → admit (Hooks.Admit) → session → read
// frame → parse header → refuse what the gateway cannot carry → answer
// locally or forward → read the upstream response → rewrite broker
// addresses / clamp ApiVersions → apply the throttle (Hooks.Response) →
// write → mute the client for the throttle.
//
// proxy receives its configuration as values and reports through Hooks. It
// must not import control, store, audit, metrics, httpapi, app or cli.
package proxy
