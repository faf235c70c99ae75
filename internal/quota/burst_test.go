package quota

import (
	"math"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func burstQuotas(t *testing.T, k model.Key, e model.Entity, v float64, burst float64, has bool) model.Quotas {
	t.Helper()
	var q model.Quotas
	must(t, q.Set(e, k, v))
	must(t, q.SetOptions(e, model.Options{Burst: burst, HasBurst: has}))
	return q
}

// firstSecond runs a producer at full speed that waits out each throttle
// (a well-behaved Kafka client), on the engine's explicit clock, and
// returns the bytes sent in each of the first n seconds.
func fullSpeed(cl *Client, size int, n int) []int {
	out := make([]int, n)
	for now := int64(0); now < int64(n)*1000; {
		d := cl.RecordProduce(size, at(now))
		out[now/1000] += size
		now += max(d.Milliseconds(), 1)
	}
	return out
}

// The start-up burst per entity, in virtual time: with burst 0 a fresh
// client is held to Q from the first second; with 2 s it gets 2 s worth at
// once, then Q; without one, Kafka's 10 s.
func TestBurstPerEntity(t *testing.T) {
	const q, size = 1000, 100
	for _, tc := range []struct {
		name      string
		burst     float64
		has       bool
		firstMax  int // bytes in the first second, at most
		firstMin  int
		steadyMax int // any later second
	}{
		{"none", 0, true, q + size, q, q + size},
		{"2 s", 2, true, 3*q + size, 3 * q, q + size},
		{"Kafka's", 0, false, 11*q + size, 11 * q, q + size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true})
			u := model.UserEntity(model.Exact("alice"))
			e.SetQuotas(burstQuotas(t, model.ProducerByteRate, u, q, tc.burst, tc.has))
			secs := fullSpeed(e.Client("alice", "app"), size, 20)
			if secs[0] > tc.firstMax || secs[0] < tc.firstMin {
				t.Errorf("first second carried %d bytes, want %d–%d (%v)", secs[0], tc.firstMin, tc.firstMax, secs)
			}
			// After the burst is spent: Q a second (the 10 s one is
			// spent by second 10).
			for i := 11; i < len(secs); i++ {
				if secs[i] > tc.steadyMax || secs[i] < q-size {
					t.Errorf("second %d carried %d bytes, want about Q (%v)", i, secs[i], secs)
				}
			}
		})
	}
}

// The mutation token bucket takes the entity's burst too (Kafka's is
// N·W·Q = 11 s); strict mode refuses once the bucket is below zero.
func TestBurstMutations(t *testing.T) {
	for _, tc := range []struct {
		burst    float64
		has      bool
		accepted int
	}{{0, true, 1}, {2, true, 3}, {0, false, 12}} {
		e := newTestEngine(t, EngineConfig{})
		c := model.ClientEntity(model.Exact("c"))
		e.SetQuotas(burstQuotas(t, model.ControllerMutationRate, c, 1, tc.burst, tc.has))
		cl := e.Client("u", "c")
		n := 0
		for i := 0; i < 20; i++ {
			if _, exceeded := cl.RecordMutation(1, true, at(0)); !exceeded {
				n++
			}
		}
		if n != tc.accepted {
			t.Errorf("burst %v (set %v): %d of 20 partitions accepted at once, want %d", tc.burst, tc.has, n, tc.accepted)
		}
	}
}

// The fetch clamp follows the burst under the token bucket: a response
// never carries more than the bucket may hold (with burst 0, one batch).
func TestBurstFetchClamp(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket})
	c := model.ClientEntity(model.Exact("c"))
	e.SetQuotas(burstQuotas(t, model.ConsumerByteRate, c, 1000, 2, true))
	cl := e.Client("u", "c")
	if m := cl.FetchMaxBytes(at(0)); m != 2000 {
		t.Errorf("FetchMaxBytes %d, want 2000", m)
	}
	if clamp, _ := cl.ReserveFetch(1<<20, at(0)); clamp != 2000 {
		t.Errorf("clamp %d, want 2000", clamp)
	}
	e.SetQuotas(burstQuotas(t, model.ConsumerByteRate, c, 1000, 0, true))
	if clamp, _ := e.Client("u", "c").ReserveFetch(1<<20, at(0)); clamp != 1 {
		t.Errorf("burst 0: clamp %d, want 1 (one batch)", clamp)
	}
}

// Under Kafka's sampled rate the byte rates keep Kafka's arithmetic, whose
// burst is its window: the entity's burst does not apply there.
func TestBurstSampledKeepsKafkasWindow(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateSampled})
	u := model.UserEntity(model.Exact("alice"))
	e.SetQuotas(burstQuotas(t, model.ProducerByteRate, u, 1000, 0, true))
	if d := e.Client("alice", "app").RecordProduce(10_000, at(0)); d != 0 {
		t.Errorf("sampled: Q·(N−1)·W at once throttled %v", d)
	}
	if m := e.Client("alice", "app").FetchMaxBytes(at(0)); m != math.MaxInt32 {
		t.Errorf("no consumer quota: %d", m)
	}
}

// A changed burst keeps the bucket's tokens up to the new burst; a new
// value is validated.
func TestBurstChangeAndValidation(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket})
	u := model.UserEntity(model.Exact("alice"))
	e.SetQuotas(burstQuotas(t, model.ProducerByteRate, u, 1000, 0, false))
	cl := e.Client("alice", "app")
	if d := cl.RecordProduce(1000, at(0)); d != 0 { // 9 000 tokens left
		t.Fatalf("throttled %v", d)
	}
	e.SetQuotas(burstQuotas(t, model.ProducerByteRate, u, 1000, 2, true)) // at most 2 000 kept
	if d := cl.RecordProduce(3000, at(0)); d != time.Second {
		t.Errorf("after lowering the burst to 2 s: throttle %v, want 1s", d)
	}
	if u := e.Usage(at(0))[0]; !u.Options.HasBurst || u.Options.Burst != 2 {
		t.Errorf("usage options %+v", u.Options)
	}
	var q model.Quotas
	for _, b := range []float64{-1, model.MaxBurstSeconds + 1, math.NaN(), math.Inf(1)} {
		if err := q.SetOptions(u, model.Options{Burst: b, HasBurst: true}); err == nil {
			t.Errorf("burst %v accepted", b)
		}
	}
	must(t, q.SetOptions(u, model.Options{Burst: 5})) // not set: ignored
	if o := q.Options(u); o != (model.Options{}) {
		t.Errorf("a burst without HasBurst kept: %+v", o)
	}
}
