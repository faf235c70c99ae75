package rate

// TokenBucket is Kafka's TokenBucket stat (KIP-599, used for
// controller_mutation_rate): refilled at Q tokens per second up to a burst
// of N·W·Q, drained by each record, and allowed to go arbitrarily negative.
// A token bucket rather than a Sampled rate so that one large burst is paid
// off in burst/Q seconds instead of staying in the window for N·W.
//
// Times are Unix milliseconds. A TokenBucket is not safe for concurrent use;
// copies are independent.
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

// SetBurst makes the burst seconds × Q (0: none, the bucket never holds a
// token), keeping the tokens up to the new burst. Kafka's burst is always
// N·W·Q; this is Tollgate's per-entity burst.
func (b *TokenBucket) SetBurst(seconds float64) {
	b.burstSec = seconds
	if b.started {
		b.tokens = min(b.tokens, b.Burst())
	}
}

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

// Empty starts the bucket (or sets it) at 0 tokens at nowMs: its burst
// spent, so that it refills from now on.
func (b *TokenBucket) Empty(nowMs int64) {
	b.tokens, b.lastMs, b.started = 0, nowMs, true
}

// Tokens refills and returns the tokens at nowMs (TokenBucket.measure);
// below 0 is a violation.
func (b *TokenBucket) Tokens(nowMs int64) float64 {
	b.refill(nowMs)
	return b.tokens
}

// Record refills, then takes n tokens (a negative n gives them back, never
// beyond the burst).
func (b *TokenBucket) Record(n float64, nowMs int64) {
	b.refill(nowMs)
	b.tokens = min(b.Burst(), b.tokens-n)
}

// Balance returns the tokens as of the last Record or Tokens, without a
// refill: right after Record(n, nowMs) it equals Tokens(nowMs) and saves
// the hot path a second refill.
func (b *TokenBucket) Balance() float64 { return b.tokens }

// Peek returns Tokens(nowMs) without updating the bucket.
func (b *TokenBucket) Peek(nowMs int64) float64 {
	c := *b
	return c.Tokens(nowMs)
}
