package quota

// Rate is Kafka's sampled rate (SampledStat + WindowedSum + Rate) as of
// Kafka 3.8.0, per second. It keeps up to N+1 samples of W milliseconds;
// samples are not aligned to the clock: a new one starts at the first record
// after the current one has lasted W.
//
// The 3.8 algorithm (commit 862ea12, "Fix rate metric spikes") differs from
// the older one in three ways that change throttle decisions, so all three
// are kept: N+1 slots instead of N, purge by a sample's last event instead of
// its start, and the window measured from the oldest live sample's start.
//
// Times are Unix milliseconds, like Kafka's Time.milliseconds(). A Rate is
// not safe for concurrent use.
type Rate struct {
	n        int
	windowMs int64
	samples  []sample // allocated slots; cap is n+1
	cur      int
}

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

// NewRate returns an empty rate over n samples of windowMs milliseconds
// (quota.window.num and quota.window.size.seconds × 1000). Both must be ≥ 1.
func NewRate(n int, windowMs int64) Rate {
	if n < 1 || windowMs < 1 {
		panic("quota: NewRate needs n ≥ 1 and windowMs ≥ 1")
	}
	return Rate{n: n, windowMs: windowMs, samples: make([]sample, 0, n+1)}
}

// Samples returns N, the configured number of samples.
func (r *Rate) Samples() int { return r.n }

// SampleMs returns W, the length of one sample in milliseconds.
func (r *Rate) SampleMs() int64 { return r.windowMs }

// Record adds v at nowMs. A negative v is how Kafka un-records a value (a
// throttled fetch, a parked connection).
func (r *Rate) Record(v float64, nowMs int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: nowMs, last: nowMs})
		r.cur = 0
	}
	s := &r.samples[r.cur]
	if nowMs-s.start >= r.windowMs {
		// The extra (N+1-th) slot keeps the sample that started just before
		// the N·W horizon alive while its last event is still inside it.
		r.cur = (r.cur + 1) % (r.n + 1)
		if r.cur >= len(r.samples) {
			r.samples = append(r.samples, sample{start: nowMs, last: nowMs})
		} else {
			r.samples[r.cur].reset(nowMs)
		}
		s = &r.samples[r.cur]
	}
	s.value += v
	s.events++
	s.last = nowMs
}

// purge resets every sample whose last event is N·W or more in the past.
func (r *Rate) purge(nowMs int64) {
	expire := int64(r.n) * r.windowMs
	for i := range r.samples {
		if nowMs-r.samples[i].last >= expire {
			r.samples[i].reset(nowMs)
		}
	}
}

// window turns the time since the oldest sample's start into the measuring
// window. The (N−1)·W floor is what gives a fresh client a burst allowance
// of Q·(N−1)·W; max(…, 1) guards the division.
func (r *Rate) window(oldestStart, nowMs int64) int64 {
	elapsed := nowMs - oldestStart
	full := elapsed / r.windowMs
	if minFull := int64(r.n - 1); full < minFull {
		elapsed += (minFull - full) * r.windowMs
	}
	return max(elapsed, 1)
}

// measure purges, then returns the sum of all samples and the window in ms,
// in one pass. Kafka computes both with separate purges at the same instant;
// a purge is idempotent at a fixed time, so one pass gives the same numbers.
func (r *Rate) measure(nowMs int64) (total float64, windowMs int64) {
	if len(r.samples) == 0 {
		// Kafka's oldest() creates a sample when there is none, and later
		// records land in it.
		r.samples = append(r.samples, sample{start: nowMs, last: nowMs})
		r.cur = 0
	}
	expire := int64(r.n) * r.windowMs
	oldest := int64(0)
	for i := range r.samples {
		s := &r.samples[i]
		if nowMs-s.last >= expire {
			s.reset(nowMs)
		}
		total += s.value
		if i == 0 || s.start < oldest {
			oldest = s.start
		}
	}
	return total, r.window(oldest, nowMs)
}

// WindowSize returns the window in milliseconds that Measure divides by at
// nowMs. Like Kafka it purges first.
func (r *Rate) WindowSize(nowMs int64) int64 {
	_, w := r.measure(nowMs)
	return w
}

// Measure returns the rate per second at nowMs. Like Kafka it purges
// obsolete samples, which moves their start to nowMs.
func (r *Rate) Measure(nowMs int64) float64 {
	total, w := r.measure(nowMs)
	return total / (float64(w) / 1000)
}

// Peek returns what Measure would return at nowMs, and the window, without
// changing the rate. Observers (metrics, Resolve) use it so that looking at
// a bucket never shifts its sample boundaries.
func (r *Rate) Peek(nowMs int64) (rate float64, windowMs int64) {
	if len(r.samples) == 0 {
		return 0, r.window(nowMs, nowMs)
	}
	expire := int64(r.n) * r.windowMs
	var total float64
	oldest := int64(0)
	for i := range r.samples {
		s := r.samples[i]
		if nowMs-s.last >= expire {
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

// Reset forgets all samples, as when Kafka drops an expired sensor.
func (r *Rate) Reset() {
	r.samples = r.samples[:0]
	r.cur = 0
}
