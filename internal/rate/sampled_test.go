package rate

import (
	"math"
	"testing"
)

// t0 is an arbitrary, unaligned wall-clock-like start: Kafka's MockTime
// starts at the current time, which is not aligned to windows either.
const t0 int64 = 1_700_000_000_123

// sensorStep is one record into a quota sensor: at t0+at, record value, and
// expect the throttle (0: not throttled).
type sensorStep struct {
	at       int64
	value    float64
	throttle int32
}

// recordAndCheck is Kafka's Sensor.record(v, now, checkQuotas=true) on a
// sensor with one Rate: record first, then measure and compare with the
// bound, computing the throttle over the same window.
func recordAndCheck(r *Sampled, v, bound float64, nowMs, capMs int64) int32 {
	r.Record(v, nowMs)
	rate, w := r.Measure(nowMs)
	return ThrottleMs(rate, bound, w, capMs)
}

// TV1, ClientQuotaManagerTest.testQuotaViolation: N=11, W=1 s, quota 500 B/s.
// The 2100 ms and the final 0 are asserted by Kafka; the values in between
// are derived from the same algorithm (spec oracle).
func TestSampledTV1QuotaViolation(t *testing.T) {
	steps := []sensorStep{
		{0, 400, 0}, {1000, 400, 0}, {2000, 400, 0}, {3000, 400, 0}, {4000, 400, 0},
		{5000, 400, 0}, {6000, 400, 0}, {7000, 400, 0}, {8000, 400, 0}, {9000, 400, 0},
		// Sum 6300 over 10 500 ms = 600/s; (600−500)/500 × 10 500 = 2100. [test]
		{10500, 2300, 2100},
		// Advance by the throttle, then 10 × (400 B, 1 s). [derived]
		{12600, 400, 1200}, {13600, 400, 1200}, {14600, 400, 1200}, {15600, 400, 1200},
		{16600, 400, 1200}, {17600, 400, 1200}, {18600, 400, 1200}, {19600, 400, 1200},
		{20600, 400, 1700}, {21600, 400, 0},
		// The burst has aged out. [test]
		{22600, 0, 0},
	}
	r := NewSampled(11, 1000)
	for i, s := range steps {
		if got := recordAndCheck(&r, s.value, 500, t0+s.at, 0); got != s.throttle {
			t.Errorf("step %d (t0+%d, record %v): throttle %d ms, want %d", i, s.at, s.value, got, s.throttle)
		}
	}
}

// TV2, ClientRequestQuotaManagerTest.testRequestPercentageQuotaViolation:
// request_percentage = 1 (10 ms of thread time per second), throttle capped
// at the 1000 ms window. Values are in ms of thread time; Kafka records
// nanoseconds × 100 / 1e9.
func TestSampledTV2RequestPercentage(t *testing.T) {
	type step struct {
		at       int64
		threadMs float64
		throttle int32
	}
	steps := []step{
		{0, 4, 0}, {1000, 4, 0}, {2000, 4, 0}, {3000, 4, 0}, {4000, 4, 0},
		{5000, 4, 0}, {6000, 4, 0}, {7000, 4, 0}, {8000, 4, 0}, {9000, 4, 0},
		// 10.2 ms/s over 10.5 s: (10.2−10)/10 × 10 500 = 210. [test]
		{10500, 67.1, 210},
		// 11 windows of 4 ms each. [derived]
		{10710, 4, 400}, {11710, 4, 400}, {12710, 4, 400}, {13710, 4, 400}, {14710, 4, 400},
		{15710, 4, 400}, {16710, 4, 400}, {17710, 4, 400}, {18710, 4, 400}, {19710, 4, 400},
		{20710, 4, 900},
		{21710, 0, 0}, // [test]
		// 500 ms: uncapped 40 000, capped at the window. [test]
		{21710, 500, 1000},
		{22710, 0, 1000}, {23710, 0, 1000}, {24710, 0, 1000}, {25710, 0, 1000}, {26710, 0, 1000},
		{27710, 0, 1000}, {28710, 0, 1000}, {29710, 0, 1000}, {30710, 0, 1000}, {31710, 0, 1000},
		{32710, 0, 0}, // [test]
	}
	r := NewSampled(11, 1000)
	for i, s := range steps {
		v := float64(int64(s.threadMs*1e6)) * (100.0 / 1e9)
		if got := recordAndCheck(&r, v, 1, t0+s.at, 1000); got != s.throttle {
			t.Errorf("step %d (t0+%d, %v ms): throttle %d, want %d", i, s.at, s.threadMs, got, s.throttle)
		}
	}
	// The uncapped value of the 500 ms spike on a fresh sensor.
	fresh := NewSampled(11, 1000)
	fresh.Record(500e6*(100.0/1e9), t0)
	spike, w := fresh.Measure(t0)
	if got := ThrottleTime(spike, 1, w); got != 40000 {
		t.Errorf("uncapped spike = %d, want 40000", got)
	}
}

