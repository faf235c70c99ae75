// Package proxy is the session side of Tollgate's data path: one session
// per client connection, which forwards frames to the upstream broker its
// port stands for and returns responses in request order.
//
// The path, top to bottom (docs/design.md walks it file by file): the
// accept side (package accept) hands an admitted connection to a listener
// (accept.Handler) → session (TLS handshake, principal) → read frame →
// parse header → refuse what the gateway cannot carry → the SASL gate →
// the connection's filter chain (filter.go; the hooks are in hooks.go) →
// forward, dialing the upstream connection at the first forwarded request
// → read the upstream response → response hooks → the throttle (the
// largest of the filters' Throttle hooks and the broker's) → write → mute
// the client for the throttle.
//
// proxy receives its configuration as values and reports through the
// observer hooks of hooks.go. It must not import kafkaapi or enforce (they
// are its filters, given to it by app), nor the control side: control,
// store, audit, metrics, httpapi, app, cli.
package proxy
