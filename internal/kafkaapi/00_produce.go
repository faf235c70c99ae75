package kafkaapi

// Produce (key 0), v0–v13.
//
// Forwarded to the partition leader's port. Requests under 64 KiB are read
// whole and written with one call; larger ones have their head parsed in
// place and the rest spliced socket to socket (proxy/reader.go). acks is
// read in place (wire.ProduceAcks): acks=0 has no response.
//
// Charged by the quota filter (enforce/filter.go) to producer_byte_rate:
// the whole request size when its response passes (at once for acks=0,
// which is throttled by muting alone); a request for a bucket already
// throttled is held until the bucket's deadline before it is forwarded.
// request_percentage (enforce/request.go): the upstream's time for it,
// less timeout_ms for acks=all (the wait for the replicas).
//
// Rewritten: the response's node endpoints (tag 0, v10+, sent by brokers on
// a leader change, KIP-951) become gateway addresses (addresses.go); the
// response is only walked to find them, re-encoded only when present.
// throttle_time_ms becomes max(Tollgate's, the broker's), patched in place.
