package rate

import "math"

// Sampled is Kafka's sampled rate (SampledStat + WindowedSum + Rate) as of
// Kafka 3.8.0, per second. It keeps up to N+1 samples of W milliseconds;
// samples are not aligned to the clock: a new one starts at the first record
// after the current one has lasted W.
//
// The 3.8 algorithm (commit 862ea12, "Fix rate metric spikes") differs from
// the older one in three ways that change throttle decisions, so all three
// are kept: N+1 slots instead of N, purge by a sample's last event instead of
// its start, and the window measured from the oldest live sample's start.
//
// Kafka scans every sample on every measure. On the hot path that scan costs
// more than everything else together, so Sampled caches the sum, the oldest
// start and the earliest time a purge can be due, and scans only when one of
// them may have changed: about once per W. The numbers are the same: sums of
// integral values (bytes, connections) are exact in any order, and once a
// fractional value is recorded the sum is taken in Kafka's slot order again.
//
// Times are Unix milliseconds, like Kafka's Time.milliseconds(). Make one
// with NewSampled; the zero value has no shape and must not be used. A
// Sampled is not safe for concurrent use, and copies of it share samples.
type Sampled struct {
	n        int
	windowMs int64
	expireMs int64    // N·W: a sample whose last event is this old is purged
	samples  []sample // allocated slots; cap is n+1
	cur      int

	total   float64 // running sum of the samples; exact while !inexact
	inexact bool    // a fractional or huge value was recorded: sum in slot order
	oldest  int64   // exact minimum start over the samples
	purgeAt int64   // no purge is due before this: ≤ min(last) + N·W
}

// sample is one slot of a WindowedSum.
type sample struct {
	value  float64
	events int64
	start  int64
	last   int64
}

func (s *sample) reset(nowMs int64) {
	s.value = 0
	s.events = 0
	s.start = nowMs
	s.last = nowMs
}

// NewSampled returns an empty rate over n samples of windowMs milliseconds
// (quota.window.num and quota.window.size.seconds × 1000). Both must be ≥ 1;
// callers pass validated configuration, so anything else panics.
func NewSampled(n int, windowMs int64) Sampled {
	if n < 1 || windowMs < 1 {
		panic("rate: NewSampled needs n ≥ 1 and windowMs ≥ 1")
	}
	// Two spare samples on each side (80 bytes) keep the ring, written on
	// every record, off cache lines shared with other allocations.
	buf := make([]sample, n+5)
	return Sampled{n: n, windowMs: windowMs, expireMs: int64(n) * windowMs, samples: buf[2 : 2 : n+3]}
}

// Samples returns N, the configured number of samples (0 for the zero
// value).
func (r *Sampled) Samples() int { return r.n }

// SampleMs returns W, the length of one sample in milliseconds.
func (r *Sampled) SampleMs() int64 { return r.windowMs }

// exactLimit bounds the values whose running sum stays exact in a float64.
const exactLimit = 1 << 52

// add appends a sample starting at nowMs.
func (r *Sampled) add(nowMs int64) {
	if len(r.samples) == 0 {
		r.oldest, r.purgeAt = nowMs, nowMs+r.expireMs
	}
	r.samples = append(r.samples, sample{start: nowMs, last: nowMs})
	r.cur = len(r.samples) - 1
	r.oldest = min(r.oldest, nowMs)
	r.lastMoved(nowMs)
}

// lastMoved keeps purgeAt a lower bound after a sample's last event moved to
// nowMs, which can only lower it if the clock went backwards.
func (r *Sampled) lastMoved(nowMs int64) {
	r.purgeAt = min(r.purgeAt, nowMs+r.expireMs)
}

// resetSample resets sample i at nowMs and keeps the caches exact.
func (r *Sampled) resetSample(i int, nowMs int64) {
	s := &r.samples[i]
	r.total -= s.value
	wasOldest := s.start == r.oldest
	s.reset(nowMs)
	if wasOldest {
		r.oldest = s.start
		for j := range r.samples {
			r.oldest = min(r.oldest, r.samples[j].start)
		}
	}
	r.oldest = min(r.oldest, nowMs)
	r.lastMoved(nowMs)
}

