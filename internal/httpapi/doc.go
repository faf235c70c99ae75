// Package httpapi serves Tollgate's admin HTTP port: health and readiness,
// Prometheus metrics, a JSON API (quota buckets, quota resolution,
// connections and limits, recent audit events) and the live dashboard,
// whose static assets are embedded in the binary.
//
// It reads the running components through small interfaces; it must not be
// imported by wire, quota, admission, auth or proxy.
package httpapi
