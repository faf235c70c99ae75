package quota

import (
	"math"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func shadowQuotas(t *testing.T, k model.Key, e model.Entity, v float64, shadow bool) model.Quotas {
	t.Helper()
	var q model.Quotas
	must(t, q.Set(e, k, v))
	must(t, q.SetOptions(e, model.Options{Shadow: shadow}))
	return q
}

// A shadow bucket is measured exactly as an enforced one: fed the same
// records, it counts the very throttles the enforced bucket imposes, under
// each byte-rate algorithm, with and without the shared deadline; and it
// imposes none.
func TestShadowMeasuresLikeEnforced(t *testing.T) {
	for _, alg := range []ByteRateAlgorithm{ByteRateTokenBucket, ByteRateSampled} {
		for _, shared := range []bool{false, true} {
			cfg := EngineConfig{ByteRate: alg, SharedDeadline: shared}
			enf, sh := newTestEngine(t, cfg), newTestEngine(t, cfg)
			u := model.UserEntity(model.Exact("alice"))
			enf.SetQuotas(shadowQuotas(t, model.ProducerByteRate, u, 1000, false))
			sh.SetQuotas(shadowQuotas(t, model.ProducerByteRate, u, 1000, true))
			ce, cs := enf.Client("alice", "a"), sh.Client("alice", "b")
			var n, throttled int64
			var total, longest time.Duration
			// 40 s of 3 000 B/s against 1 000: over the burst, then
			// throttled; then 20 s of silence and 10 s under the quota.
			for ms := int64(0); ms < 70_000; ms += 250 {
				size := 750
				if ms >= 40_000 && ms < 60_000 {
					continue
				}
				if ms >= 60_000 {
					size = 100
				}
				te := ce.RecordProduce(size, at(ms))
				if ts := cs.RecordProduce(size, at(ms)); ts != 0 {
					t.Fatalf("%v shared=%v: the shadow bucket throttled %v at %d ms", alg, shared, ts, ms)
				}
				n++
				if te > 0 {
					throttled++
					total += te
					longest = max(longest, te)
				}
			}
			us := sh.Usage(at(70_000))
			if len(us) != 1 || !us[0].Shadow || us[0].Throttles != 0 {
				t.Fatalf("%v: shadow usage %+v", alg, us)
			}
			want := model.ShadowStats{Records: n, Throttled: throttled, Total: total, Max: longest}
			if got := us[0].Shadowed; got != want || throttled == 0 || throttled == n {
				t.Errorf("%v shared=%v: shadow counted %+v, the enforced bucket imposed %+v", alg, shared, got, want)
			}
			ue := enf.Usage(at(70_000))[0]
			if ue.Throttles != throttled || ue.ThrottleTotal != total || ue.Shadow || ue.Shadowed != (model.ShadowStats{}) {
				t.Errorf("%v: enforced usage %+v", alg, ue)
			}
			if r := sh.Resolve(model.ProducerByteRate, "alice", "x", at(70_000)); !r.Options.Shadow || r.Shadowed != want {
				t.Errorf("%v: Resolve %+v", alg, r)
			}
		}
	}
}

// Nothing of enforcement reaches a shadow client: no hold, no fetch clamp,
// no produce hold, no mutation refused or throttled; the would-be outcomes
// are counted.
func TestShadowAppliesNothing(t *testing.T) {
	cfg := EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true}
	e := newTestEngine(t, cfg)
	var q model.Quotas
	c := model.ClientEntity(model.Exact("c"))
	must(t, q.Set(c, model.ProducerByteRate, 100))
	must(t, q.Set(c, model.ConsumerByteRate, 100))
	must(t, q.Set(c, model.ControllerMutationRate, 1))
	must(t, q.SetOptions(c, model.Options{Shadow: true}))
	e.SetQuotas(q)
	cl := e.Client("u", "c")
	cl.RecordProduce(1<<20, at(0))
	cl.RecordFetch(1<<20, at(0))
	if d := cl.Hold(model.ProducerByteRate, at(1)); d != 0 {
		t.Errorf("Hold %v", d)
	}
	if d, r := cl.HoldProduce(1<<20, at(1)); d != 0 || r != 0 {
		t.Errorf("HoldProduce %v %v", d, r)
	}
	if clamp, r := cl.ReserveFetch(50<<20, at(1)); clamp != 50<<20 || r != 0 {
		t.Errorf("ReserveFetch %v %v", clamp, r)
	}
	if m := cl.FetchMaxBytes(at(1)); m != math.MaxInt32 {
		t.Errorf("FetchMaxBytes %v", m)
	}
	for _, strict := range []bool{true, false} {
		for i := 0; i < 30; i++ {
			if d, exceeded := cl.RecordMutation(1, strict, at(2)); d != 0 || exceeded {
				t.Fatalf("strict=%v mutation %d: throttle %v exceeded %v", strict, i, d, exceeded)
			}
		}
	}
	if d, ex := cl.CheckMutation(at(2)); d != 0 || ex {
		t.Errorf("CheckMutation %v %v", d, ex)
	}
	for _, u := range e.Usage(at(2)) {
		if u.Throttles != 0 || u.Shadowed.Throttled == 0 {
			t.Errorf("%v: throttles %d, shadowed %+v", u.Key, u.Throttles, u.Shadowed)
		}
		if u.Key == model.ControllerMutationRate {
			// 60 mutations against 11 tokens: every one charged (each
			// passed). Strict would have refused the 18 of 30 that came
			// with the bucket below zero (from the 13th); permissive
			// would have throttled all 30 that followed.
			if u.Tokens != 11-60 || u.Shadowed.Records != 60 || u.Shadowed.Throttled != 18+30 {
				t.Errorf("mutations: tokens %v, shadowed %+v", u.Tokens, u.Shadowed)
			}
		}
	}
}

