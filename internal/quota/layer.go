package quota

import (
	"math"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/rate"
)

// layer is one level of the quota a request passes: the client's bucket
// of a key (bucketLayer), its tenant's ceiling and fair share
// (tenantLayer), a per-topic bucket (bucketLayer with a topic). A
// Client's calls run a pipeline, an ordered list of layers (Client.keyed,
// Client.topics), each layer locked in turn, and the tightest layer wins:
// the largest throttle or hold, the smallest fetch.
//
// lock finds the layer's bucket(s) of k for its Client at nowMs and locks
// them, or reports false (the layer does not limit k: nothing locked);
// record is true when the call records, for a layer that counts who is
// active. Every other method runs between lock and unlock. A layer is a
// part of its Client, so not safe for concurrent use either.
type layer interface {
	lock(k model.Key, nowMs int64, record bool) bool
	unlock()
	// record adds v at nowMs and returns the throttle in ms, capped at
	// capMs > 0 (Kafka records first and checks second; 0 for a shadow
	// layer, which counts what it would have done).
	record(v float64, nowMs, capMs int64) int64
	// unrecord takes v back without any check.
	unrecord(v float64, nowMs int64)
	// hold is how long a request must wait for the layer's deadline.
	hold(nowMs int64) int64
	// join is the wait of a Produce of size bytes counting those in
	// flight, which it joins (false: it did not).
	join(size float64, nowMs, capMs int64) (int64, bool)
	// room is the most of requested a fetch may carry now, counting the
	// fetches in flight (false: the layer does not limit fetches, and the
	// fetch is not reserved).
	room(requested float64, nowMs int64) (float64, bool)
	// fetchMax is the most a fetch may carry at all (math.MaxInt32: no
	// limit).
	fetchMax(nowMs int64) float64
	// addInflight counts v more (or, v < 0, less) in flight, never below
	// zero.
	addInflight(v float64)
}

// recordAll records v for k through the layers: the tightest throttle.
func recordAll(ls []layer, k model.Key, v float64, nowMs, capMs int64) int64 {
	var t int64
	for _, l := range ls {
		if l.lock(k, nowMs, true) {
			t = max(t, l.record(v, nowMs, capMs))
			l.unlock()
		}
	}
	return t
}

// unrecordAll takes v back from every layer of k.
func unrecordAll(ls []layer, k model.Key, v float64, nowMs int64) {
	for _, l := range ls {
		if l.lock(k, nowMs, false) {
			l.unrecord(v, nowMs)
			l.unlock()
		}
	}
}

// holdAll is the longest hold of the layers of k.
func holdAll(ls []layer, k model.Key, nowMs int64) int64 {
	var h int64
	for _, l := range ls {
		if l.lock(k, nowMs, false) {
			h = max(h, l.hold(nowMs))
			l.unlock()
		}
	}
	return h
}

// joinAll joins a Produce of size in flight in every layer: the longest
// wait, and whether some layer counts it.
func joinAll(ls []layer, size float64, nowMs, capMs int64) (int64, bool) {
	var h int64
	joined := false
	for _, l := range ls {
		if l.lock(model.ProducerByteRate, nowMs, false) {
			t, ok := l.join(size, nowMs, capMs)
			l.unlock()
			h, joined = max(h, t), joined || ok
		}
	}
	return h, joined
}

// releaseAll takes v of k out of flight in every layer.
func releaseAll(ls []layer, k model.Key, v float64, nowMs int64) {
	for _, l := range ls {
		if l.lock(k, nowMs, false) {
			l.addInflight(-v)
			l.unlock()
		}
	}
}

// fetchMaxAll is the smallest fetchMax of the layers of k.
func fetchMaxAll(ls []layer, k model.Key, nowMs int64) float64 {
	v := float64(math.MaxInt32)
	for _, l := range ls {
		if l.lock(k, nowMs, false) {
			v = min(v, l.fetchMax(nowMs))
			l.unlock()
		}
	}
	return v
}

// maxLayers bounds a pipeline's length.
const maxLayers = 4

// clampAll clamps a fetch of requested bytes of k through the layers,
// first to last, and, with reserve, reserves the clamp in each layer that
// limits it: it reports whether one did. The layers stay locked from the
// first clamp to the last reservation, so that concurrent fetches see
// each other's reservations (the order of the layers is the order of the
// locks: a layer's lock may take the engine's, so a pipeline whose layers
// are held together is ordered as the locks are, Engine.mu before a
// client bucket before a tenant's ceiling before a share).
func clampAll(ls []layer, k model.Key, requested float64, nowMs int64, reserve bool) (float64, bool) {
	var locked, limits [maxLayers]bool
	limited := false
	for i, l := range ls {
		if locked[i] = l.lock(k, nowMs, false); locked[i] {
			requested, limits[i] = l.room(requested, nowMs)
			limited = limited || limits[i]
		}
	}
	for i := len(ls) - 1; i >= 0; i-- {
		if limits[i] && reserve {
			ls[i].addInflight(requested)
		}
		if locked[i] {
			ls[i].unlock()
		}
	}
	return requested, limited
}

// bucketLayer is the layer of one client bucket: the client's bucket of
// a key, or, with topic set, the client's per-topic bucket of that topic.
type bucketLayer struct {
	c        *Client
	perTopic bool
	topic    []byte  // the per-topic layer's topic, set for each call
	b        *bucket // locked between lock and unlock
}

