package quota

import (
	"math"
	"testing"
)

func TestRoundHalfUp(t *testing.T) {
	cases := []struct {
		x    float64
		want int64
	}{
		{0, 0}, {0.5, 1}, {1.5, 2}, {2.5, 3}, {-0.5, 0}, {-1.5, -1}, {-2.5, -2},
		{0.49999999999999994, 0}, // floor(x+0.5) would say 1; Java 7+ says 0
		{2374.9999, 2375}, {-0.4, 0}, {-0.6, -1},
		{math.NaN(), 0}, {math.Inf(1), math.MaxInt64}, {math.Inf(-1), math.MinInt64},
		{1e300, math.MaxInt64}, {4503599627370497, 4503599627370497},
	}
	for _, c := range cases {
		if got := roundHalfUp(c.x); got != c.want {
			t.Errorf("roundHalfUp(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TV3, QuotaUtilsTest: a fresh Rate, so the window is (N−1)·1 s.
func TestThrottleTV3QuotaUtils(t *testing.T) {
	cases := []struct {
		observed, quota float64
		n               int
		capMs           int64
		want            int32
	}{
		{100, 50, 3, 0, 2000},
		{55, 50, 2, 500, 100},
		{100, 50, 10, 500, 500}, // capped
		{50, 50, 10, 0, 0},      // equal to the quota is not a violation
		{40, 50, 10, 0, 0},      // below the quota
	}
	for _, c := range cases {
		r := NewRate(c.n, 1000)
		w := r.WindowSize(t0)
		if w != int64(c.n-1)*1000 {
			t.Fatalf("fresh window N=%d = %d", c.n, w)
		}
		if got := ThrottleMs(c.observed, c.quota, w, c.capMs); got != c.want {
			t.Errorf("ThrottleMs(%v, %v, %d, cap %d) = %d, want %d", c.observed, c.quota, w, c.capMs, got, c.want)
		}
	}
	// QuotaUtils.throttleTime itself is negative below the quota.
	if got := throttleTime(40, 50, 9000); got >= 0 {
		t.Errorf("throttleTime below quota = %d, want < 0", got)
	}
	if got := throttleTime(50, 50, 9000); got != 0 {
		t.Errorf("throttleTime at quota = %d, want 0", got)
	}
}

func TestThrottleRoundsToZeroIsNoThrottle(t *testing.T) {
	// (1024.25 − 1024)/1024 × 1024 = 0.25 ms: a violation that rounds to 0.
	if got := ThrottleMs(1024.25, 1024, 1024, 0); got != 0 {
		t.Errorf("= %d, want 0", got)
	}
	// Exactly 0.5 ms rounds up.
	if got := ThrottleMs(1024.5, 1024, 1024, 0); got != 1 {
		t.Errorf("= %d, want 1", got)
	}
}

func TestThrottleSaturatesInt32(t *testing.T) {
	if got := ThrottleMs(1e12, 1, 10000, 0); got != math.MaxInt32 {
		t.Errorf("= %d, want MaxInt32", got)
	}
}
