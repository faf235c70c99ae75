package kafkaapi

// Fetch (key 1), v0–v18.
//
// Forwarded to the partition leader's port. Responses of 64 KiB or more
// are streamed (proxy/stream.go): the small fields are staged and checked,
// record blocks spliced socket to socket, throttle_time_ms patched before
// anything is written.
//
// Charged by the quota filter (enforce/filter.go) to consumer_byte_rate:
// the response size when it passes. Before forwarding, max_bytes is
// clamped to what the quota allows now (Kafka's Q·(N−1)·W, less fetches in
// flight), in place (wire.ClampFetch). request_percentage
// (enforce/request.go): the upstream's time for it, less max_wait_ms when
// min_bytes > 0 (the long poll).
//
// Rewritten: node endpoints (the top-level tag, v12+, KIP-951) become
// gateway addresses — by addresses.go for a buffered response, and to the
// same length by the stream for a streamed one (a rewrite that would be
// longer drops them and pads with an unknown tag: the client then falls
// back to a metadata refresh).
//
// Differs from a broker: a throttled Fetch still delivers its data (Kafka
// answers it empty); its debt throttles the next request instead.
