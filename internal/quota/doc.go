// Package quota is Tollgate's client-quota engine: it decides, with Apache
// Kafka's semantics, how much a (user, client-id) may send or fetch and how
// long a connection must be muted when it exceeds its quota.
//
// The package owns:
//
//   - the sampled rate of Kafka ≥ 3.8 (Rate): N samples of W, a ring of N+1
//     slots, purge by last event, a window never shorter than (N−1)·W;
//   - the throttle formula round((O−Q)/Q × window) with Java Math.round
//     semantics (ThrottleMs);
//   - the controller-mutation token bucket and its strict and permissive
//     modes (TokenBucket, Mutation);
//   - quota entities, the eight user/client-id levels and Kafka's two-step
//     precedence algorithm, including the enabled-levels bitmask as changed
//     by KAFKA-19282 and the empty client-id quirk (Entity, Quotas);
//   - the Engine the gateway calls on the hot path, which keeps one bucket
//     per metric-tag pair exactly like Kafka keeps one sensor, expires idle
//     buckets and reports usage for metrics, and the per-connection Client
//     handle that skips the bucket lookup;
//   - Kafka's user-name sanitization for metric tags (Sanitize).
//
// The package is pure: it does no I/O, starts no goroutines and has no global
// state. Time is always a parameter (a time.Time, or int64 milliseconds for
// the low-level types), so every behaviour is reproducible in a test without
// sleeping. It must not import anything from the rest of the project; the
// gateway depends on it, never the reverse.
//
// Where Tollgate departs from Kafka on purpose it says so: byte-rate
// throttles are capped at EngineConfig.MaxThrottle (quota.max.throttle.ms),
// which Kafka does not do.
package quota
