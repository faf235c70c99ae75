// Package api declares the admin HTTP API's request and response types
// once: the server (internal/httpapi) writes and reads them, the CLI
// (internal/cli) sends and decodes them, and the control plane takes the
// tenant definitions and changes as they come. It imports nothing of the
// project, so a client of the API needs neither the control plane nor the
// store.
package api

// Error is the one error shape of the API: {"error": "..."}.
type Error struct {
	Error string `json:"error"`
}
