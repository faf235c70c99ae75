package admission

import (
	"math"
	"testing"
)

// t0ms is an unaligned, wall-clock-like start: Kafka's MockTime starts at the
// current time, so windows never line up with whole seconds in its tests.
const t0ms int64 = 1_700_000_000_123

// TV1 (ClientQuotaManagerTest.testQuotaViolation): the sampled rate and the
// uncapped throttle formula, N=11, W=1 s, quota 500 B/s.
func TestRateTV1QuotaViolation(t *testing.T) {
	w := window{samples: 11, sizeMs: 1000}
	s := sensor{bound: 500}
	now := t0ms
	for i := range 10 {
		if got := s.record(w, 400, now, math.MaxInt64); got != 0 {
			t.Fatalf("record %d: throttle %d, want 0", i, got)
		}
		now += 1000
	}
	now += 500
	got := s.record(w, 2300, now, math.MaxInt64)
	if got != 2100 {
		t.Fatalf("burst throttle = %d, want 2100", got)
	}
	now += got
	for range 10 {
		s.record(w, 400, now, math.MaxInt64)
		now += 1000
	}
	if got := s.record(w, 0, now, math.MaxInt64); got != 0 {
		t.Fatalf("after the burst aged out: throttle %d, want 0", got)
	}
}

// TV3 (QuotaUtilsTest): throttle formula on a fresh rate, whose window is
// (N−1)·W, with and without the cap.
func TestThrottleTV3(t *testing.T) {
	tests := []struct {
		observed, quota float64
		n               int
		capMs           int64
		want            int64
	}{
		{100, 50, 3, math.MaxInt64, 2000},
		{55, 50, 2, 500, 100},
		{100, 50, 10, 500, 500},
	}
	for _, tc := range tests {
		var r rate
		w := window{samples: tc.n, sizeMs: 1000}
		ws := r.windowMs(w, t0ms)
		if got := throttleMs(tc.observed, tc.quota, ws, tc.capMs); got != tc.want {
			t.Errorf("observed %v quota %v N=%d cap %d: got %d, want %d", tc.observed, tc.quota, tc.n, tc.capMs, got, tc.want)
		}
	}
	// Equal to the quota is not a violation, below gives a negative value.
	if got := throttleMs(50, 50, 1000, 1000); got != 0 {
		t.Errorf("observed == quota: got %d, want 0", got)
	}
	if got := throttleMs(40, 50, 1000, 1000); got >= 0 {
		t.Errorf("observed < quota: got %d, want negative", got)
	}
}

// TV11 (RateTest.testRateWithNoPriorAvailableSamples).
func TestRateTV11NoPriorSamples(t *testing.T) {
	tests := []struct {
		n    int
		wSec int64
		want float64
	}{
		{1, 1, 50.05005},
		{1, 11, 4.545868},
		{11, 1, 4.545868},
		{11, 11, 0.413227},
	}
	for _, tc := range tests {
		w := window{samples: tc.n, sizeMs: tc.wSec * 1000}
		var r rate
		r.record(w, 50, t0ms)
		got, _ := r.measure(w, t0ms+w.sizeMs-1)
		if math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("N=%d W=%ds: rate %.6f, want %.6f", tc.n, tc.wSec, got, tc.want)
		}
	}
}

// TV12 (RateTest.testRateIsConsistentAfterTheFirstWindow): the ≥ 3.8
// algorithm stays in [10, 11]; the legacy one would collapse to 5.503 at the
// last step, so the last value tells the two apart.
func TestRateTV12ConsistentAfterFirstWindow(t *testing.T) {
	w := window{samples: 2, sizeMs: 1000}
	steps := []int64{0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100}
	want := []float64{10.909091, 10.842369, 10.777521, 10.721944, 10.673783, 10.631645,
		10.594467, 10.561423, 10.531859, 10.505253, 10.481182}
	var r rate
	now := t0ms
	for _, st := range steps {
		now += st
		r.record(w, 1, now)
	}
	now += 101
	for i, st := range steps {
		now += st
		r.record(w, 1, now)
		got, _ := r.measure(w, now)
		if math.Abs(got-want[i]) > 1e-6 {
			t.Errorf("step %d: rate %.6f, want %.6f", i, got, want[i])
		}
		if got < 10 || got > 11 {
			t.Errorf("step %d: rate %.6f outside [10, 11]", i, got)
		}
	}
}

// TV13 (SampledStatTest): purge by last event after N·W, and the N+1th slot.
func TestRateTV13Purge(t *testing.T) {
	w := window{samples: 2, sizeMs: 1000}
	// completeSample: events at the start and the end of a window; the clock
	// ends one window after the start.
	complete := func(r *rate, now int64) int64 {
		r.record(w, 1, now)
		r.record(w, 1, now+999)
		return now + 1000
	}
	live := func(r *rate, now int64) int {
		r.purge(w, now)
		n := 0
		for _, s := range r.samples {
			if s.value != 0 {
				n++
			}
		}
		return n
	}

	var purged rate
	now := complete(&purged, t0ms)
	if got := live(&purged, now+2500); got != 0 {
		t.Errorf("2.5 s after the sample: %d live samples, want 0", got)
	}

	var kept rate
	now = complete(&kept, t0ms)
	if got := live(&kept, now+1500); got != 1 {
		t.Errorf("1.5 s after the sample: %d live samples, want 1", got)
	}

	var extra rate
	now = complete(&extra, t0ms)
	now = complete(&extra, now+100)
	now += 100
	extra.record(w, 1, now)
	if got := live(&extra, now); got != 3 {
		t.Errorf("two samples plus one event: %d live samples, want 3 (the N+1 slot)", got)
	}
}

func TestJavaRound(t *testing.T) {
	tests := []struct {
		in   float64
		want int64
	}{
		{0, 0},
		{0.49999999999999994, 0}, // math.Floor(x+0.5) would say 1
		{0.5, 1},
		{1.5, 2},
		{2.5, 3},
		{-0.5, 0},
		{-1.5, -1},
		{-2.5, -2},
		{-2.6, -3},
		{49.99999, 50},
		{math.NaN(), 0},
		{math.Inf(1), math.MaxInt64},
		{math.Inf(-1), math.MinInt64},
		{1e300, math.MaxInt64},
	}
	for _, tc := range tests {
		if got := javaRound(tc.in); got != tc.want {
			t.Errorf("javaRound(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// A zero bound (an ip rate of 0) throttles for exactly the cap: +Inf rounds to
// Long.MAX_VALUE and the cap bounds it.
func TestThrottleZeroBound(t *testing.T) {
	w := window{samples: 11, sizeMs: 1000}
	s := sensor{bound: 0}
	if got := s.recordThrottle(w, t0ms); got != 1000 {
		t.Fatalf("throttle %d, want the 1000 ms cap", got)
	}
}
