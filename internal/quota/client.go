package quota

import (
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
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
	cache          [model.NumKeys]cachedBucket
	tn             tenantRef // the tenant of user (tenantstate.go)
	// tcache is the per-topic buckets of the byte rates, by topic
	// (topic.go).
	tcache [model.ConsumerByteRate + 1]map[string]topicCached

	// The layers (layer.go) and the Client's two pipelines of them: a
	// key's (its own bucket, then its tenant: the order of their locks,
	// the engine's lock before a client bucket's before a tenant's) and a
	// topic's (its per-topic bucket).
	own, top bucketLayer
	tnl      tenantLayer
	keyed    [2]layer
	topics   [1]layer
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
	c := &Client{e: e, user: strings.Clone(user), clientID: strings.Clone(clientID)}
	c.own.c, c.tnl.c, c.top.c, c.top.perTopic = c, c, c, true
	c.keyed = [2]layer{&c.own, &c.tnl}
	c.topics = [1]layer{&c.top}
	return c
}

// User returns the user name the handle accounts for.
func (c *Client) User() string { return c.user }

// ClientID returns the client-id the handle accounts for.
func (c *Client) ClientID() string { return c.clientID }

// bucket returns the client's bucket for key k, nil when k is disabled.
func (c *Client) bucket(k model.Key, nowMs int64) *bucket {
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
	return ms(recordAll(c.keyed[:], model.ProducerByteRate, float64(bytes), now.UnixMilli(), c.e.maxThrottleMs))
}

// RecordFetch records a consumer fetch response of the given size (4 + the
// body) and returns the throttle. If the response ends up throttled, by
// this quota or another, the gateway sends an empty response and must call
// Unrecord with the same size, as Kafka does.
func (c *Client) RecordFetch(bytes int, now time.Time) time.Duration {
	return ms(recordAll(c.keyed[:], model.ConsumerByteRate, float64(bytes), now.UnixMilli(), c.e.maxThrottleMs))
}

// Unrecord records −v for key k without any quota check (a fetch that was
// throttled and answered empty is taken back).
func (c *Client) Unrecord(k model.Key, v float64, now time.Time) {
	if k.Valid() {
		unrecordAll(c.keyed[:], k, v, now.UnixMilli())
	}
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
	return ms(recordAll(c.keyed[:], model.RequestPercentage, v, now.UnixMilli(), capMs))
}

// FetchMaxBytes returns the largest fetch the consumer's quota window can
// hold, floor(Q·(N−1)·W) — under the token bucket, Q × the entity's burst
// when it sets one — which the gateway uses to clamp max_bytes (and
// min_bytes) of consumer fetches. Without it a small quota makes consumers
// fetch more than the window allows and stay throttled forever. Without a
// quota it returns math.MaxInt32. A tenant's ceiling clamps it too.
func (c *Client) FetchMaxBytes(now time.Time) int32 {
	return int32(fetchMaxAll(c.keyed[:], model.ConsumerByteRate, now.UnixMilli()))
}

// Hold returns how long a request for key k must wait before it is
// forwarded: the rest of the bucket's throttle, when SharedDeadline is on
// and the bucket is throttled. A gateway holds every connection of a
// throttled bucket until the same moment, not just the one whose response
// carried the throttle (each connection's own throttle was computed before
// the others' requests were recorded). The client's tenant holds it too,
// until its principal's or its ceiling's deadline.
func (c *Client) Hold(k model.Key, now time.Time) time.Duration {
	if !c.e.cfg.SharedDeadline || !k.Valid() {
		return 0
	}
	return ms(holdAll(c.keyed[:], k, now.UnixMilli()))
}

// HoldProduce is Hold for a Produce request of size bytes that also counts
// the produce requests of the bucket already forwarded and not yet answered
// (a client pipelines several per connection, on each of its connections):
// the request waits as long as the bucket's throttle formula would throttle
// if those were already recorded, and at least until the bucket's deadline. Its size is
// then counted as in flight until Release (the response records it,
// as Kafka does, when it passes). Without SharedDeadline it returns 0, 0.
// The client's tenant counts it in flight likewise, and holds it while
// the ceiling binds and the principal has used its fair share.
func (c *Client) HoldProduce(size int, now time.Time) (time.Duration, int64) {
	if !c.e.cfg.SharedDeadline {
		return 0, 0
	}
	hold, joined := joinAll(c.keyed[:], float64(size), now.UnixMilli(), c.e.maxThrottleMs)
	if !joined {
		return ms(hold), 0
	}
	return ms(hold), int64(size)
}

