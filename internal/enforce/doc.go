// Package enforce applies Kafka's client quotas on Tollgate's data path: it
// is the quota filter of the connection's chain, on a quota.Engine.
//
//   - producer_byte_rate: the whole request size is recorded when the
//     Produce response passes (at once for acks=0, which has no response and
//     is throttled by muting alone).
//   - consumer_byte_rate: the Fetch response size is recorded when it
//     passes; Fetch max_bytes is first clamped to Q·(N−1)·W, as Kafka does.
//     A throttled Fetch still delivers its data (Kafka would answer empty);
//     the debt throttles the next request instead.
//   - controller_mutation_rate: partitions created, added or deleted by
//     CreateTopics, CreatePartitions and DeleteTopics; strict mode (error
//     89, per topic, in request order) at the versions Kafka uses it,
//     permissive below.
//   - request_percentage: every request but SaslHandshake, SaslAuthenticate
//     and ApiVersions (request.go) is charged the upstream's time for it
//     when its response passes (quota.RequestMeter: in connection order,
//     less the wait a long-polling Fetch or ShareFetch, an acks=all Produce
//     or a JoinGroup lets the broker take), and every response of a client
//     over its quota is throttled, bounded by one quota window, as Kafka's
//     ClientRequestQuotaManager does. Requests the gateway answers itself
//     never reach the filter and cost nothing.
//   - per-topic quotas (topic.go): a Produce's or a Fetch response's record
//     bytes of each topic into the client's per-topic bucket of the topic
//     (the Produce when it passes, a Fetch response when it passes, a
//     streamed one as it passes), a limited topic's partition_max_bytes
//     clamped in place, a request held for its throttled topics; read in
//     place, and only when some per-topic quota exists.
//
// The throttle goes into the response's throttle_time_ms (the maximum of
// Tollgate's and the broker's) and the connection is muted for it (the
// proxy does both).
package enforce