// Record adds v at nowMs. A negative v is how Kafka un-records a value (a
// throttled fetch, a parked connection).
func (r *Sampled) Record(v float64, nowMs int64) {
	if len(r.samples) == 0 {
		r.add(nowMs)
	}
	if nowMs-r.samples[r.cur].start >= r.windowMs {
		// The extra (N+1-th) slot keeps the sample that started just before
		// the N·W horizon alive while its last event is still inside it.
		next := (r.cur + 1) % (r.n + 1)
		if next >= len(r.samples) {
			r.add(nowMs)
		} else {
			r.cur = next
			r.resetSample(next, nowMs)
		}
	}
	s := &r.samples[r.cur]
	s.value += v
	s.events++
	s.last = nowMs
	r.total += v
	if v != float64(int64(v)) || v > exactLimit || v < -exactLimit || r.total > exactLimit || r.total < -exactLimit {
		r.inexact = true
	}
	r.lastMoved(nowMs)
}

// purge resets every sample whose last event is N·W or more in the past
// (SampledStat.purgeObsoleteSamples: the slot stays, its start moves to
// nowMs) and recomputes the caches.
func (r *Sampled) purge(nowMs int64) {
	minLast := int64(math.MaxInt64)
	r.total, r.oldest = 0, math.MaxInt64
	for i := range r.samples {
		s := &r.samples[i]
		if nowMs-s.last >= r.expireMs {
			s.reset(nowMs)
		}
		r.total += s.value
		minLast = min(minLast, s.last)
		r.oldest = min(r.oldest, s.start)
	}
	r.purgeAt = minLast + r.expireMs
}

// window turns the time since the oldest sample's start into the measuring
// window (Rate.windowSize). The (N−1)·W floor is what gives a fresh client a
// burst allowance of Q·(N−1)·W; max(…, 1) guards the division.
func (r *Sampled) window(oldestStart, nowMs int64) int64 {
	elapsed := nowMs - oldestStart
	full := elapsed / r.windowMs
	if minFull := int64(r.n - 1); full < minFull {
		elapsed += (minFull - full) * r.windowMs
	}
	return max(elapsed, 1)
}

// measure purges, then returns the sum of all samples and the window in ms.
// Kafka computes both with separate purges at the same instant; a purge is
// idempotent at a fixed time, so one purge gives the same numbers.
func (r *Sampled) measure(nowMs int64) (total float64, windowMs int64) {
	if len(r.samples) == 0 {
		// Kafka's oldest() creates a sample when there is none, and later
		// records land in it.
		r.add(nowMs)
	}
	if nowMs >= r.purgeAt {
		r.purge(nowMs)
	}
	total = r.total
	if r.inexact {
		total = 0
		for i := range r.samples {
			total += r.samples[i].value
		}
	}
	return total, r.window(r.oldest, nowMs)
}

// WindowSize returns the window in milliseconds that Measure divides by at
// nowMs (Rate.windowSize). Like Kafka it purges first.
func (r *Sampled) WindowSize(nowMs int64) int64 {
	_, w := r.measure(nowMs)
	return w
}

// Measure returns the rate per second at nowMs (Rate.measure) and the window
// it was computed over, which the throttle formulas must reuse. Like Kafka
// it purges obsolete samples, which moves their start to nowMs.
func (r *Sampled) Measure(nowMs int64) (perSecond float64, windowMs int64) {
	total, w := r.measure(nowMs)
	return total / (float64(w) / 1000), w
}

// Peek returns what Measure would return at nowMs without changing the
// rate. Observers (metrics, Resolve) use it so that looking at a rate never
// shifts its sample boundaries.
func (r *Sampled) Peek(nowMs int64) (perSecond float64, windowMs int64) {
	if len(r.samples) == 0 {
		return 0, r.window(nowMs, nowMs)
	}
	var total float64
	oldest := int64(0)
	for i := range r.samples {
		s := r.samples[i]
		if nowMs-s.last >= r.expireMs {
			s.value, s.start = 0, nowMs
		}
		total += s.value
		if i == 0 || s.start < oldest {
			oldest = s.start
		}
	}
	w := r.window(oldest, nowMs)
	return total / (float64(w) / 1000), w
}

// Reset forgets all samples, as when Kafka drops an expired sensor, and
// keeps the shape and the allocated slots.
func (r *Sampled) Reset() {
	r.samples = r.samples[:0]
	r.cur, r.total, r.inexact = 0, 0, false
}
