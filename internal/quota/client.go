package quota

import (
	"math"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/rate"
)

// Client is one (user, client-id)'s handle on an Engine. It remembers the
// client's bucket per key until the quota set changes, so its calls skip the
// engine's map lookup; a gateway keeps one per connection (the quota
// filter: one per connection and side). It is the only way to record: the
// Engine has no per-call forms. A Client is cheap, but not safe for
// concurrent use.
type Client struct {
	e              *Engine
	user, clientID string
	cache          [numKeys]cachedBucket
	tn             tenantRef // the tenant of user (tenantstate.go)
	// tcache is the per-topic buckets of the byte rates, by topic
	// (topic.go).
	tcache [ConsumerByteRate + 1]map[string]topicCached
}

type cachedBucket struct {
	gen uint64
	b   *bucket // nil: the key is disabled (no quota), as of gen
	ok  bool    // set: the zero value is no answer
}

// Names are the handle's user and client-id.
func (c *Client) Names() (user, clientID string) { return c.user, c.clientID }

// Client returns a handle for (user, clientID). A null client-id is "".
func (e *Engine) Client(user, clientID string) *Client {
	return &Client{e: e, user: strings.Clone(user), clientID: strings.Clone(clientID)}
}

// User returns the user name the handle accounts for.
func (c *Client) User() string { return c.user }

// ClientID returns the client-id the handle accounts for.
func (c *Client) ClientID() string { return c.clientID }

// bucket returns the client's bucket for key k, nil when k is disabled.
func (c *Client) bucket(k Key, nowMs int64) *bucket {
	c.e.maybeSweep(nowMs)
	m := &c.e.mgr[k]
	g := m.gen.Load()
	// A disabled key is cached too (every request asks about
	// request_percentage, configured or not): the generation changes
	// with any quota change, enabling included.
	if cb := &c.cache[k]; cb.ok && cb.gen == g {
		return cb.b
	}
	b := c.e.bucketFor(m, ident{c.user, c.clientID, ""}, nowMs)
	c.cache[k] = cachedBucket{gen: g, b: b, ok: true}
	return b
}

// lock returns the client's bucket for k locked, replacing it first if it
// expired since it was looked up; nil when k is disabled.
func (c *Client) lock(k Key, nowMs int64) *bucket {
	b := c.bucket(k, nowMs)
	for b != nil {
		b.mu.Lock()
		if !b.dead {
			return b
		}
		b.mu.Unlock()
		b = c.e.slowBucket(&c.e.mgr[k], ident{c.user, c.clientID, ""}, nowMs)
		c.cache[k].b = b
	}
	return nil
}

// record adds v to the client's bucket for k, and to its tenant's, and
// returns the larger throttle in ms (the tightest level wins).
func (c *Client) record(k Key, v float64, nowMs, capMs int64) int64 {
	return max(c.recordOwn(k, v, nowMs, capMs), c.recordTenant(k, v, nowMs, capMs))
}

// recordOwn adds v to the client's bucket for k and returns the throttle in ms,
// capped at capMs when capMs > 0. Kafka records first and checks second,
// and the value stays recorded even when it violates the quota. A shadow
// bucket computes its throttle the same way, counts it and returns 0.
func (c *Client) recordOwn(k Key, v float64, nowMs, capMs int64) int64 {
	return c.e.recordInto(c.lock(k, nowMs), v, nowMs, capMs)
}

// recordInto is recordOwn for the locked bucket b (nil: nothing to
// record), which it unlocks.
func (e *Engine) recordInto(b *bucket, v float64, nowMs, capMs int64) int64 {
	if b == nil {
		return 0
	}
	b.rate.Record(v, nowMs)
	b.lastActive = nowMs
	var t int64
	unseen := 0.0
	if e.clusterOn() {
		unseen = e.unseen(b, nowMs)
	}
	if b.useTokens {
		b.tokens.Record(v, nowMs)
		t = tokenThrottleMs(b.tokens.Balance()-unseen, b.quota, capMs)
	} else {
		observed, w := b.rate.Measure(nowMs)
		observed += unseen / (float64(w) / 1000)
		t = int64(rate.ThrottleMs(observed, b.quota, w, capMs))
	}
	if lt := e.noteLocal(b, v, nowMs); lt > t {
		// Past this instance's lease of a Tollgate cluster's headroom.
		t = lt
		if capMs > 0 {
			t = min(t, capMs)
		}
	}
	if e.cfg.SharedDeadline {
		t = b.shareDeadline(t, nowMs, capMs)
	}
	t = b.apply(t) // 0 for a shadow bucket
	b.mu.Unlock()
	return t
}

