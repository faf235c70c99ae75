package kafkaapi

// ShareFetch (key 78), v0–v2.
//
// Forwarded. Charged by the quota filter (enforce/filter.go) as Kafka's
// share-fetch handler charges it, Fetch's pattern: the response size to
// consumer_byte_rate when it passes; held while the bucket is throttled;
// max_bytes (and min_bytes) clamped to what the quota allows now — the
// request is re-encoded only when the clamp bites. request_percentage:
// Fetch's rule (enforce/request.go). Rewritten
// (addresses.go): the node endpoints become gateway addresses.
//
// Differs from Fetch: the response is read whole, not streamed, so it is
// bounded by socket.response_max_bytes.