// Switching to enforced (and back) starts the bucket's accounting afresh,
// as a bucket new to the quota: the debt a shadow client ran up is not
// turned into throttles. The shadow counters are kept.
func TestShadowSwitchToEnforced(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true})
	u := model.UserEntity(model.Exact("alice"))
	e.SetQuotas(shadowQuotas(t, model.ProducerByteRate, u, 1000, true))
	cl := e.Client("alice", "a")
	for ms := int64(0); ms < 60_000; ms += 100 {
		cl.RecordProduce(1000, at(ms)) // 10 000 B/s against 1 000: an hour of debt in a minute
	}
	before := e.Usage(at(60_000))[0].Shadowed
	if before.Throttled == 0 || before.Max != DefaultMaxThrottle {
		t.Fatalf("shadow stats %+v", before)
	}
	e.SetQuotas(shadowQuotas(t, model.ProducerByteRate, u, 1000, false))
	// A fresh bucket: the start-up burst (10 000 bytes), then throttled.
	if d := cl.RecordProduce(9000, at(60_001)); d != 0 {
		t.Errorf("first request after the switch throttled %v: the shadow debt was carried over", d)
	}
	if d := cl.RecordProduce(3000, at(60_001)); d != 2*time.Second {
		t.Errorf("over the fresh burst: throttle %v, want 2s", d)
	}
	if d := cl.Hold(model.ProducerByteRate, at(60_002)); d == 0 {
		t.Error("an enforced bucket over its quota does not hold")
	}
	after := e.Usage(at(60_002))[0]
	if after.Shadow || after.Shadowed != before || after.Throttles != 1 {
		t.Errorf("after the switch: %+v", after)
	}
	// Back to shadow: fresh again, nothing held.
	e.SetQuotas(shadowQuotas(t, model.ProducerByteRate, u, 1000, true))
	if d := cl.Hold(model.ProducerByteRate, at(60_003)); d != 0 {
		t.Errorf("shadow again: hold %v", d)
	}
}

// Options are an entity's: a bucket takes its own entity's, per key.
func TestShadowOptionsFollowTheEntity(t *testing.T) {
	var q model.Quotas
	alice, app := model.UserEntity(model.Exact("alice")), model.ClientEntity(model.Exact("app"))
	must(t, q.Set(alice, model.ProducerByteRate, 100))
	must(t, q.Set(app, model.ConsumerByteRate, 100))
	must(t, q.SetOptions(alice, model.Options{Shadow: true}))
	if r := q.Resolve(model.ProducerByteRate, "alice", "app"); !r.Options.Shadow {
		t.Errorf("produce: %+v", r)
	}
	if r := q.Resolve(model.ConsumerByteRate, "alice", "app"); r.Options.Shadow || r.Entity != app {
		t.Errorf("fetch, bounded by the client-id entity: %+v", r)
	}
	c := q.Clone()
	must(t, q.SetOptions(alice, model.Options{}))
	if q.Options(alice).Shadow || !c.Options(alice).Shadow {
		t.Error("options not cloned, or not cleared")
	}
	if err := q.SetOptions(model.Entity{}, model.Options{Shadow: true}); err == nil {
		t.Error("options on an empty entity accepted")
	}
	if s := (model.ShadowStats{Records: 8, Throttled: 1, Max: 340 * time.Millisecond}).String(); s != "would have throttled 12.5 % of 8 requests, by up to 340ms" {
		t.Errorf("String = %q", s)
	}
}
