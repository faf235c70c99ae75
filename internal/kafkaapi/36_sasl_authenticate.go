package kafkaapi

// SASLAuthenticate (key 36), v0–v2.
//
// Not a filter: handled by the session's SASL gate (proxy/sasl.go).
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
