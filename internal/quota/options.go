package quota

import "github.com/tollgate/tollgate/internal/quota/model"

// shadowCounters are a bucket's ShadowStats, in milliseconds. Guarded by
// bucket.mu.
type shadowCounters struct {
	records, throttled, totalMs, maxMs int64
}

func (c shadowCounters) stats() model.ShadowStats {
	return model.ShadowStats{Records: c.records, Throttled: c.throttled, Total: ms(c.totalMs), Max: ms(c.maxMs)}
}

// apply takes the throttle t computed for one record and returns the one
// to impose: t for an enforced bucket (counted as a throttle), 0 for a
// shadow bucket, which only counts what t would have been. Every path that
// records into a bucket goes through apply. b.mu must be held.
func (b *bucket) apply(t int64) int64 {
	if !b.shadow {
		b.noteThrottle(t)
		return t
	}
	b.sh.records++
	if t > 0 {
		b.sh.throttled++
		b.sh.totalMs += t
		b.sh.maxMs = max(b.sh.maxMs, t)
	}
	return 0
}

// setOptions gives a bucket its entity's options. Switching a bucket
// between shadow and enforced starts its accounting afresh, as a bucket
// new to the quota: a shadow bucket's client was never slowed down, so the
// debt it ran up would otherwise throttle it for as long as it took to run
// it up (hours of the maximum throttle after a day over the quota). Its
// counters are kept. A changed burst keeps the tokens, up to the new burst.
// Engine.mu and b.mu must be held.
func (e *Engine) setOptions(b *bucket, o model.Options) {
	burst := b.hasBurst != o.HasBurst || b.burst != o.Burst
	b.hasBurst, b.burst = o.HasBurst, o.Burst
	if b.shadow != o.Shadow {
		b.shadow = o.Shadow
		e.initAccounting(b)
		b.until = 0
		return
	}
	if burst && (b.useTokens || b.key.Counted()) {
		b.tokens.SetBurst(e.burstSeconds(b))
	}
}

// burstSeconds is the burst of b's token bucket in seconds of quota: its
// entity's, else Kafka's for its key.
func (e *Engine) burstSeconds(b *bucket) float64 {
	switch {
	case b.hasBurst:
		return b.burst
	case b.key.Counted():
		return float64(e.cfg.ControllerWindowNum) * float64(e.ctlWindowMs) / 1000
	}
	return float64(e.cfg.WindowNum-1) * float64(e.windowMs) / 1000
}

// fetchWindowSeconds is the static fetch clamp's length, in seconds of
// quota: Kafka's (N−1)·W, or the entity's burst where a token bucket
// measures (a response never carries more than the bucket may hold).
func (e *Engine) fetchWindowSeconds(b *bucket) float64 {
	if b.useTokens {
		return e.burstSeconds(b)
	}
	return float64(e.cfg.WindowNum-1) * float64(e.windowMs) / 1000
}
