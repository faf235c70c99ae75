package model

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
