package quota

import "math"

// roundHalfUp is Java's Math.round(double): the nearest integer, ties
// toward +∞, NaN to 0, saturating at the int64 range. It is usually written
// floor(x+0.5); that expression rounds 0.49999999999999994 up because the
// addition itself rounds, which Java fixed in JDK 7, so the fraction is
// compared exactly instead.
func roundHalfUp(x float64) int64 {
	switch {
	case x != x:
		return 0
	case x >= math.MaxInt64: // 2^63 as a float64
		return math.MaxInt64
	case x <= math.MinInt64:
		return math.MinInt64
	}
	f := math.Floor(x)
	if x-f >= 0.5 {
		f++
	}
	return int64(f)
}

// throttleTime is Kafka's QuotaUtils.throttleTime: the delay X that brings
// the rate back to the quota, from O·W/(W+X) = Q, i.e.
// round((O−Q)/Q × W). windowMs must be the window the rate was measured
// over. The result is ≤ 0 when observed ≤ quota.
func throttleTime(observed, quota float64, windowMs int64) int64 {
	return roundHalfUp((observed - quota) / quota * float64(windowMs))
}

// ThrottleMs returns the throttle in milliseconds for a client measured at
// observed per second over windowMs against quota; 0 means not throttled.
//
// Equal to the quota is not a violation, and a violation whose throttle
// rounds to 0 is not throttled either. capMs > 0 bounds the result, as
// Kafka does for request and connection quotas (QuotaUtils.
// boundedThrottleTime) and Tollgate does for byte rates; capMs ≤ 0 means no
// cap. Kafka converts the long to an int and would wrap; this saturates.
func ThrottleMs(observed, quota float64, windowMs, capMs int64) int32 {
	if !(observed > quota) {
		return 0
	}
	t := throttleTime(observed, quota, windowMs)
	if capMs > 0 && t > capMs {
		t = capMs
	}
	if t <= 0 {
		return 0
	}
	return int32(min(t, math.MaxInt32))
}
