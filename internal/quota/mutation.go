package quota

import "time"

// ThrottlingQuotaExceededMessage is Kafka's message for a mutation rejected
// in strict mode (KIP-599) with THROTTLING_QUOTA_EXCEEDED.
const ThrottlingQuotaExceededMessage = "The throttling quota has been exceeded."

// TokenBucket is Kafka's TokenBucket stat used for controller_mutation_rate:
// refilled at Q tokens per second up to a burst of N·W·Q, drained by the
// number of partitions created or deleted, and allowed to go arbitrarily
// negative. A token bucket rather than a Rate so that one large burst is
// paid off in burst/Q seconds instead of staying in the window for N·W.
//
// Times are Unix milliseconds. A TokenBucket is not safe for concurrent use.
type TokenBucket struct {
	quota    float64
	burstSec float64 // N × W in seconds; the burst is burstSec × quota
	tokens   float64
	lastMs   int64
	started  bool
}

// NewTokenBucket returns a full bucket refilled at quota per second with n
// samples of windowMs (controller.quota.window.num and
// controller.quota.window.size.seconds × 1000).
func NewTokenBucket(quota float64, n int, windowMs int64) TokenBucket {
	return TokenBucket{quota: quota, burstSec: float64(n) * (float64(windowMs) / 1000)}
}

// Quota returns the refill rate per second.
func (b *TokenBucket) Quota() float64 { return b.quota }

// SetQuota changes the refill rate and with it the burst, keeping the
// tokens, as Kafka does when a quota value changes.
func (b *TokenBucket) SetQuota(q float64) { b.quota = q }

// Burst returns the maximum number of tokens, N·W·Q.
func (b *TokenBucket) Burst() float64 { return b.burstSec * b.quota }

// refill adds the tokens earned since the last update. Kafka starts a bucket
// at 0 tokens with a last update at epoch 0, so its first refill fills it;
// starting full at the first use is the same for any real clock and does
// not depend on how far from 0 a test's clock is.
func (b *TokenBucket) refill(nowMs int64) {
	burst := b.Burst()
	if !b.started {
		b.tokens, b.lastMs, b.started = burst, nowMs, true
		return
	}
	b.tokens = min(burst, b.tokens+b.quota*(float64(nowMs-b.lastMs)/1000))
	b.lastMs = nowMs
}

// Tokens refills and returns the tokens at nowMs; below 0 is a violation.
func (b *TokenBucket) Tokens(nowMs int64) float64 {
	b.refill(nowMs)
	return b.tokens
}

// Record refills, then takes n tokens.
func (b *TokenBucket) Record(n float64, nowMs int64) {
	b.refill(nowMs)
	b.tokens = min(b.Burst(), b.tokens-n)
}

// peek returns Tokens(nowMs) without updating the bucket.
func (b *TokenBucket) peek(nowMs int64) float64 {
	c := *b
	return c.Tokens(nowMs)
}

// MutationThrottleMs is Kafka's throttle for a token deficit:
// round(−tokens/Q × 1000), the time to refill to zero. It is not capped.
func MutationThrottleMs(tokens, quota float64) int64 {
	return roundHalfUp(-tokens / quota * 1000)
}

// recordMutation applies one mutation of n partitions to the bucket's token
// bucket in strict or permissive mode and returns whether it was accepted
// and the throttle in ms (0: none). b.mu must be held.
//
// Strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+) checks
// before recording: a bucket already below zero rejects with nothing
// recorded, but an accepted mutation may drive the bucket far below zero,
// so the request that overshoots passes and the next one is rejected.
// Permissive records first and reports the deficit as a throttle.
func (b *bucket) recordMutation(n float64, strict bool, nowMs int64) (bool, int64) {
	if strict {
		if tok := b.tokens.Tokens(nowMs); tok < 0 {
			t := MutationThrottleMs(tok, b.tokens.quota)
			b.noteThrottle(t)
			return false, t
		}
	}
	b.rate.Record(n, nowMs)
	b.tokens.Record(n, nowMs)
	b.lastActive = nowMs
	if strict {
		return true, 0
	}
	if tok := b.tokens.Tokens(nowMs); tok < 0 {
		t := MutationThrottleMs(tok, b.tokens.quota)
		b.noteThrottle(t)
		return true, t
	}
	return true, 0
}

// Mutation is one request's controller-mutation quota, like Kafka's
// per-request ControllerMutationQuota: the gateway records each topic of a
// CreateTopics, DeleteTopics or CreatePartitions request in order, answers
// THROTTLING_QUOTA_EXCEEDED for the rejected ones and puts Throttle in the
// response. The zero Mutation is unbounded. It is not safe for concurrent
// use; each request has its own.
type Mutation struct {
	b          *bucket // nil: no controller_mutation_rate quota is configured
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
	if m.b == nil {
		return true
	}
	nowMs := now.UnixMilli()
	m.b.mu.Lock()
	ok, t := m.b.recordMutation(n, m.strict, nowMs)
	m.b.mu.Unlock()
	if !ok || t > 0 {
		m.throttleMs, m.recordedMs = t, nowMs
	}
	return ok
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
