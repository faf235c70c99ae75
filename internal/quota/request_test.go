package quota

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Kafka's ClientRequestQuotaManagerTest.testRequestPercentageQuotaViolation,
// step for step: request_percentage 1 (10 ms of thread time a second) for
// (ANONYMOUS, test-client), Kafka's 11 windows of 1 s; every throttle the
// Kafka test asserts is asserted here, and the ones it leaves open are
// bounded by the window.
func TestRequestQuotaKafkaVector(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.RequestPercentage, entry{ent(ex("ANONYMOUS"), ex("test-client")), 1}))
	c := e.Client("ANONYMOUS", "test-client")
	now := int64(0)
	record := func(d time.Duration) time.Duration { return c.RecordRequest(d, at(now)) }
	const four = 4 * time.Millisecond

	// Under the quota for 10 s: 4 ms a second.
	for i := 0; i < 10; i++ {
		if got := record(four); got != 0 {
			t.Fatalf("t=%d: throttled %v under the quota", now, got)
		}
		now += 1000
	}
	// A spike: (40 + 67.1 ms) over 10.5 s is 10.2 ms/s, 2% over:
	// (10.2 − 10)/10 × 10 500 ms = 210 ms.
	now -= 500
	if got := record(67100 * time.Microsecond); got != 210*time.Millisecond {
		t.Fatalf("spike: throttle %v, want 210ms", got)
	}
	now += 210
	// Delays may continue until the burst's sample leaves the window.
	for i := 0; i < 11; i++ {
		if got := record(four); got < 0 || got > time.Second {
			t.Fatalf("t=%d: throttle %v, outside 0–1s", now, got)
		}
		now += 1000
	}
	if got := record(0); got != 0 {
		t.Fatalf("t=%d: throttle %v after the burst rolled over", now, got)
	}
	// A spike that needs more than one window to come back under the
	// quota is throttled exactly one window, each second, until its
	// sample rolls over.
	if got := record(500 * time.Millisecond); got != time.Second {
		t.Fatalf("large spike: throttle %v, want the 1s window", got)
	}
	for i := 0; i < 10; i++ {
		now += 1000
		if got := record(0); got != time.Second {
			t.Fatalf("t=%d: throttle %v, want 1s", now, got)
		}
	}
	now += 1000
	if got := record(0); got != 0 {
		t.Fatalf("t=%d: throttle %v after the large spike rolled over", now, got)
	}
}

// The request quota's throttle is bounded by one window as Kafka bounds it,
// also when the gateway shares a bucket's deadline across connections, and
// by quota.max_throttle when that is shorter.
func TestRequestQuotaThrottleBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  EngineConfig
		want time.Duration
	}{
		{"kafka", EngineConfig{}, time.Second},
		{"shared deadline", EngineConfig{SharedDeadline: true}, time.Second},
		{"window 2s", EngineConfig{WindowSize: 2 * time.Second}, 2 * time.Second},
		{"max_throttle shorter", EngineConfig{MaxThrottle: 300 * time.Millisecond}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, tc.cfg)
			e.SetQuotas(quotasOf(t, model.RequestPercentage, entry{ent(none, deflt), 5}))
			c := e.Client("u", "c")
			// 10 s of thread time at once: 1000% over ≥ 10 s, 200 × Q.
			if got := c.RecordRequest(10*time.Second, at(0)); got != tc.want {
				t.Errorf("throttle %v, want %v", got, tc.want)
			}
			if got := c.Hold(model.RequestPercentage, at(1)); tc.cfg.SharedDeadline && got != tc.want-time.Millisecond {
				t.Errorf("hold %v, want the rest of the deadline", got)
			} else if !tc.cfg.SharedDeadline && got != 0 {
				t.Errorf("hold %v without a shared deadline", got)
			}
		})
	}
}

// Kafka's unit: nanoseconds × 100 / 10⁹. A client using exactly its quota's
// share of time over the whole window is not throttled (equal is not a
// violation); a millisecond more is.
func TestRequestQuotaUnit(t *testing.T) {
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.RequestPercentage, entry{ent(none, deflt), 50}))
	c := e.Client("u", "c")
	// 50% of a thread over the first (N−1)·W = 10 s is 5 s.
	if got := c.RecordRequest(5*time.Second, at(0)); got != 0 {
		t.Fatalf("exactly the quota: throttle %v", got)
	}
	// 1 ms more: (50.01 − 50)/50 × 10 000 ms = 2 ms.
	if got := c.RecordRequest(time.Millisecond, at(0)); got != 2*time.Millisecond {
		t.Fatalf("1 ms over: throttle %v, want 2ms", got)
	}
}

func TestRequestMeter(t *testing.T) {
	ms := func(n int64) time.Time { return at(n) }
	type step struct {
		fwd, now int64 // ms from t0; fwd −1: not forwarded
		wait     time.Duration
		want     time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the first answer opened the connection", []step{
			{0, 50, 0, 0}, {60, 65, 0, 5 * time.Millisecond},
		}},
		{"one at a time: forwarded to answered", []step{
			{0, 1, 0, 0}, {10, 13, 0, 3 * time.Millisecond}, {20, 21, 0, time.Millisecond},
		}},
		{"pipelined: each from the answer before it", []step{
			{0, 1, 0, 0},
			// three forwarded at 10, answered at 12, 14, 16: 2 ms each,
			// not 2, 4 and 6 ms.
			{10, 12, 0, 2 * time.Millisecond}, {10, 14, 0, 2 * time.Millisecond}, {10, 16, 0, 2 * time.Millisecond},
		}},
		{"a long poll that expired: only the time beyond max_wait and its slack", []step{
			{0, 1, 0, 0}, {10, 563, 500 * time.Millisecond, 3 * time.Millisecond},
		}},
		{"an answer a tenth of the wait late is the wait's", []step{
			{0, 1, 0, 0}, {10, 560, 500 * time.Millisecond, 0},
		}},
		{"the slack is 100 ms at most", []step{
			{0, 1, 0, 0}, {10, 5113, 5 * time.Second, 3 * time.Millisecond},
		}},
		{"a long poll answered with data before max_wait: nothing", []step{
			{0, 1, 0, 0}, {10, 200, 500 * time.Millisecond, 0},
		}},
		{"a wait is subtracted from its own request only", []step{
			{0, 1, 0, 0}, {10, 560, 500 * time.Millisecond, 0}, {10, 580, 0, 20 * time.Millisecond},
		}},
		{"not forwarded: nothing, and the next one is still measured", []step{
			{0, 1, 0, 0}, {-1, 5, 0, 0}, {10, 12, 0, 2 * time.Millisecond},
		}},
		{"a clock that goes back charges nothing", []step{
			{0, 1, 0, 0}, {10, 9, 0, 0}, {20, 25, 0, 5 * time.Millisecond},
		}},
		{"a negative wait is none", []step{
			{0, 1, 0, 0}, {10, 14, -time.Second, 4 * time.Millisecond},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m RequestMeter
			for i, s := range tc.steps {
				var fwd time.Time
				if s.fwd >= 0 {
					fwd = ms(s.fwd)
				}
				if got := m.Charge(fwd, ms(s.now), s.wait); got != s.want {
					t.Errorf("step %d: charge %v, want %v", i, got, s.want)
				}
			}
		})
	}
}
