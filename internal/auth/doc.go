// Package auth is Tollgate's authentication logic: who a client connection
// is. It owns, as pure logic plus TLS file loading (no sockets, no
// goroutines):
//
//   - SASL mechanisms, server side, as step-wise state machines a proxy
//     session feeds one client token at a time: PLAIN (RFC 4616, with
//     Kafka's rules) and SCRAM-SHA-256/512 (RFC 5802/7677, Kafka's message
//     grammar, driven through github.com/xdg-go/scram). See NewServer.
//   - Credentials: salted and iterated SCRAM credentials (never plaintext at
//     rest; PLAIN is verified by recomputing the SCRAM StoredKey), the
//     CredentialLookup interface, an in-memory store and a YAML credential
//     file for when the durable store is absent.
//   - API keys: SASL PLAIN with user "token" and an API key as password
//     authenticates as the identity the key belongs to.
//   - Principal mapping: Kafka's ssl.principal.mapping.rules (SslPrincipalMapper)
//     applied to the certificate subject formatted the way Java's
//     X500Principal.getName() does, and a source-CIDR mapping for
//     unauthenticated connections.
//   - TLS: server tls.Config from PEM files with certificate reload, and the
//     upstream client tls.Config.
//   - Pass-through helpers: the user name in a client's first PLAIN, SCRAM or
//     OAUTHBEARER message (PassthroughIdentity), failing closed, and when a
//     broker's answer completes the exchange (ExchangeComplete).
//
// It imports only principal from the project. It must not import proxy,
// control, store, audit, metrics, httpapi, app or cli: the proxy and the
// durable store depend on it, not the other way round.
//
// # Driving a SASL exchange from a proxy session
//
// SaslHandshake(mechanism): if the mechanism is not in Mechanisms(), answer
// UNSUPPORTED_SASL_MECHANISM (33) with Mechanisms() and close. Otherwise
// srv, err := NewServer(mechanism, creds) and answer error 0 with
// Mechanisms(). Then feed every client token to srv.Step:
//
//	challenge, done, err := srv.Step(token)
//
// How tokens travel depends on the handshake version:
//
//   - SaslHandshake v1+: each token arrives as a SaslAuthenticate (36)
//     request's AuthBytes (normal header, correlation id, FIFO). On err answer
//     ErrorCode SASL_AUTHENTICATION_FAILED (58) with ErrorMessage
//     ClientMessage(err) and close the connection after writing it. Otherwise
//     answer AuthBytes = challenge (every token gets a response, even an
//     empty one); when done, set SessionLifetimeMillis (v1+; 0 means the
//     client never re-authenticates) and the connection's principal to
//     srv.Principal().
//   - SaslHandshake v0: the tokens that follow are raw frames (4-byte
//     big-endian length + token, no Kafka header) in both directions until
//     done. Write challenge as a raw frame every step, including PLAIN's
//     zero-length final frame. On err just close (there is no error frame).
//     After done the connection returns to normal Kafka framing.
//
// PLAIN completes in one Step, SCRAM in two. Step after completion or after
// an error returns an error. Re-authentication (KIP-368, a SaslHandshake on
// an authenticated connection) uses a new Server; the proxy must refuse a
// different mechanism or a different resulting principal.
package auth
