package quota

import (
	"fmt"
	"time"
)

// Options are an entity's settings beyond its quota values. They apply to
// the buckets the entity's quotas bound: each bucket takes the options of
// the entity whose value applies to it (per key, as resolution is), so an
// entity's options never reach a client another entity's quota bounds.
type Options struct {
	// Shadow marks every quota of the entity shadow: its buckets are
	// measured exactly as enforced ones (same algorithm, same shared
	// deadline), and the throttle each record would have been given is
	// counted (ShadowStats), but none is applied: no throttle, no hold, no
	// fetch clamp, no mutation refused.
	//
	// A whole tenant has its own mark (Tenant.Options): it makes the
	// tenant's ceilings shadow, not its principals' own quotas.
	Shadow bool
	// Burst, when HasBurst, is the start-up burst of the entity's token
	// buckets in seconds of quota: a fresh client may send Burst×Q at once
	// (0: nothing ahead of Q, from the first request). Without it the
	// burst is Kafka's: Q·(N−1)·W for the byte rates (10 s), N·W·Q for
	// controller_mutation_rate (11 s). It applies where a token bucket
	// measures: the byte rates under ByteRateTokenBucket (and their fetch
	// clamp), controller_mutation_rate always; under ByteRateSampled the
	// byte rates keep Kafka's arithmetic, whose burst is its window.
	Burst    float64
	HasBurst bool
}

// MaxBurstSeconds bounds Options.Burst: a bucket idle for an hour expires
// and starts again full, so a longer burst could only ever be a first one.
const MaxBurstSeconds = 3600

// SetOptions sets entity e's options; the zero Options removes them. The
// entity is validated as Set validates it, and a burst must be from 0 to
// MaxBurstSeconds.
func (q *Quotas) SetOptions(e Entity, o Options) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if o.HasBurst && !(o.Burst >= 0 && o.Burst <= MaxBurstSeconds) {
		return fmt.Errorf("quota: burst %v s is not from 0 to %d", o.Burst, MaxBurstSeconds)
	}
	if !o.HasBurst {
		o.Burst = 0
	}
	if o == (Options{}) {
		delete(q.opts, e)
		return nil
	}
	if q.opts == nil {
		q.opts = make(map[Entity]Options)
	}
	q.opts[e] = o
	return nil
}

// Options returns entity e's options (the zero Options when none are set).
func (q *Quotas) Options(e Entity) Options { return q.optionsOf(e) }

// optionsOf is the one place the engine reads an entity's options.
func (q *Quotas) optionsOf(e Entity) Options {
	if q == nil || q.opts == nil {
		return Options{}
	}
	return q.opts[e]
}

// ShadowStats is what a shadow bucket would have done: its records while it
// was shadow, how many of them its quota would have throttled, by how much
// in all and at most. Every record counts once: a produce request, a fetch
// response, a partition mutation.
type ShadowStats struct {
	Records, Throttled int64
	Total, Max         time.Duration
}

// Percent is the share of records that would have been throttled, 0–100.
func (s ShadowStats) Percent() float64 {
	if s.Records == 0 {
		return 0
	}
	return 100 * float64(s.Throttled) / float64(s.Records)
}

// String is the sentence the CLI and the dashboard show.
func (s ShadowStats) String() string {
	if s.Throttled == 0 {
		return fmt.Sprintf("would have throttled none of %d requests", s.Records)
	}
	return fmt.Sprintf("would have throttled %.1f %% of %d requests, by up to %v", s.Percent(), s.Records, s.Max)
}

// shadowCounters are a bucket's ShadowStats, in milliseconds. Guarded by
// bucket.mu.
type shadowCounters struct {
	records, throttled, totalMs, maxMs int64
}

func (c shadowCounters) stats() ShadowStats {
	return ShadowStats{Records: c.records, Throttled: c.throttled, Total: ms(c.totalMs), Max: ms(c.maxMs)}
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
func (e *Engine) setOptions(b *bucket, o Options) {
	burst := b.hasBurst != o.HasBurst || b.burst != o.Burst
	b.hasBurst, b.burst = o.HasBurst, o.Burst
	if b.shadow != o.Shadow {
		b.shadow = o.Shadow
		e.initAccounting(b)
		b.until = 0
		return
	}
	if burst && (b.useTokens || b.key == ControllerMutationRate) {
		b.tokens.SetBurst(e.burstSeconds(b))
	}
}

// burstSeconds is the burst of b's token bucket in seconds of quota: its
// entity's, else Kafka's for its key.
func (e *Engine) burstSeconds(b *bucket) float64 {
	switch {
	case b.hasBurst:
		return b.burst
	case b.key == ControllerMutationRate:
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
