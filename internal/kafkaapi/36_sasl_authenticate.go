package kafkaapi

// SASLAuthenticate (key 36), v0–v2.
//
// Not a filter, and no code here: proxy.session.gate (proxy/sasl.go) handles
// it — in terminate mode its authenticate answers each step, loginFailed
// the failures; in pass-through mode gate forwards it and awaitPassthrough,
// on the reader, judges the broker's answer. It lives in proxy for
// SaslHandshake's reasons (17_sasl_handshake.go): the gate runs before the
// filters and guards them, and the login binds the session's principal.
//
// Terminate mode: answered by Tollgate's auth.Server (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512; API keys log in with PLAIN). A failed login is delayed by
// connection.failed.authentication.delay.ms (KIP-306), answered
// SASL_AUTHENTICATION_FAILED with a message that does not say whether the
// user exists, audited, and the connection closed.
//
// Pass-through mode: forwarded; the reader waits for the broker's verdict
// before reading the next request, so no request is attributed to the
// wrong principal. The identity read from the client's first message is
// bound once the broker's exchange has completed.
