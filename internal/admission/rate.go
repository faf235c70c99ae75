package admission

import "math"

// window mirrors the MetricConfig Kafka gives every connection-rate sensor:
// quota.window.num samples of quota.window.size.seconds each. All times are
// Unix milliseconds because Kafka's sensors run on System.currentTimeMillis and
// the throttle formula is only reproducible bit for bit at that resolution.
type window struct {
	samples int   // N
	sizeMs  int64 // W
}

// capMs is the bound ConnectionQuotas puts on every connection-rate throttle.
func (w window) capMs() int64 { return w.sizeMs }

// sample is one slot of a WindowedSum. Kafka also keeps an event count, but it
// only matters for event-count windows, which quota sensors never use.
type sample struct {
	value float64
	start int64
	last  int64
}

// rate is Kafka's Rate over a WindowedSum with the ≥ 3.8 algorithm: a ring of
// N+1 lazily allocated samples, purged by last-event time. The older algorithm
// (N slots, purge by start) gives different numbers once the first window has
// passed, which is why both details matter.
type rate struct {
	samples []sample // allocated samples; grows lazily up to N+1 like Kafka's ArrayList
	cur     int
}

func (r *rate) reset() {
	r.samples = r.samples[:0]
	r.cur = 0
}

// record adds v (negative for an un-record) to the current sample, starting a
// new sample when the current one is at least W old.
func (r *rate) record(w window, v float64, now int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	s := &r.samples[r.cur]
	if now-s.start >= w.sizeMs {
		r.cur = (r.cur + 1) % (w.samples + 1)
		if r.cur >= len(r.samples) {
			r.samples = append(r.samples, sample{start: now, last: now})
		} else {
			r.samples[r.cur] = sample{start: now, last: now}
		}
		s = &r.samples[r.cur]
	}
	s.value += v
	s.last = now
}

// purge resets samples whose last event is N·W or more in the past. Resetting
// (rather than dropping) keeps the slot and moves its start to now, exactly as
// SampledStat.purgeObsoleteSamples does.
func (r *rate) purge(w window, now int64) {
	expire := int64(w.samples) * w.sizeMs
	for i := range r.samples {
		if now-r.samples[i].last >= expire {
			r.samples[i] = sample{start: now, last: now}
		}
	}
}

// windowMs is Rate.windowSize: time since the oldest sample's start, never less
// than (N−1)·W, never less than 1 ms.
func (r *rate) windowMs(w window, now int64) int64 {
	r.purge(w, now)
	return r.purgedWindowMs(w, now)
}

// purgedWindowMs is windowMs without the purge, for callers that just did it
// at the same now (a second purge would change nothing).
func (r *rate) purgedWindowMs(w window, now int64) int64 {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	oldest := r.samples[0].start
	for _, s := range r.samples[1:] {
		if s.start < oldest {
			oldest = s.start
		}
	}
	elapsed := now - oldest
	full := elapsed / w.sizeMs
	if minFull := int64(w.samples - 1); full < minFull {
		elapsed += (minFull - full) * w.sizeMs
	}
	return max(elapsed, 1)
}

// measure returns the rate per second and the window (ms) it was computed over;
// the throttle formula must reuse that same window.
func (r *rate) measure(w window, now int64) (perSecond float64, windowMs int64) {
	r.purge(w, now)
	var sum float64
	for _, s := range r.samples {
		sum += s.value
	}
	windowMs = r.purgedWindowMs(w, now)
	return sum / (float64(windowMs) / 1000.0), windowMs
}

// sensor is a rate with an upper-bound quota, i.e. one of Kafka's connection
// rate quota sensors (broker, listener or ip).
type sensor struct {
	rate       rate
	bound      float64 // the quota; float64(Unlimited) never trips in practice
	lastRecord int64   // for the 1 h inactivity expiry of ip sensors
}

// recordThrottle is ConnectionQuotas.recordAndGetThrottleTimeMs: record one
// connection first, then check; a violation stays recorded and yields
// min(round((O−Q)/Q·window), W). A result of 0 means "not throttled" even if
// the measured rate was above the bound.
func (s *sensor) recordThrottle(w window, now int64) int64 {
	return s.record(w, 1, now, w.capMs())
}

// record is Sensor.record(v, now) with a quota check, returning the throttle
// bounded by capMs (byte-rate quotas, which this package does not use, have no
// cap; the tests use that to replay Kafka's rate vectors).
func (s *sensor) record(w window, v float64, now int64, capMs int64) int64 {
	s.rate.record(w, v, now)
	s.lastRecord = now
	value, ws := s.rate.measure(w, now)
	if value <= s.bound { // Quota.acceptable: equal to the bound is fine
		return 0
	}
	return throttleMs(value, s.bound, ws, capMs)
}

// unrecord is sensor.record(-1, now, checkQuotas=false).
func (s *sensor) unrecord(w window, now int64) {
	s.rate.record(w, -1, now)
	s.lastRecord = now
}

// throttleMs is QuotaUtils.boundedThrottleTime. The evaluation order
// (difference / bound) * window matches Java's so the doubles agree. A bound of
// 0 gives +Inf, which Math.round turns into Long.MAX_VALUE and the cap then
// bounds; this is how Kafka throttles every connection of a zero-rate IP.
func throttleMs(value, bound float64, windowMs, capMs int64) int64 {
	t := javaRound((value - bound) / bound * float64(windowMs))
	return min(t, capMs)
}

// javaRound is java.lang.Math.round(double): the closest long, ties towards
// +Inf, NaN → 0, saturating. math.Floor(x+0.5) is not the same: it rounds
// 0.49999999999999994 up because x+0.5 is inexact, which Java ≥ 7 does not.
func javaRound(x float64) int64 {
	if math.IsNaN(x) {
		return 0
	}
	f := math.Floor(x)
	if x-f >= 0.5 { // exact: x−floor(x) never rounds for finite doubles
		f++
	}
	switch {
	case f >= math.MaxInt64: // 2^63 as a float64
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
