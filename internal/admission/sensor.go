package admission

import "github.com/tollgate/tollgate/internal/rate"

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

// sensor is a rate with an upper-bound quota, i.e. one of Kafka's connection
// rate quota sensors (broker, listener or ip). The rate arithmetic is package
// rate's; what is admission's is when to record, un-record and expire.
type sensor struct {
	rate       rate.Sampled
	bound      float64 // the quota; float64(Unlimited) never trips in practice
	lastRecord int64   // for the 1 h inactivity expiry of ip sensors
}

// restart empties the sensor for window w: a new sensor, or the quota window
// changed. The slots are reused when the shape is the same, so recycled ip
// entries allocate nothing.
func (s *sensor) restart(w window) {
	if s.rate.Samples() == w.samples && s.rate.SampleMs() == w.sizeMs {
		s.rate.Reset()
		return
	}
	s.rate = rate.NewSampled(w.samples, w.sizeMs)
}

// recordThrottle is ConnectionQuotas.recordAndGetThrottleTimeMs: record one
// connection first, then check; a violation stays recorded and yields
// QuotaUtils.boundedThrottleTime, min(round((O−Q)/Q·window), W). A result of
// 0 means "not throttled" even if the measured rate was above the bound; a
// bound of 0 throttles every connection for exactly W.
func (s *sensor) recordThrottle(w window, now int64) int64 {
	s.rate.Record(1, now)
	s.lastRecord = now
	value, ws := s.rate.Measure(now)
	if value <= s.bound { // Quota.acceptable: equal to the bound is fine
		return 0
	}
	return rate.BoundedThrottleTime(value, s.bound, ws, w.capMs())
}

// unrecord is sensor.record(-1, now, checkQuotas=false).
func (s *sensor) unrecord(now int64) {
	s.rate.Record(-1, now)
	s.lastRecord = now
}

// measure is the sensor's rate per second at now (connection-accept-rate),
// purging like Kafka's Rate.measure.
func (s *sensor) measure(now int64) float64 {
	r, _ := s.rate.Measure(now)
	return r
}
