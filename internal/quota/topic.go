package quota

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Per-topic quotas (beyond Kafka; KIP-1010 has discussed them for years):
// producer_byte_rate and consumer_byte_rate of a principal on a topic or a
// topic prefix. They live beside the client quotas, in tables and buckets of
// their own (one manager per key), and a request is held by the largest of
// the throttles that apply: its client quota's and, for each topic it
// carries, that topic's. So a per-topic quota never loosens a client quota.
//
// For one client (user U, client-id C) and one topic T, one per-topic
// entity applies per key, the most specific, principal first:
//
//  1. (user=U, topic)
//  2. (user=default, topic): one bucket per user
//  3. (client-id-prefix=P, topic): the longest prefix P of C that has a
//     per-topic entity on T
//  4. (topic): every client together
//
// and within each, the exact topic T before the longest matching topic
// prefix. A topic prefix is one bucket shared by every topic starting with
// it, as a client-id prefix is one bucket shared by its client-ids. An
// empty user or client-id matches no user or prefix component (Kafka's
// empty client-id rule). docs/quotas.md has the table.
//
// A tenant component (a named set of principals) fits in as one more
// principal kind between 1 and 2; nothing else depends on the list.

// lengths are the distinct lengths of a set of prefixes, longest first,
// and how many prefixes have each: the longest matching prefix of a name is
// found with one map lookup per distinct length.
type lengths struct {
	ls []int
	n  map[int]int
}

func (l *lengths) add(n int) {
	if l.n == nil {
		l.n = make(map[int]int)
	}
	if l.n[n]++; l.n[n] == 1 {
		i, _ := slices.BinarySearchFunc(l.ls, n, func(a, b int) int { return cmp.Compare(b, a) })
		l.ls = slices.Insert(l.ls, i, n)
	}
}

func (l *lengths) remove(n int) {
	if l.n[n]--; l.n[n] == 0 {
		delete(l.n, n)
		l.ls = slices.DeleteFunc(l.ls, func(x int) bool { return x == n })
	}
}

func (l lengths) clone() lengths {
	c := lengths{ls: slices.Clone(l.ls)}
	if l.n != nil {
		c.n = make(map[int]int, len(l.n))
		for k, v := range l.n {
			c.n[k] = v
		}
	}
	return c
}

// topicTable is one key's per-topic entities. Once handed to an Engine it
// is never modified (SetQuotas takes a clone), so the hot path reads it
// without a lock.
type topicTable struct {
	vals map[Entity]float64
	// Entities per principal kind, so that a kind without any is skipped.
	nUser, nDefaultUser, nEvery int
	cp, tp                      lengths // client-id prefix and topic prefix lengths
}

func (t *topicTable) clone() *topicTable {
	if t == nil {
		return nil
	}
	c := &topicTable{vals: make(map[Entity]float64, len(t.vals)), nUser: t.nUser, nDefaultUser: t.nDefaultUser,
		nEvery: t.nEvery, cp: t.cp.clone(), tp: t.tp.clone()}
	for e, v := range t.vals {
		c.vals[e] = v
	}
	return c
}

func (t *topicTable) count(e Entity, d int) {
	switch e.Level() {
	case LevelUserTopic:
		t.nUser += d
	case LevelDefaultUserTopic:
		t.nDefaultUser += d
	case LevelClientPrefixTopic:
		if d > 0 {
			t.cp.add(len(e.Client.Value()))
		} else {
			t.cp.remove(len(e.Client.Value()))
		}
	case LevelTopic:
		t.nEvery += d
	}
	if e.Topic.IsPrefix() {
		if d > 0 {
			t.tp.add(len(e.Topic.Value()))
		} else {
			t.tp.remove(len(e.Topic.Value()))
		}
	}
}

// enabled reports whether the table has any entity.
func (t *topicTable) enabled() bool { return t != nil && len(t.vals) > 0 }

// onTopic returns the topic component of principal p's entity that applies
// to topic: the exact topic, else the longest topic prefix.
func (t *topicTable) onTopic(p Entity, topic string) (Name, bool) {
	p.Topic = Exact(topic)
	if _, ok := t.vals[p]; ok {
		return p.Topic, true
	}
	for _, l := range t.tp.ls {
		if l > len(topic) {
			continue
		}
		p.Topic = Prefix(topic[:l])
		if _, ok := t.vals[p]; ok {
			return p.Topic, true
		}
	}
	return Name{}, false
}

