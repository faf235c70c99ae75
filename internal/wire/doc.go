// Package wire owns the byte-level facts of the Kafka protocol that a
// gateway needs without decoding whole messages: size-prefixed frames read
// into pooled buffers, request and response header layout, Produce acks
// detection, where throttle_time_ms sits in every response (so it can be
// patched in place), ApiVersions clamping and the rewriting of every response
// field that carries a broker address.
//
// Messages are never hand-encoded here: whenever a message must change shape
// it is decoded and re-encoded with kmsg at the request's own version. The
// small walkers in this package only skip over length-prefixed fields to find
// an offset; they never produce message bytes.
//
// wire imports only kmsg and kbin. It must not import any other package of
// the project.
package wire
