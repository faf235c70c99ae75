// Package wire owns the byte-level facts of the Kafka protocol that a
// gateway needs without decoding whole messages: size-prefixed frames read
// into pooled buffers, request and response header layout, Produce acks
// detection, where throttle_time_ms sits in every response (so it can be
// patched in place), ApiVersions clamping and the rewriting of every response
// field that carries a broker address.
//
// Messages are never hand-encoded here: whenever a message must change shape
// it is decoded and re-encoded with kmsg at the request's own version. The
// walks (walk.go: one per message shape the data path reads in place, each
// over a Source, a buffered frame or a streamed one) read small fields with
// kbin's primitives and pass the records by their length; they never
// produce message bytes, and patch only same-length fields in place. API
// keys are kmsg's names (kmsg.Produce, kmsg.NameForKey).
//
// wire imports only kmsg and kbin. It must not import any other package of
// the project.
package wire
