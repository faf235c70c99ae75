// Package rate is Kafka's quota arithmetic, written once: the numbers that
// decide whether a client or a connection is over its quota and for how long
// it must wait. Both the client-quota engine (package quota) and connection
// admission (package admission) use it, so a byte rate and a connection
// rate are measured and throttled by the same code, bit for bit as Kafka 3.8.
//
// It owns:
//
//   - the sampled rate (Sampled): Kafka's SampledStat + WindowedSum + Rate
//     with the ≥ 3.8 algorithm (N+1 slots, purge by last event, a window
//     never shorter than (N−1)·W), cached so that the hot path does not scan
//     the samples on every record;
//   - Java's Math.round (JavaRound), which the throttle formulas depend on;
//   - the throttle formulas: QuotaUtils.throttleTime and
//     boundedThrottleTime (ThrottleTime, BoundedThrottleTime), the throttle
//     of a quota sensor's record as ClientQuotaManager uses it (ThrottleMs),
//     and the token-deficit throttle of ControllerMutationQuotaManager
//     (TokenThrottleTime);
//   - Kafka's TokenBucket stat (TokenBucket).
//
// It owns nothing else: no quota entities, no sensors' bounds or expiry, no
// locking. Times are Unix milliseconds passed in, like Kafka's
// Time.milliseconds(); nothing here reads a clock, starts a goroutine or
// keeps global state.
//
// It is a leaf: it must import nothing of this project (only the standard
// library), so that any package, data path included, may depend on it.
package rate
