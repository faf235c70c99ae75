package rate

import (
	"math"
	"testing"
)

func TestJavaRound(t *testing.T) {
	cases := []struct {
		x    float64
		want int64
	}{
		{0, 0}, {0.5, 1}, {1.5, 2}, {2.5, 3}, {-0.5, 0}, {-1.5, -1}, {-2.5, -2}, {-2.6, -3},
		{0.49999999999999994, 0}, // floor(x+0.5) would say 1; Java 7+ says 0
		{2374.9999, 2375}, {49.99999, 50}, {-0.4, 0}, {-0.6, -1},
		{math.NaN(), 0}, {math.Inf(1), math.MaxInt64}, {math.Inf(-1), math.MinInt64},
		{1e300, math.MaxInt64}, {-1e300, math.MinInt64}, {4503599627370497, 4503599627370497},
	}
	for _, c := range cases {
		if got := JavaRound(c.x); got != c.want {
			t.Errorf("JavaRound(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TV3, QuotaUtilsTest: a fresh rate, so the window is (N−1)·1 s. ThrottleMs
// is the client-quota form (no cap when capMs ≤ 0), BoundedThrottleTime the
// connection-quota form (QuotaUtils.boundedThrottleTime).
func TestThrottleTV3QuotaUtils(t *testing.T) {
	cases := []struct {
		observed, quota float64
		n               int
		capMs           int64
		want            int32
		bounded         int64 // BoundedThrottleTime with max = capMs, or MaxInt64 when capMs is 0
	}{
		{100, 50, 3, 0, 2000, 2000},
		{55, 50, 2, 500, 100, 100},
		{100, 50, 10, 500, 500, 500}, // capped
		{50, 50, 10, 0, 0, 0},        // equal to the quota is not a violation
		{40, 50, 10, 0, 0, -1800},    // below the quota; throttleTime itself is negative
	}
	for _, c := range cases {
		r := NewSampled(c.n, 1000)
		w := r.WindowSize(t0)
		if w != int64(c.n-1)*1000 {
			t.Fatalf("fresh window N=%d = %d", c.n, w)
		}
		if got := ThrottleMs(c.observed, c.quota, w, c.capMs); got != c.want {
			t.Errorf("ThrottleMs(%v, %v, %d, cap %d) = %d, want %d", c.observed, c.quota, w, c.capMs, got, c.want)
		}
		maxMs := c.capMs
		if maxMs == 0 {
			maxMs = math.MaxInt64
		}
		if got := BoundedThrottleTime(c.observed, c.quota, w, maxMs); got != c.bounded {
			t.Errorf("BoundedThrottleTime(%v, %v, %d, %d) = %d, want %d", c.observed, c.quota, w, maxMs, got, c.bounded)
		}
	}
}

func TestThrottleEdges(t *testing.T) {
	cases := []struct {
		name            string
		observed, quota float64
		windowMs, capMs int64
		want            int32
	}{
		// (1024.25 − 1024)/1024 × 1024 = 0.25 ms: a violation that rounds to 0.
		{"rounds to 0", 1024.25, 1024, 1024, 0, 0},
		{"exactly 0.5 ms rounds up", 1024.5, 1024, 1024, 0, 1},
		{"no cap saturates int32", 1e12, 1, 10000, 0, math.MaxInt32},
		{"zero bound, capped", 1, 0, 10000, 1000, 1000},
		{"zero bound, no cap", 1, 0, 10000, 0, math.MaxInt32},
	}
	for _, c := range cases {
		if got := ThrottleMs(c.observed, c.quota, c.windowMs, c.capMs); got != c.want {
			t.Errorf("%s: ThrottleMs = %d, want %d", c.name, got, c.want)
		}
	}
}

// A zero connection rate (an address allowed 0 connections/s) is throttled
// for exactly the bound: +Inf rounds to Long.MAX_VALUE and the window caps
// it, as ConnectionQuotas does.
func TestBoundedThrottleZeroBound(t *testing.T) {
	r := NewSampled(11, 1000)
	r.Record(1, t0)
	o, w := r.Measure(t0)
	if got := BoundedThrottleTime(o, 0, w, 1000); got != 1000 {
		t.Errorf("zero bound: %d, want the 1000 ms bound", got)
	}
	if got := ThrottleTime(o, 0, w); got != math.MaxInt64 {
		t.Errorf("zero bound unbounded: %d, want MaxInt64", got)
	}
}

// TV6, ControllerMutationQuotaManagerTest.testThrottleTime: tokens 0, −5,
// −10 with quota 10.
func TestTokenThrottleTimeTV6(t *testing.T) {
	for _, c := range []struct {
		tokens float64
		want   int64
	}{{0, 0}, {-5, 500}, {-10, 1000}, {-0.004, 0}, {-0.006, 1}, {5, -500}} {
		if got := TokenThrottleTime(c.tokens, 10); got != c.want {
			t.Errorf("TokenThrottleTime(%v, 10) = %d, want %d", c.tokens, got, c.want)
		}
	}
}
