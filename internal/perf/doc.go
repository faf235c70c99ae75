// Package perf implements `tollgate perf produce|consume`, a load generator
// in the spirit of Kafka's kafka-producer-perf-test and
// kafka-consumer-perf-test, built on franz-go's kgo.
//
// Besides records/s, MB/s (MiB, as Kafka's tools count) and, for produce,
// latency (from the Produce call to the acknowledgement), it reports the
// throttling the client is told of in responses (throttle_time_ms), under
// the names of Kafka's client metrics: produce-throttle-time-avg and
// produce-throttle-time-max for a producer, fetch-throttle-time-avg and
// fetch-throttle-time-max for a consumer, in milliseconds.
//
// How the throttle metrics are computed. kgo's HookBrokerThrottle reports
// every throttle_time_ms > 0 but not which request it came with, so each
// role uses a client of its own: every throttle the producer's client sees
// counts as a produce throttle, every throttle the consumer's as a fetch
// throttle (Tollgate's byte-rate quotas throttle only Produce and Fetch; the
// other requests these clients send, metadata, ApiVersions, InitProducerID,
// group and offset requests, are not throttled). As in Kafka, the average is
// over all responses of the kind, zero throttles included: HookBrokerRead
// counts the responses with request key 0 (Produce) or 1 (Fetch), and the
// average is the sum of throttles divided by that count. The maximum is the
// largest throttle seen. Unlike Kafka's metrics, which are windowed (two 30 s
// samples), both cover the whole run. With --acks 0 there are no produce
// responses (and Tollgate mutes rather than answers), so the producer
// metrics stay at zero.
//
// Bounds. A run stops at --num-records, at --duration, or at whichever comes
// first; with neither it runs for 30 s. A consumer also stops after --timeout
// without a record, as kafka-consumer-perf-test does. When --duration, SIGINT
// or an error ends a produce run, the figures cover the run up to that
// moment: records still buffered or in flight are abandoned (waiting for
// them could take a whole throttle) and acknowledgements that arrive later
// are not counted. With --num-records alone the producer waits for every
// acknowledgement, so exactly that many records are reported.
//
// Output. Human form, one progress line per --interval:
//
//	1000 records sent, 200.0 records/sec (3.05 MB/sec), 12.3 ms avg latency, 50.0 ms max latency, throttle 3 (max 250 ms)
//	1000 records received, 200.0 records/sec (3.05 MB/sec), throttle 3 (max 250 ms)
//
// where "throttle N (max M ms)" counts the responses in that interval that
// carried a throttle. The summary is two lines:
//
//	12000 records sent, 199.9 records/sec (3.05 MB/sec), 1523.10 ms avg latency, 3100.20 ms max latency, 1480.3 ms 50th, 2900.1 ms 95th, 3050.7 ms 99th, 3099.0 ms 99.9th.
//	produce-throttle-time-avg=107.2 produce-throttle-time-max=401.0 (ms, over 277 produce responses, 188 throttled)
//
// With --json every progress line is a JSON object of type "progress" and
// the summary one of type "summary" carrying the metric names as keys
// ("produce-throttle-time-avg", ...), plus "responses" and
// "throttled_responses".
//
// --command-config reads Kafka client properties (security.protocol,
// sasl.mechanism PLAIN/SCRAM-SHA-256/SCRAM-SHA-512, sasl.jaas.config
// username and password, ssl.* as PEM, client.id) through
// internal/clientconf, the parser `tollgate configs` uses too.
package perf