// lock finds the bucket and locks it, replacing it first if it expired
// since it was looked up.
func (l *bucketLayer) lock(k model.Key, nowMs int64, _ bool) bool {
	c := l.c
	var b *bucket
	if !l.perTopic {
		b = c.bucket(k, nowMs)
	} else {
		b = c.topicBucket(k, l.topic, nowMs)
	}
	for b != nil {
		b.mu.Lock()
		if !b.dead {
			l.b = b
			return true
		}
		b.mu.Unlock()
		b = c.replaceBucket(k, l.perTopic, l.topic, nowMs)
	}
	return false
}

// replaceBucket looks up again, past the Client's cache, a bucket lock
// found expired.
func (c *Client) replaceBucket(k model.Key, perTopic bool, topic []byte, nowMs int64) *bucket {
	if !perTopic {
		b := c.e.slowBucket(&c.e.mgr[k], ident{c.user, c.clientID, ""}, nowMs)
		c.cache[k].b = b
		return b
	}
	name := string(topic)
	m := &c.e.mgr[model.NumKeys+k]
	b := c.e.slowBucket(m, ident{c.user, c.clientID, name}, nowMs)
	c.tcache[k][name] = topicCached{gen: m.gen.Load(), b: b}
	return b
}

func (l *bucketLayer) unlock() {
	l.b.mu.Unlock()
	l.b = nil
}

// record adds v to the bucket and returns the throttle. A shadow bucket
// computes its throttle the same way, counts it and returns 0.
func (l *bucketLayer) record(v float64, nowMs, capMs int64) int64 {
	b, e := l.b, l.c.e
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
	return b.apply(t) // 0 for a shadow bucket
}

func (l *bucketLayer) unrecord(v float64, nowMs int64) {
	b := l.b
	b.rate.Record(-v, nowMs)
	l.c.e.noteLocal(b, -v, nowMs)
	b.until = 0 // the deadline may have come from what is taken back
	if b.key.Counted() || b.useTokens {
		b.tokens.Record(-v, nowMs)
	}
	b.lastActive = nowMs
}

func (l *bucketLayer) hold(nowMs int64) int64 {
	if l.b.shadow {
		return 0
	}
	return max(l.b.until-nowMs, 0)
}

// join waits as long as the bucket's throttle formula would throttle if
// the requests in flight were already recorded, and at least until the
// bucket's deadline.
func (l *bucketLayer) join(size float64, nowMs, capMs int64) (int64, bool) {
	b, e := l.b, l.c.e
	if b.shadow {
		return 0, false
	}
	hold := max(b.until-nowMs, 0)
	// In a Tollgate cluster: what the others have taken that has not
	// reached this instance yet, and this instance's lease.
	unseen := e.unseen(b, nowMs)
	if b.level != model.LevelNone && (b.inflight > 0 || unseen > 0) && b.useTokens {
		t := tokenThrottleMs(b.tokens.Peek(nowMs)-b.inflight-unseen, b.quota, capMs)
		hold = max(hold, t)
	} else if b.level != model.LevelNone && (b.inflight > 0 || unseen > 0) {
		r, w := b.rate.Peek(nowMs)
		observed := (r*float64(w)/1000 + b.inflight + unseen) / (float64(w) / 1000)
		t := int64(rate.ThrottleMs(observed, b.quota, w, capMs))
		hold = max(hold, t)
	}
	if b.level != model.LevelNone {
		hold = max(hold, e.leaseHold(b, size, nowMs))
	}
	b.inflight += size
	return hold, true
}

// room is at most floor(Q·(N−1)·W), Kafka's clamp (Q × the entity's burst
// under the token bucket when it sets one), and — because a gateway's
// bucket is fed by fetches on several connections at once — at most what
// the bucket still has room for (its tokens, or the sampled window's
// room), counting the fetches already in flight; but at least 1 byte, for
// which the broker still returns one batch, so the consumer progresses and
// is throttled by the debt.
func (l *bucketLayer) room(requested float64, nowMs int64) (float64, bool) {
	b, e := l.b, l.c.e
	if b.level == model.LevelNone || b.shadow {
		return requested, false
	}
	static := b.quota * e.fetchWindowSeconds(b)
	var room float64
	if b.useTokens {
		room = b.tokens.Peek(nowMs) - b.inflight
	} else {
		r, w := b.rate.Peek(nowMs)
		room = b.quota*float64(w)/1000 - r*float64(w)/1000 - b.inflight
	}
	// In a Tollgate cluster: less what the others have taken unseen, and
	// no more than this instance's lease.
	room = min(room-e.unseen(b, nowMs), e.leaseRoom(b, nowMs))
	v := min(requested, static, max(room, 1))
	return math.Floor(max(v, 1)), true
}

// fetchMax is floor(Q·(N−1)·W) (Q × the entity's burst under the token
// bucket when it sets one).
func (l *bucketLayer) fetchMax(int64) float64 {
	b := l.b
	if b.shadow {
		return math.MaxInt32
	}
	return min(b.quota*l.c.e.fetchWindowSeconds(b), math.MaxInt32)
}

func (l *bucketLayer) addInflight(v float64) {
	l.b.inflight = max(l.b.inflight+v, 0)
}
