package proxy

import (
	"errors"
	"io"
	"net"
	"os"

	"github.com/tollgate/tollgate/internal/wire"
)

// Reason says why a connection closed. Logs, metrics and audit share it.
type Reason string

// Close reasons.
const (
	ReasonClientClosed     Reason = "client_closed"
	ReasonUpstreamClosed   Reason = "upstream_closed"
	ReasonUpstreamDial     Reason = "upstream_unreachable"
	ReasonUpstreamProtocol Reason = "upstream_protocol_error"
	ReasonFrameTooLarge    Reason = "frame_too_large"
	ReasonBadFrame         Reason = "malformed_frame"
	ReasonTLSOnPlaintext   Reason = "tls_on_plaintext"
	ReasonUnknownAPIKey    Reason = "unknown_api_key"
	ReasonUnsupportedVers  Reason = "unsupported_version"
	ReasonRefused          Reason = "request_refused"
	ReasonShutdown         Reason = "shutdown"
	ReasonIOError          Reason = "io_error"
	ReasonShed             Reason = "max_connections_shed"
	ReasonAuthFailed       Reason = "authentication_failed"
	ReasonTLSHandshake     Reason = "tls_handshake_failed"
	ReasonIdle             Reason = "idle_timeout"
	ReasonHandshakeTimeout Reason = "handshake_timeout"
	ReasonResponseTooLarge Reason = "response_too_large"
	ReasonUpstreamTimeout  Reason = "upstream_timeout"
	ReasonRevoked          Reason = "credential_revoked"
	// ReasonWriteTimeout: a write to the client made no progress for
	// socket.connections_max_idle (the client stopped reading; writestall.go).
	ReasonWriteTimeout Reason = "write_timeout"
)

// Reasons lists every close reason, for metrics that pre-declare labels.
var Reasons = []Reason{
	ReasonClientClosed, ReasonUpstreamClosed, ReasonUpstreamDial, ReasonUpstreamProtocol,
	ReasonFrameTooLarge, ReasonBadFrame, ReasonTLSOnPlaintext, ReasonUnknownAPIKey,
	ReasonUnsupportedVers, ReasonRefused, ReasonShutdown, ReasonIOError, ReasonShed,
	ReasonAuthFailed, ReasonTLSHandshake, ReasonIdle, ReasonHandshakeTimeout, ReasonResponseTooLarge, ReasonUpstreamTimeout, ReasonRevoked,
	ReasonWriteTimeout,
}

// clientReason classifies an error from reading or parsing a client frame.
func clientReason(err error) Reason {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return ReasonClientClosed
	case errors.Is(err, wire.ErrFrameTooLarge):
		return ReasonFrameTooLarge
	case errors.Is(err, wire.ErrTLSOnPlaintext):
		return ReasonTLSOnPlaintext
	case errors.Is(err, wire.ErrUnknownAPIKey):
		return ReasonUnknownAPIKey
	case errors.Is(err, wire.ErrUnsupportedVers):
		return ReasonUnsupportedVers
	case errors.Is(err, wire.ErrNegativeSize), errors.Is(err, wire.ErrShortFrame),
		errors.Is(err, wire.ErrMalformed), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonBadFrame
	}
	return ReasonIOError
}

func upstreamReason(err error) Reason {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ReasonUpstreamTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ReasonUpstreamClosed
	case errors.Is(err, wire.ErrMalformed), errors.Is(err, wire.ErrShortFrame),
		errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, wire.ErrNegativeSize),
		errors.Is(err, errCorrelation):
		return ReasonUpstreamProtocol
	}
	return ReasonUpstreamClosed
}