// TV11, RateTest.testRateWithNoPriorAvailableSamples: record 50 at t0,
// measure at t0 + W − 1 ms: 50 / ((W − 1 ms) + (N−1)·W).
func TestSampledTV11NoPriorSamples(t *testing.T) {
	cases := []struct {
		n    int
		wSec int64
		want float64
	}{
		{1, 1, 50.05005},
		{1, 11, 4.545868},
		{11, 1, 4.545868},
		{11, 11, 0.413227},
	}
	for _, c := range cases {
		r := NewSampled(c.n, c.wSec*1000)
		r.Record(50, t0)
		got, _ := r.Measure(t0 + c.wSec*1000 - 1)
		exact := 50 / (float64(c.wSec*1000-1)/1000 + float64(c.n-1)*float64(c.wSec))
		if math.Abs(got-exact) > 1e-12 || math.Abs(got-c.want) > 5e-6 {
			t.Errorf("N=%d W=%ds: rate %.9f, want %.6f (exact %.9f)", c.n, c.wSec, got, c.want, exact)
		}
	}
}

// TV12, RateTest.testRateIsConsistentAfterTheFirstWindow: N=2, W=1 s. The
// rate must stay in [10, 11] through the second round; the legacy (pre-3.8)
// algorithm drops to 5.503 at the last step.
func TestSampledTV12ConsistentAfterFirstWindow(t *testing.T) {
	gaps := []int64{0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100}
	want := []float64{ // Kafka ≥ 3.8, [derived]
		10.909090909090908, 10.842368640533778, 10.777521170130871, 10.72194424588992,
		10.67378252168112, 10.631644777986242, 10.59446733372572, 10.56142301278488,
		10.5318588730911, 10.505252626313156, 10.481181515007146,
	}
	r := NewSampled(2, 1000)
	now := t0
	for _, g := range gaps {
		now += g
		r.Record(1, now)
	}
	now += 101
	for i, g := range gaps {
		now += g
		r.Record(1, now)
		got, _ := r.Measure(now)
		if got < 10 || got > 11 {
			t.Errorf("step %d: rate %.3f outside [10, 11]", i, got)
		}
		if math.Abs(got-want[i]) > 1e-9 {
			t.Errorf("step %d: rate %.12f, want %.12f", i, got, want[i])
		}
	}
}

// liveSamples counts samples holding at least one event after a purge at
// nowMs: what SampledStatTest's SampleCount stat measures.
func liveSamples(r *Sampled, nowMs int64) int {
	r.purge(nowMs)
	n := 0
	for _, s := range r.samples {
		if s.events > 0 {
			n++
		}
	}
	return n
}

