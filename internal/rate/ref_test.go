package rate

import (
	"math/rand/v2"
	"testing"
)

// refRate is a literal transcription of Kafka's ≥ 3.8 SampledStat and Rate
// (§1.2 of the spec), scanning every sample on every call, used to check that
// Sampled's caches change nothing.
type refRate struct {
	n       int
	w       int64
	samples []sample
	cur     int
}

func (r *refRate) record(v float64, now int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	if now-r.samples[r.cur].start >= r.w {
		r.cur = (r.cur + 1) % (r.n + 1)
		if r.cur >= len(r.samples) {
			r.samples = append(r.samples, sample{start: now, last: now})
		} else {
			r.samples[r.cur].reset(now)
		}
	}
	s := &r.samples[r.cur]
	s.value += v
	s.events++
	s.last = now
}

func (r *refRate) purge(now int64) {
	for i := range r.samples {
		if now-r.samples[i].last >= int64(r.n)*r.w {
			r.samples[i].reset(now)
		}
	}
}

func (r *refRate) measure(now int64) (float64, int64) {
	r.purge(now)
	total := 0.0
	for _, s := range r.samples {
		total += s.value
	}
	r.purge(now)
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	oldest := r.samples[0].start
	for _, s := range r.samples {
		oldest = min(oldest, s.start)
	}
	elapsed := now - oldest
	full := elapsed / r.w
	if full < int64(r.n-1) {
		elapsed += (int64(r.n-1) - full) * r.w
	}
	return total, max(elapsed, 1)
}

func TestSampledMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + rng.IntN(12)
		w := int64(1 + rng.IntN(1500))
		fractional := round%3 == 0
		connections := round%3 == 1 // admission's records: +1, and −1 to un-record
		r := NewSampled(n, w)
		ref := &refRate{n: n, w: w}
		now := t0
		for step := range 400 {
			switch x := rng.IntN(100); {
			case x < 60:
				now += rng.Int64N(w * 2)
			case x < 70:
				now += rng.Int64N(w * int64(n+3))
			case x < 73:
				now -= rng.Int64N(w) // clocks can step back
			}
			if rng.IntN(4) > 0 {
				v := float64(rng.IntN(5000) - 500)
				if fractional && rng.IntN(2) == 0 {
					v = rng.Float64() * 7.3
				}
				if connections {
					v = float64(1 - 2*rng.IntN(2))
				}
				r.Record(v, now)
				ref.record(v, now)
			}
			gotT, gotW := r.measure(now)
			wantT, wantW := ref.measure(now)
			if gotT != wantT || gotW != wantW {
				t.Fatalf("round %d step %d (N=%d W=%d): got %v/%d, want %v/%d", round, step, n, w, gotT, gotW, wantT, wantW)
			}
			if p, pw := r.Peek(now); p != wantT/(float64(wantW)/1000) || pw != wantW {
				t.Fatalf("round %d step %d: Peek %v/%d", round, step, p, pw)
			}
		}
	}
}
