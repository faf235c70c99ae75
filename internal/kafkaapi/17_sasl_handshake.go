package kafkaapi

// SASLHandshake (key 17), v0–v1.
//
// Not a filter, and no code here: proxy.session.gate (proxy/sasl.go) handles
// it — in terminate mode its handshake answers, and rawToken, called by
// handleSmall (proxy/reader.go), reads the v0 raw tokens. It lives in proxy
// because the gate runs before the filters and decides whether a request
// may reach them at all (proxy may not import kafkaapi, whose filters it
// guards), a v0 raw token is a frame without a header that only the
// session's reader can tell, and the login binds the session's principal,
// which every filter then sees.
//
// Terminate mode: answered by Tollgate with the listener's enabled
// mechanisms; v0 is followed by raw tokens (frames without a header, as
// Kafka's SaslServerAuthenticator reads them). An unsupported mechanism is
// answered UNSUPPORTED_SASL_MECHANISM and the connection closed, as Kafka
// does. A handshake after login is ILLEGAL_SASL_STATE (Tollgate offers no
// re-authentication).
//
// Pass-through mode: forwarded (v1 only: raw v0 tokens have no frame the
// gateway could follow); the mechanism is remembered (gate) to read the
// identity from the client's first SaslAuthenticate message.
//
// On a listener without SASL: ILLEGAL_SASL_STATE.