// TV13, SampledStatTest: N=2, W=1 s; purge by last event, N+1 slots.
func TestSampledTV13SampledStat(t *testing.T) {
	// completeSample records at the start and the end of a sample and
	// leaves the clock at its end.
	completeSample := func(r *Sampled, now int64) int64 {
		r.Record(1, now)
		now += 999
		r.Record(1, now)
		return now + 1
	}
	cases := []struct {
		name string
		run  func(r *Sampled) int64 // returns the measuring time
		want int
	}{
		{"purged 2.5 s after its end", func(r *Sampled) int64 {
			return completeSample(r, t0) + 2500
		}, 0},
		{"kept 1.5 s after its end", func(r *Sampled) int64 {
			return completeSample(r, t0) + 1500
		}, 1},
		{"kept as the N+1-th sample", func(r *Sampled) int64 {
			now := completeSample(r, t0) + 100
			now = completeSample(r, now) + 100
			r.Record(1, now)
			return now
		}, 3},
	}
	for _, c := range cases {
		r := NewSampled(2, 1000)
		now := c.run(&r)
		if got := liveSamples(&r, now); got != c.want {
			t.Errorf("%s: %d live samples, want %d", c.name, got, c.want)
		}
	}
}

// The window never drops below (N−1)·W, so a fresh client gets a burst of
// Q·(N−1)·W: 10 000 B at 1000 B/s passes, 10 001 B is throttled 1 ms.
func TestSampledBurstAllowance(t *testing.T) {
	for _, c := range []struct {
		bytes float64
		want  int32
	}{{10000, 0}, {10001, 1}} {
		r := NewSampled(11, 1000)
		if got := recordAndCheck(&r, c.bytes, 1000, t0, 0); got != c.want {
			t.Errorf("burst %v: throttle %d, want %d", c.bytes, got, c.want)
		}
	}
}

// Negative records un-record, as for throttled fetches and parked
// connections.
func TestSampledUnrecord(t *testing.T) {
	r := NewSampled(11, 1000)
	r.Record(20000, t0)
	r.Record(-20000, t0)
	if got, _ := r.Measure(t0); got != 0 {
		t.Errorf("rate after unrecord = %v, want 0", got)
	}
}

// Peek reports what Measure would, without moving purged samples' starts.
func TestSampledPeekDoesNotMutate(t *testing.T) {
	a, b := NewSampled(2, 1000), NewSampled(2, 1000)
	for _, r := range []*Sampled{&a, &b} {
		r.Record(5, t0)
		r.Record(5, t0+1500)
	}
	peekAt := t0 + 4000
	rate, w := a.Peek(peekAt)
	if want, ww := b.Measure(peekAt); rate != want || w != ww {
		t.Errorf("Peek = %v/%d, Measure = %v/%d", rate, w, want, ww)
	}
	// b was purged at peekAt, a was not: a record 600 ms later opens a new
	// sample in a but lands in b's reset sample.
	a.Record(1, peekAt+600)
	c := NewSampled(2, 1000)
	c.Record(5, t0)
	c.Record(5, t0+1500)
	c.Record(1, peekAt+600)
	ra, _ := a.Measure(peekAt + 700)
	rc, _ := c.Measure(peekAt + 700)
	if ra != rc {
		t.Errorf("Peek changed the rate: %v vs untouched %v", ra, rc)
	}
}

// Reset forgets the samples and keeps the shape: the next record starts a
// fresh window with the (N−1)·W floor again.
func TestSampledReset(t *testing.T) {
	r := NewSampled(3, 500)
	r.Record(100, t0)
	r.Record(100, t0+700)
	r.Reset()
	if r.Samples() != 3 || r.SampleMs() != 500 {
		t.Fatalf("shape after Reset: N=%d W=%d", r.Samples(), r.SampleMs())
	}
	r.Record(10, t0+800)
	if got, w := r.Measure(t0 + 800); got != 10 || w != 1000 {
		t.Errorf("after Reset: %v/s over %d ms, want 10/s over 1000 ms", got, w)
	}
}

func TestNewSampledRefusesNoShape(t *testing.T) {
	for _, c := range []struct {
		n int
		w int64
	}{{0, 1000}, {11, 0}, {-1, 1000}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewSampled(%d, %d) did not panic", c.n, c.w)
				}
			}()
			NewSampled(c.n, c.w)
		}()
	}
}
