package quota

import (
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/rate"
)

// ThrottlingQuotaExceededMessage is Kafka's message for a mutation rejected
// in strict mode (KIP-599) with THROTTLING_QUOTA_EXCEEDED.
const ThrottlingQuotaExceededMessage = "The throttling quota has been exceeded."

// recordMutation applies one mutation of n partitions to the bucket's token
// bucket in strict or permissive mode and returns whether it was accepted
// and the throttle in ms (0: none). b.mu must be held.
//
// Strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+) checks
// before recording: a bucket already below zero rejects with nothing
// recorded, but an accepted mutation may drive the bucket far below zero,
// so the request that overshoots passes and the next one is rejected.
// Permissive records first and reports the deficit as a throttle.
//
// A shadow bucket rejects nothing and throttles nothing: it charges every
// mutation (each one passes) and counts the throttle strict or permissive
// mode would have given.
func (b *bucket) recordMutation(n float64, strict bool, nowMs int64) (bool, int64) {
	var t int64
	if strict {
		if tok := b.tokens.Tokens(nowMs); tok < 0 {
			t = rate.TokenThrottleTime(tok, b.tokens.Quota())
			if !b.shadow {
				b.apply(t)
				return false, t
			}
		}
	}
	b.rate.Record(n, nowMs)
	b.tokens.Record(n, nowMs)
	b.share.local += n // reported to a Tollgate cluster's other instances
	b.lastActive = nowMs
	if !strict {
		if tok := b.tokens.Tokens(nowMs); tok < 0 {
			t = rate.TokenThrottleTime(tok, b.tokens.Quota())
		}
	}
	if strict && !b.shadow {
		return true, 0 // accepted: the throttle comes with the next rejection
	}
	return true, b.apply(t)
}

// Mutation is one request's controller-mutation quota, like Kafka's
// per-request ControllerMutationQuota: the gateway records each topic of a
// CreateTopics, DeleteTopics or CreatePartitions request in order, answers
// THROTTLING_QUOTA_EXCEEDED for the rejected ones and puts Throttle in the
// response. The zero Mutation is unbounded. It is not safe for concurrent
// use; each request has its own.
type Mutation struct {
	key        model.Key // ControllerMutationRate, or ProducerIDsRate (Client.RecordProducerID)
	b          *bucket   // nil: no quota of key is configured
	c          *Client   // its tenant layer (nil: none)
	strict     bool
	throttleMs int64
	recordedMs int64
}

// Strict reports whether the request uses strict mode.
func (m *Mutation) Strict() bool { return m.strict }

// Record charges n partitions at now. It returns false when the mutation is
// rejected (strict mode only): the topic must fail with
// THROTTLING_QUOTA_EXCEEDED and nothing was charged.
func (m *Mutation) Record(n float64, now time.Time) bool {
	nowMs := now.UnixMilli()
	var tl *tenantLayer
	if m.c != nil {
		tl = &m.c.tnl
	}
	if tl != nil && m.strict && tl.lock(m.key, nowMs, false) {
		// The tenant's refusal first: a refused mutation is charged nowhere.
		t, refused := tl.refuses(nowMs)
		tl.unlock()
		if refused {
			m.throttleMs, m.recordedMs = t, nowMs
			return false
		}
	}
	if m.b != nil {
		m.b.mu.Lock()
		ok, t := m.b.recordMutation(n, m.strict, nowMs)
		m.b.mu.Unlock()
		if !ok || t > 0 {
			m.throttleMs, m.recordedMs = t, nowMs
		}
		if !ok {
			return false
		}
	}
	if tl != nil && tl.lock(m.key, nowMs, true) {
		t := tl.record(n, nowMs, 0)
		tl.unlock()
		if !m.strict && t > m.Throttle(now).Milliseconds() {
			m.throttleMs, m.recordedMs = t, nowMs
		}
	}
	return true
}

// Exceeded reports whether a strict request had a mutation rejected with a
// throttle, Kafka's isExceeded. Permissive requests are never exceeded.
func (m *Mutation) Exceeded() bool { return m.strict && m.throttleMs > 0 }

// Throttle returns the throttle to put in the response at now: the last
// throttle computed, less the time elapsed since (8000 ms reads 3000 ms five
// seconds later), never negative. In strict mode it is non-zero only when
// something was rejected.
func (m *Mutation) Throttle(now time.Time) time.Duration {
	t := max(0, m.throttleMs-(now.UnixMilli()-m.recordedMs))
	return time.Duration(t) * time.Millisecond
}
