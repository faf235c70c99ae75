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
	// A whole tenant in shadow mode (tenants are not built yet) is one more
	// source of this flag: the tenant layer marks the entities it is made
	// of, or the engine ORs a tenant's mark in where it reads an entity's
	// options (Quotas.optionsOf) — buckets need nothing else.
	Shadow bool
}

// SetOptions sets entity e's options; the zero Options removes them. The
// entity is validated as Set validates it.
func (q *Quotas) SetOptions(e Entity, o Options) error {
	if err := e.Validate(); err != nil {
		return err
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
// counters are kept. Engine.mu and b.mu must be held.
func (e *Engine) setOptions(b *bucket, o Options) {
	if b.shadow != o.Shadow {
		e.initAccounting(b)
		b.until = 0
	}
	b.shadow = o.Shadow
}