func ms(t int64) time.Duration { return time.Duration(t) * time.Millisecond }

// tokenThrottleMs is the throttle of a byte-rate token bucket holding
// tokens: the time to earn the deficit back, Kafka's mutation throttle
// round(−tokens/Q × 1000), 0 without a deficit, capped at capMs > 0.
func tokenThrottleMs(tokens, quota float64, capMs int64) int64 {
	if !(tokens < 0) {
		return 0
	}
	t := rate.TokenThrottleTime(tokens, quota)
	if capMs > 0 && t > capMs {
		t = capMs
	}
	return max(t, 0)
}

// shareDeadline extends a throttle t to the bucket's current deadline and
// moves the deadline out to now+t: all connections of one bucket are held
// until the same moment. With a single connection this is Kafka's
// behaviour unchanged, since it only sends again after its throttle.
func (b *bucket) shareDeadline(t, nowMs, capMs int64) int64 {
	if t > 0 && nowMs+t > b.until {
		b.until = nowMs + t
	}
	if rem := b.until - nowMs; rem > t {
		t = rem
		if capMs > 0 && t > capMs {
			t = capMs
		}
	}
	return t
}

// RecordProduce records a produce request of the given size (header plus
// body, everything after the length prefix; acks=0 included) and returns how
// long to mute the connection, 0 for not at all.
func (c *Client) RecordProduce(bytes int, now time.Time) time.Duration {
	return ms(c.record(ProducerByteRate, float64(bytes), now.UnixMilli(), c.e.maxThrottleMs))
}

// RecordFetch records a consumer fetch response of the given size (4 + the
// body) and returns the throttle. If the response ends up throttled, by
// this quota or another, the gateway sends an empty response and must call
// UnrecordFetch with the same size, as Kafka does.
func (c *Client) RecordFetch(bytes int, now time.Time) time.Duration {
	return ms(c.record(ConsumerByteRate, float64(bytes), now.UnixMilli(), c.e.maxThrottleMs))
}

// UnrecordFetch takes back a fetch that was throttled and answered empty.
func (c *Client) UnrecordFetch(bytes int, now time.Time) {
	c.Unrecord(ConsumerByteRate, float64(bytes), now)
}

// Unrecord records −v for key k without any quota check.
func (c *Client) Unrecord(k Key, v float64, now time.Time) {
	if !k.Valid() {
		return
	}
	nowMs := now.UnixMilli()
	c.unrecordTenant(k, v, nowMs)
	b := c.lock(k, nowMs)
	if b == nil {
		return
	}
	b.rate.Record(-v, nowMs)
	c.e.noteLocal(b, -v, nowMs)
	b.until = 0 // the deadline may have come from what is taken back
	if k == ControllerMutationRate || b.useTokens {
		b.tokens.Record(-v, nowMs)
	}
	b.lastActive = nowMs
	b.mu.Unlock()
}

// RecordRequest records thread time against request_percentage and returns
// the throttle, capped at WindowSize as Kafka caps it. Kafka's unit is
// percent-seconds: nanoseconds × 100 / 1e9.
func (c *Client) RecordRequest(d time.Duration, now time.Time) time.Duration {
	capMs := c.e.windowMs
	if c.e.maxThrottleMs > 0 {
		capMs = min(capMs, c.e.maxThrottleMs)
	}
	v := float64(d.Nanoseconds()) * (100.0 / 1e9)
	return ms(c.record(RequestPercentage, v, now.UnixMilli(), capMs))
}

// FetchMaxBytes returns the largest fetch the consumer's quota window can
// hold, floor(Q·(N−1)·W) — under the token bucket, Q × the entity's burst
// when it sets one — which the gateway uses to clamp max_bytes (and
// min_bytes) of consumer fetches. Without it a small quota makes consumers
// fetch more than the window allows and stay throttled forever. Without a
// quota it returns math.MaxInt32. A tenant's ceiling clamps it too.
func (c *Client) FetchMaxBytes(now time.Time) int32 {
	t, _ := c.tenantFetchClamp(now.UnixMilli())
	return min(t, c.fetchMaxBytesOwn(now))
}

