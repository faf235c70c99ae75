package rate

import "math"

// JavaRound is java.lang.Math.round(double): the closest long, ties toward
// +∞, NaN to 0, saturating at the int64 range. It is usually written
// floor(x+0.5); that expression rounds 0.49999999999999994 up because the
// addition itself rounds, which Java fixed in JDK 7, so the fraction is
// compared exactly instead (x − floor(x) is exact for every finite double).
func JavaRound(x float64) int64 {
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
