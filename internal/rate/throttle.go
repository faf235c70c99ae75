package rate

import "math"

// ThrottleTime is Kafka's QuotaUtils.throttleTime: the delay X that brings
// a rate back to its bound, from O·W/(W+X) = Q, i.e. round((O−Q)/Q × W).
// windowMs must be the window the rate was measured over (Sampled.Measure
// returns it). The result is ≤ 0 when observed ≤ bound. The evaluation
// order, difference ÷ bound × window, is Java's, so the doubles agree; a
// bound of 0 gives +∞, which rounds to math.MaxInt64.
func ThrottleTime(observed, bound float64, windowMs int64) int64 {
	return JavaRound((observed - bound) / bound * float64(windowMs))
}

// BoundedThrottleTime is Kafka's QuotaUtils.boundedThrottleTime:
// ThrottleTime, at most maxMs. ConnectionQuotas bounds every connection-rate
// throttle by the quota window this way (a zero-rate address is throttled
// for exactly the window), and ClientRequestQuotaManager every
// request-percentage throttle.
func BoundedThrottleTime(observed, bound float64, windowMs, maxMs int64) int64 {
	return min(ThrottleTime(observed, bound, windowMs), maxMs)
}

// ThrottleMs is the throttle a quota sensor's record returns, as
// ClientQuotaManager uses it: 0 unless observed > bound (equal to the bound
// is not a violation, Quota.acceptable), else ThrottleTime, at most capMs
// when capMs > 0 (capMs ≤ 0: no cap), never negative (a violation that
// rounds to 0 is not throttled). Kafka converts the long to an int and
// would wrap; this saturates at math.MaxInt32, the largest throttle_time_ms
// a response can carry.
func ThrottleMs(observed, bound float64, windowMs, capMs int64) int32 {
	if !(observed > bound) {
		return 0
	}
	t := ThrottleTime(observed, bound, windowMs)
	if capMs > 0 && t > capMs {
		t = capMs
	}
	if t <= 0 {
		return 0
	}
	return int32(min(t, math.MaxInt32))
}

// TokenThrottleTime is ControllerMutationQuotaManager's throttle for a
// TokenBucket holding tokens below zero: round(−tokens/Q × 1000), the time
// to refill to zero at quota per second. It is not capped, and it is ≤ 0
// when there is no deficit.
func TokenThrottleTime(tokens, quota float64) int64 {
	return JavaRound(-tokens / quota * 1000)
}