func (c *Client) fetchMaxBytesOwn(now time.Time) int32 {
	b := c.lock(ConsumerByteRate, now.UnixMilli())
	if b == nil {
		return math.MaxInt32
	}
	q, shadow, win := b.quota, b.shadow, c.e.fetchWindowSeconds(b)
	b.mu.Unlock()
	if shadow {
		return math.MaxInt32
	}
	v := q * win
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}

// Hold returns how long a request for key k must wait before it is
// forwarded: the rest of the bucket's throttle, when SharedDeadline is on
// and the bucket is throttled. A gateway holds every connection of a
// throttled bucket until the same moment, not just the one whose response
// carried the throttle (each connection's own throttle was computed before
// the others' requests were recorded). The client's tenant holds it too,
// until its principal's or its ceiling's deadline.
func (c *Client) Hold(k Key, now time.Time) time.Duration {
	if !c.e.cfg.SharedDeadline || !k.Valid() {
		return 0
	}
	return max(c.holdOwn(k, now), ms(c.tenantHold(k, now.UnixMilli())))
}

func (c *Client) holdOwn(k Key, now time.Time) time.Duration {
	if !c.e.cfg.SharedDeadline || !k.Valid() {
		return 0
	}
	nowMs := now.UnixMilli()
	b := c.lock(k, nowMs)
	if b == nil {
		return 0
	}
	until := b.until
	shadow := b.shadow
	b.mu.Unlock()
	if until <= nowMs || shadow {
		return 0
	}
	return ms(until - nowMs)
}

// HoldProduce is Hold for a Produce request of size bytes that also counts
// the produce requests of the bucket already forwarded and not yet answered
// (a client pipelines several per connection, on each of its connections):
// the request waits as long as the bucket's throttle formula would throttle
// if those were already recorded, and at least until the bucket's deadline. Its size is
// then counted as in flight until ReleaseProduce (the response records it,
// as Kafka does, when it passes). Without SharedDeadline it returns 0, 0.
// The client's tenant counts it in flight likewise, and holds it while
// the ceiling binds and the principal has used its fair share.
func (c *Client) HoldProduce(size int, now time.Time) (time.Duration, int64) {
	hold, reserved := c.holdProduceOwn(size, now)
	if th, ok := c.tenantHoldProduce(size, now.UnixMilli(), c.e.maxThrottleMs); ok {
		hold, reserved = max(hold, ms(th)), int64(size)
	}
	return hold, reserved
}

func (c *Client) holdProduceOwn(size int, now time.Time) (time.Duration, int64) {
	if !c.e.cfg.SharedDeadline {
		return 0, 0
	}
	nowMs := now.UnixMilli()
	b := c.lock(ProducerByteRate, nowMs)
	if b == nil {
		return 0, 0
	}
	defer b.mu.Unlock()
	if b.shadow {
		return 0, 0
	}
	hold := max(b.until-nowMs, 0)
	// In a Tollgate cluster: what the others have taken that has not
	// reached this instance yet, and this instance's lease.
	unseen := c.e.unseen(b, nowMs)
	if b.level != LevelNone && (b.inflight > 0 || unseen > 0) && b.useTokens {
		t := tokenThrottleMs(b.tokens.Peek(nowMs)-b.inflight-unseen, b.quota, c.e.maxThrottleMs)
		hold = max(hold, t)
	} else if b.level != LevelNone && (b.inflight > 0 || unseen > 0) {
		r, w := b.rate.Peek(nowMs)
		observed := (r*float64(w)/1000 + b.inflight + unseen) / (float64(w) / 1000)
		t := int64(rate.ThrottleMs(observed, b.quota, w, c.e.maxThrottleMs))
		hold = max(hold, t)
	}
	if b.level != LevelNone {
		hold = max(hold, c.e.leaseHold(b, float64(size), nowMs))
	}
	b.inflight += float64(size)
	return ms(hold), int64(size)
}

// ReleaseProduce takes a request HoldProduce counted out of flight.
func (c *Client) ReleaseProduce(reserved int64, now time.Time) {
	if reserved <= 0 {
		return
	}
	c.releaseTenant(ProducerByteRate, reserved, now.UnixMilli())
	b := c.lock(ProducerByteRate, now.UnixMilli())
	if b == nil {
		return
	}
	b.inflight = max(b.inflight-float64(reserved), 0)
	b.mu.Unlock()
}

