package admission

import (
	"math"
	"time"
)

// Kafka's AcceptorBlockedPercent is a Yammer (metrics-core 2.2) Meter with
// rate unit NANOSECONDS, marked with the nanoseconds an acceptor spent blocked.
// Its rates are therefore blocked-ns per ns: a fraction of time, 0..1 on
// average. meter reproduces that Meter with caller-supplied time instead of
// Yammer's 5 s tick thread: ticks happen lazily at start+k·5s whenever the
// meter is marked or read, which gives the same numbers.
const meterTick = 5 * time.Second

// Yammer's EWMA smoothing constants for 1, 5 and 15 minutes with 5 s ticks.
var meterAlpha = [3]float64{
	1 - math.Exp(-5.0/60.0/1),
	1 - math.Exp(-5.0/60.0/5),
	1 - math.Exp(-5.0/60.0/15),
}

type meter struct {
	start       time.Time
	lastTick    time.Time
	count       time.Duration // all marks; Yammer's count()
	uncounted   time.Duration // marks since the last tick
	rates       [3]float64    // per ns
	initialized bool
}

func newMeter(now time.Time) meter { return meter{start: now, lastTick: now} }

// tick runs every whole 5 s interval that has passed. After the first, idle
// ticks only decay the rates, so n of them collapse into one power.
func (m *meter) tick(now time.Time) {
	age := now.Sub(m.lastTick)
	if age < meterTick {
		return
	}
	n := int64(age / meterTick)
	m.lastTick = m.lastTick.Add(time.Duration(n) * meterTick)
	instant := float64(m.uncounted) / float64(meterTick)
	m.uncounted = 0
	for i, a := range meterAlpha {
		if m.initialized {
			m.rates[i] += a * (instant - m.rates[i])
		} else {
			m.rates[i] = instant
		}
		if n > 1 {
			m.rates[i] *= math.Pow(1-a, float64(n-1))
		}
	}
	m.initialized = true
}

// mark records d of blocking at now. Kafka marks the whole wait when it ends,
// so a long wait lands in a single 5 s interval and can push the short-term
// rates above 1 for a while; that is faithful, not a bug.
func (m *meter) mark(now time.Time, d time.Duration) {
	m.tick(now)
	m.count += d
	m.uncounted += d
}

func (m *meter) snapshot(now time.Time) (mean, m1, m5, m15 float64) {
	m.tick(now)
	if elapsed := now.Sub(m.start); m.count > 0 && elapsed > 0 {
		mean = float64(m.count) / float64(elapsed)
	}
	return mean, m.rates[0], m.rates[1], m.rates[2]
}