// Release takes a request HoldProduce (k producer_byte_rate) or
// ReserveFetch (consumer_byte_rate) counted in flight out of flight.
func (c *Client) Release(k model.Key, reserved int64, now time.Time) {
	if reserved > 0 && k.Valid() {
		releaseAll(c.keyed[:], k, float64(reserved), now.UnixMilli())
	}
}

// ReserveFetch clamps one consumer fetch. max_bytes becomes at most
// floor(Q·(N−1)·W), Kafka's clamp (Q × the entity's burst under the token
// bucket when it sets one), and — because a gateway's bucket is fed
// by fetches on several connections at once — at most what the bucket
// still has room for (its tokens, or the sampled window's room), counting
// the fetches already in flight; but
// at least 1 byte, for which the broker still returns one batch, so the
// consumer progresses and is throttled by the debt. The clamp is reserved
// until Release. Without a quota it returns (requested, 0). The
// client's tenant clamps it too and counts it in flight.
func (c *Client) ReserveFetch(requested int32, now time.Time) (clamp int32, reserved int64) {
	v, ok := clampAll(c.keyed[:], model.ConsumerByteRate, float64(requested), now.UnixMilli(), true)
	if clamp = int32(v); ok {
		reserved = int64(clamp)
	}
	return clamp, reserved
}

// Mutation starts one request's controller-mutation accounting. strict is
// true for CreateTopics v6+, DeleteTopics v5+ and CreatePartitions v3+.
func (c *Client) Mutation(strict bool, now time.Time) Mutation {
	return c.counted(model.ControllerMutationRate, strict, now)
}

// counted starts the accounting of one request's events on the token
// bucket of the counted key k (model.Key.Counted).
func (c *Client) counted(k model.Key, strict bool, now time.Time) Mutation {
	// lock rather than bucket: a cached bucket that expired must be
	// replaced here, or the whole request would charge a dropped bucket.
	var b *bucket
	if c.own.lock(k, now.UnixMilli(), false) {
		b = c.own.b
		c.own.unlock()
	}
	return Mutation{key: k, b: b, c: c, strict: strict}
}

// CheckMutation reports whether the client's mutation bucket is below zero
// at now, and the throttle that goes with it. A strict request is rejected
// exactly when this reports exceeded.
func (c *Client) CheckMutation(now time.Time) (time.Duration, bool) {
	return c.deficit(model.ControllerMutationRate, now)
}

// deficit reports whether the client's token bucket of the counted key k
// is below zero at now (a shadow bucket never is), and the throttle that
// pays the deficit off.
func (c *Client) deficit(k model.Key, now time.Time) (time.Duration, bool) {
	nowMs := now.UnixMilli()
	if !c.own.lock(k, nowMs, false) {
		return 0, false
	}
	b := c.own.b
	tok, q := b.tokens.Tokens(nowMs), b.tokens.Quota()
	shadow := b.shadow
	c.own.unlock()
	if tok < 0 && !shadow {
		return ms(max(rate.TokenThrottleTime(tok, q), 0)), true
	}
	return 0, false
}

// HoldProducerID returns how long an InitProducerId that may get a new
// producer id must wait before it is forwarded (producer_ids_rate): while
// the client's bucket, or its tenant's, is below zero, until the deficit
// is paid off, at most quota.max_throttle. A shadow bucket holds nothing.
func (c *Client) HoldProducerID(now time.Time) time.Duration {
	t, _ := c.deficit(model.ProducerIDsRate, now)
	if c.tnl.lock(model.ProducerIDsRate, now.UnixMilli(), false) {
		if tt, refused := c.tnl.refuses(now.UnixMilli()); refused {
			t = max(t, ms(tt))
		}
		c.tnl.unlock()
	}
	return min(t, time.Duration(c.e.maxThrottleMs)*time.Millisecond)
}

// RecordProducerID charges one new producer id (an InitProducerId answer
// that gave one) to producer_ids_rate, and returns the throttle the
// deficit it leaves calls for (0: none).
func (c *Client) RecordProducerID(now time.Time) time.Duration {
	m := c.counted(model.ProducerIDsRate, false, now)
	m.Record(1, now)
	return m.Throttle(now)
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
