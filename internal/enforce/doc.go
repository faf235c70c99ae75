// Package enforce applies Kafka's client quotas on Tollgate's data path: it
// implements proxy.Policy with a quota.Engine.
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
//
// The throttle goes into the response's throttle_time_ms (the maximum of
// Tollgate's and the broker's) and the connection is muted for it (the
// proxy does both).
package enforce