// tags names the per-topic bucket of (user, client) on topic, false when
// no per-topic quota applies (no bucket is made for such a topic).
func (t *topicTable) tags(user, client, topic string) (tags, bool) {
	if !t.enabled() {
		return tags{}, false
	}
	with := func(tg tags, n Name) tags {
		tg.topic, tg.topicPrefix = n.Value(), n.IsPrefix()
		return tg
	}
	if user != "" && t.nUser > 0 {
		if n, ok := t.onTopic(Entity{User: Exact(user)}, topic); ok {
			return with(tags{user: user}, n), true
		}
	}
	if user != "" && t.nDefaultUser > 0 {
		if n, ok := t.onTopic(Entity{User: Default()}, topic); ok {
			return with(tags{user: user}, n), true
		}
	}
	for _, l := range t.cp.ls {
		if l > len(client) {
			continue
		}
		if n, ok := t.onTopic(Entity{Client: Prefix(client[:l])}, topic); ok {
			return with(tags{client: client[:l], prefix: true}, n), true
		}
	}
	if t.nEvery > 0 {
		if n, ok := t.onTopic(Entity{}, topic); ok {
			return with(tags{}, n), true
		}
	}
	return tags{}, false
}

// limit is the bound of a per-topic bucket with the given tags, the level
// and the entity that supplies it; LevelNone and Unlimited when its entity
// is gone.
func (t *topicTable) limit(tg tags) (Level, Entity, float64) {
	if !t.enabled() {
		return LevelNone, Entity{}, Unlimited
	}
	tn := Exact(tg.topic)
	if tg.topicPrefix {
		tn = Prefix(tg.topic)
	}
	var cands [2]Entity
	n := 1
	switch {
	case tg.prefix:
		cands[0] = Entity{Client: Prefix(tg.client), Topic: tn}
	case tg.user != "":
		cands[0], cands[1] = Entity{User: Exact(tg.user), Topic: tn}, Entity{User: Default(), Topic: tn}
		n = 2
	default:
		cands[0] = Entity{Topic: tn}
	}
	for _, e := range cands[:n] {
		if v, ok := t.vals[e]; ok {
			return e.Level(), e, v
		}
	}
	return LevelNone, Entity{}, Unlimited
}

// TopicEnabled reports whether some per-topic entity carries key k.
func (q *Quotas) TopicEnabled(k Key) bool { return k.Valid() && q.topics[k].enabled() }

// ResolveTopic says which per-topic quota applies to (user, clientID) on
// topic for key k, and which bucket accounts for it: Limited() is false
// when none does (the topic is then held by the client quota alone).
func (q *Quotas) ResolveTopic(k Key, user, clientID, topic string) Resolution {
	if !k.Valid() {
		return Resolution{Key: k, Quota: Unlimited}
	}
	t := q.topics[k]
	r := Resolution{Key: k, Enabled: t.enabled(), Quota: Unlimited}
	tg, ok := t.tags(user, clientID, topic)
	if !ok {
		return r
	}
	r.Level, r.Entity, r.Quota = t.limit(tg)
	r.UserTag, r.ClientTag, r.ClientPrefix = tg.user, tg.client, tg.prefix
	r.TopicTag, r.TopicPrefix = tg.topic, tg.topicPrefix
	r.Options = q.optionsOf(r.Entity)
	return r
}

// TopicQuotas reports whether some per-topic quota carries key k: only
// then need a request's topics be read. It is one atomic load.
func (e *Engine) TopicQuotas(k Key) bool {
	return k.ByteRate() && e.mgr[numKeys+k].view.Load().enabled
}

// ResolveTopic is Resolve for a per-topic quota: the quota that applies to
// (user, clientID) on topic, with its bucket's rate. It creates nothing.
func (e *Engine) ResolveTopic(k Key, user, clientID, topic string, now time.Time) Resolution {
	if !k.Valid() {
		return Resolution{Key: k, Quota: Unlimited}
	}
	e.mu.Lock()
	r := e.quotas.ResolveTopic(k, user, clientID, topic)
	b := e.mgr[numKeys+k].buckets[tags{user: r.UserTag, client: r.ClientTag, prefix: r.ClientPrefix,
		topic: r.TopicTag, topicPrefix: r.TopicPrefix}]
	e.mu.Unlock()
	if b == nil || !r.Limited() {
		return r
	}
	b.mu.Lock()
	r.Rate, _ = b.rate.Peek(now.UnixMilli())
	r.Shadowed = b.sh.stats()
	b.mu.Unlock()
	r.Utilization = r.Rate / r.Quota
	return r
}