// ReserveFetch clamps one consumer fetch. max_bytes becomes at most
// floor(Q·(N−1)·W), Kafka's clamp (Q × the entity's burst under the token
// bucket when it sets one), and — because a gateway's bucket is fed
// by fetches on several connections at once — at most what the bucket
// still has room for (its tokens, or the sampled window's room), counting
// the fetches already in flight; but
// at least 1 byte, for which the broker still returns one batch, so the
// consumer progresses and is throttled by the debt. The clamp is reserved
// until ReleaseFetch. Without a quota it returns (requested, 0). The
// client's tenant clamps it too (tenantFetchClamp) and counts it in flight.
func (c *Client) ReserveFetch(requested int32, now time.Time) (clamp int32, reserved int64) {
	nowMs := now.UnixMilli()
	tc, tenant := c.tenantFetchClamp(nowMs)
	clamp, reserved = c.reserveFetchOwn(min(requested, tc), now)
	if tenant {
		c.reserveTenantFetch(clamp, nowMs)
		reserved = int64(clamp)
	}
	return clamp, reserved
}

func (c *Client) reserveFetchOwn(requested int32, now time.Time) (clamp int32, reserved int64) {
	b := c.lock(ConsumerByteRate, now.UnixMilli())
	if b == nil {
		return requested, 0
	}
	defer b.mu.Unlock()
	if b.level == LevelNone || b.shadow {
		return requested, 0
	}
	static := b.quota * c.e.fetchWindowSeconds(b)
	var room float64
	nowMs := now.UnixMilli()
	if b.useTokens {
		room = b.tokens.Peek(nowMs) - b.inflight
	} else {
		r, w := b.rate.Peek(nowMs)
		room = b.quota*float64(w)/1000 - r*float64(w)/1000 - b.inflight
	}
	// In a Tollgate cluster: less what the others have taken unseen, and
	// no more than this instance's lease.
	room = min(room-c.e.unseen(b, nowMs), c.e.leaseRoom(b, nowMs))
	v := min(float64(requested), static, max(room, 1))
	clamp = int32(max(v, 1))
	b.inflight += float64(clamp)
	return clamp, int64(clamp)
}

// ReleaseFetch returns a reservation made by ReserveFetch, when the fetch
// is answered (then RecordFetch records what it really carried) or lost.
func (c *Client) ReleaseFetch(reserved int64, now time.Time) {
	if reserved <= 0 {
		return
	}
	c.releaseTenant(ConsumerByteRate, reserved, now.UnixMilli())
	b := c.lock(ConsumerByteRate, now.UnixMilli())
	if b == nil {
		return
	}
	b.inflight = max(b.inflight-float64(reserved), 0)
	b.mu.Unlock()
}

// Mutation starts one request's controller-mutation accounting. strict is
// true for CreateTopics v6+, DeleteTopics v5+ and CreatePartitions v3+.
func (c *Client) Mutation(strict bool, now time.Time) Mutation {
	// lock rather than bucket: a cached bucket that expired must be
	// replaced here, or the whole request would charge a dropped bucket.
	b := c.lock(ControllerMutationRate, now.UnixMilli())
	if b != nil {
		b.mu.Unlock()
	}
	ts, m := c.tenant(now.UnixMilli())
	return Mutation{b: b, strict: strict, tn: tenantMutation{ts: ts, m: m}}
}

// CheckMutation reports whether the client's mutation bucket is below zero
// at now, and the throttle that goes with it. A strict request is rejected
// exactly when this reports exceeded.
func (c *Client) CheckMutation(now time.Time) (time.Duration, bool) {
	nowMs := now.UnixMilli()
	b := c.lock(ControllerMutationRate, nowMs)
	if b == nil {
		return 0, false
	}
	tok, q := b.tokens.Tokens(nowMs), b.tokens.Quota()
	shadow := b.shadow
	b.mu.Unlock()
	if tok < 0 && !shadow {
		return ms(max(rate.TokenThrottleTime(tok, q), 0)), true
	}
	return 0, false
}

// RecordMutation charges n partitions in one go. Strict: if the bucket is
// already below zero nothing is charged and it returns the throttle with
// exceeded = true (answer THROTTLING_QUOTA_EXCEEDED); otherwise it charges n,
// however far below zero that goes, and returns (0, false). Permissive: it
// always charges and returns the deficit as a throttle, never exceeded.
func (c *Client) RecordMutation(n float64, strict bool, now time.Time) (time.Duration, bool) {
	mu := c.Mutation(strict, now)
	ok := mu.Record(n, now)
	return mu.Throttle(now), !ok
}
