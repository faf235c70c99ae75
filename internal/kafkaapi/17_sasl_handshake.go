package kafkaapi

// SASLHandshake (key 17), v0–v1.
//
// Not a filter: the session's SASL gate (proxy/sasl.go) decides whether a
// request may reach the filters at all, so it handles the SASL APIs itself.
//
// Terminate mode: answered by Tollgate with the listener's enabled
// mechanisms; v0 is followed by raw tokens (frames without a header, as
// Kafka's SaslServerAuthenticator reads them). An unsupported mechanism is
// answered UNSUPPORTED_SASL_MECHANISM and the connection closed, as Kafka
// does. A handshake after login is ILLEGAL_SASL_STATE (Tollgate offers no
// re-authentication).
//
// Pass-through mode: forwarded (v1 only: raw v0 tokens have no frame the
// gateway could follow); the mechanism is remembered to read the identity
// from the client's first SaslAuthenticate message.
//
// On a listener without SASL: ILLEGAL_SASL_STATE.