// topicCacheMax bounds a Client's per-topic cache per key: topic names come
// from the client, so past the cap the cache starts over.
const topicCacheMax = 1024

type topicCached struct {
	gen uint64
	b   *bucket // nil: no per-topic quota applies to the topic
}

// topicBucket returns the client's per-topic bucket of k for topic, nil
// when no per-topic quota applies to it. Steady traffic is one map lookup
// in the client's own cache, without allocating.
func (c *Client) topicBucket(k Key, topic []byte, nowMs int64) *bucket {
	if !k.ByteRate() {
		return nil
	}
	c.e.maybeSweep(nowMs)
	m := &c.e.mgr[numKeys+k]
	g := m.gen.Load()
	cm := c.tcache[k]
	if tc, ok := cm[string(topic)]; ok && tc.gen == g {
		return tc.b
	}
	name := string(topic) // the cache keeps it: a copy
	b := c.e.bucketFor(m, ident{c.user, c.clientID, name}, nowMs)
	if cm == nil || len(cm) >= topicCacheMax {
		cm = make(map[string]topicCached)
		c.tcache[k] = cm
	}
	cm[name] = topicCached{gen: g, b: b}
	return b
}

// lockTopic is lock for a per-topic bucket.
func (c *Client) lockTopic(k Key, topic []byte, nowMs int64) *bucket {
	b := c.topicBucket(k, topic, nowMs)
	for b != nil {
		b.mu.Lock()
		if !b.dead {
			return b
		}
		b.mu.Unlock()
		name := string(topic)
		b = c.e.slowBucket(&c.e.mgr[numKeys+k], ident{c.user, c.clientID, name}, nowMs)
		c.tcache[k][name] = topicCached{gen: c.e.mgr[numKeys+k].gen.Load(), b: b}
	}
	return nil
}

// RecordTopic charges bytes of topic to the client's per-topic bucket for
// k (producer_byte_rate or consumer_byte_rate) and returns the throttle,
// 0 when no per-topic quota applies to the topic. It records, and
// throttles, as RecordProduce and RecordFetch do.
func (c *Client) RecordTopic(k Key, topic []byte, bytes int, now time.Time) time.Duration {
	nowMs := now.UnixMilli()
	return ms(c.e.recordInto(c.lockTopic(k, topic, nowMs), float64(bytes), nowMs, c.e.maxThrottleMs))
}

// HoldTopic returns how long a request carrying topic must wait before it
// is forwarded: the rest of its per-topic bucket's throttle, whichever
// connection it came on (SharedDeadline); 0 when no per-topic quota
// applies.
func (c *Client) HoldTopic(k Key, topic []byte, now time.Time) time.Duration {
	if !c.e.cfg.SharedDeadline {
		return 0
	}
	nowMs := now.UnixMilli()
	b := c.lockTopic(k, topic, nowMs)
	if b == nil {
		return 0
	}
	until, shadow := b.until, b.shadow
	b.mu.Unlock()
	if until <= nowMs || shadow {
		return 0
	}
	return ms(until - nowMs)
}

// TopicFetchMax returns the most each of parts partitions of topic may
// return in one fetch now: what the per-topic bucket still has room for
// (capped, as ReserveFetch caps max_bytes, at Q × the burst), split evenly,
// at least 1 byte (the broker still returns a first batch). math.MaxInt32
// when no per-topic quota applies. Nothing is reserved: the fetch is
// charged when its response passes.
func (c *Client) TopicFetchMax(topic []byte, parts int, now time.Time) int32 {
	nowMs := now.UnixMilli()
	b := c.lockTopic(ConsumerByteRate, topic, nowMs)
	if b == nil {
		return math.MaxInt32
	}
	defer b.mu.Unlock()
	if b.level == LevelNone || b.shadow {
		return math.MaxInt32
	}
	static := b.quota * c.e.fetchWindowSeconds(b)
	var room float64
	if b.useTokens {
		room = b.tokens.Peek(nowMs)
	} else {
		r, w := b.rate.Peek(nowMs)
		room = (b.quota - r) * float64(w) / 1000
	}
	room = min(room-c.e.unseen(b, nowMs), c.e.leaseRoom(b, nowMs))
	v := min(static, max(room, 1)) / float64(max(parts, 1))
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(v, 1))
}

// TopicName is the topic a per-topic bucket is named by, for logs.
func (u Usage) TopicName() string {
	if u.TopicPrefix {
		return u.Topic + "*"
	}
	return u.Topic
}
