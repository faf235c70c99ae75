package perf

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// reservoirSize bounds the latency samples kept for percentiles (Algorithm
// R: a uniform sample of all latencies, so memory does not grow with the run).
const reservoirSize = 1 << 17

// interval accumulates one progress period.
type interval struct {
	start       time.Time
	records     int64
	bytes       int64
	latSum      time.Duration
	latN        int64
	latMax      time.Duration
	throttles   int64
	throttleMax time.Duration
}

// stats is shared by the send/poll loop, the client's callbacks and hooks,
// and the progress reporter.
type stats struct {
	mu     sync.Mutex
	cur    interval
	frozen bool // the run's window has ended: late events are not counted

	records int64
	bytes   int64
	latSum  time.Duration
	latN    int64
	latMax  time.Duration
	samples []time.Duration
	seen    int64 // latencies offered to the reservoir
	rng     *rand.Rand

	// Client throttle metrics: responses of the role's request key
	// (HookBrokerRead) and the throttles the client was told of
	// (HookBrokerThrottle, which is only called for throttle_time_ms > 0).
	responses   int64
	throttled   int64
	throttleSum time.Duration
	throttleMax time.Duration
}

func newStats(now time.Time) *stats {
	return &stats{cur: interval{start: now}, rng: rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x70e11))}
}

// add records n records of b bytes; lat < 0 means no latency (consume).
func (s *stats) add(n, b int64, lat time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.cur.records += n
	s.cur.bytes += b
	s.records += n
	s.bytes += b
	if lat < 0 {
		return
	}
	s.cur.latSum += lat
	s.cur.latN++
	s.cur.latMax = max(s.cur.latMax, lat)
	s.latSum += lat
	s.latN++
	s.latMax = max(s.latMax, lat)
	s.seen++
	if len(s.samples) < reservoirSize {
		s.samples = append(s.samples, lat)
	} else if j := s.rng.Int64N(s.seen); j < reservoirSize {
		s.samples[j] = lat
	}
}

func (s *stats) response() {
	s.mu.Lock()
	if !s.frozen {
		s.responses++
	}
	s.mu.Unlock()
}

func (s *stats) throttle(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.cur.throttles++
	s.cur.throttleMax = max(s.cur.throttleMax, d)
	s.throttled++
	s.throttleSum += d
	s.throttleMax = max(s.throttleMax, d)
}

// freeze ends the measured window: what the client sees afterwards
// (acknowledgements of records in flight when --duration or SIGINT ended
// the run) is not counted.
func (s *stats) freeze() {
	s.mu.Lock()
	s.frozen = true
	s.mu.Unlock()
}

// roll returns the current interval and starts a new one at now.
func (s *stats) roll(now time.Time) interval {
	s.mu.Lock()
	defer s.mu.Unlock()
	iv := s.cur
	s.cur = interval{start: now}
	return iv
}

// totals is the end-of-run view.
type totals struct {
	records, bytes       int64
	latAvg, latMax       time.Duration
	p50, p95, p99, p999  time.Duration
	hasLatency           bool
	responses, throttled int64
	throttleAvgMs        float64
	throttleMaxMs        float64
}

func (s *stats) totals() totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := totals{records: s.records, bytes: s.bytes, latMax: s.latMax,
		responses: s.responses, throttled: s.throttled,
		throttleMaxMs: ms(s.throttleMax)}
	if s.latN > 0 {
		t.hasLatency = true
		t.latAvg = s.latSum / time.Duration(s.latN)
		sorted := slices.Clone(s.samples)
		slices.Sort(sorted)
		t.p50, t.p95, t.p99, t.p999 = pct(sorted, 0.50), pct(sorted, 0.95), pct(sorted, 0.99), pct(sorted, 0.999)
	}
	// Kafka's produce-/fetch-throttle-time-avg is an Avg over every response
	// of that kind, zero throttles included. A throttle on some other
	// response kind would not be in responses; never divide by less than
	// the number of throttles seen.
	if n := max(s.responses, s.throttled); n > 0 {
		t.throttleAvgMs = ms(s.throttleSum) / float64(n)
	}
	return t
}

// pct is the nearest-rank percentile of sorted samples.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// throttleHook feeds a client's throttle metrics into stats. Only the
// responses to requests with key (0 Produce, 1 Fetch) are counted as
// responses; every throttle the client is told of is counted, which is why
// each role gets its own client: the hook does not say which request a
// throttle came with, so the producer client's throttles are all produce
// throttles and the consumer client's all fetch throttles (Tollgate's byte
// rate quotas only throttle those two).
type throttleHook struct {
	st  *stats
	key int16
}

var (
	_ kgo.HookBrokerRead     = throttleHook{}
	_ kgo.HookBrokerThrottle = throttleHook{}
)

func (h throttleHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == h.key && err == nil {
		h.st.response()
	}
}

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.st.throttle(d)
}
