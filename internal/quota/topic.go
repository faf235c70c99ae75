package quota

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// TopicQuotas reports whether some per-topic quota carries key k: only
// then need a request's topics be read. It is one atomic load.
func (e *Engine) TopicQuotas(k model.Key) bool {
	return k.ByteRate() && e.mgr[model.NumKeys+k].view.Load().enabled
}

// ResolveTopic is Resolve for a per-topic quota: the quota that applies to
// (user, clientID) on topic, with its bucket's rate. It creates nothing.
func (e *Engine) ResolveTopic(k model.Key, user, clientID, topic string, now time.Time) model.Resolution {
	if !k.Valid() {
		return model.Resolution{Key: k, Quota: model.Unlimited}
	}
	e.mu.Lock()
	r := e.quotas.ResolveTopic(k, user, clientID, topic)
	b := e.mgr[model.NumKeys+k].buckets[model.Tags{User: r.UserTag, Client: r.ClientTag, Prefix: r.ClientPrefix,
		Topic: r.TopicTag, TopicPrefix: r.TopicPrefix}]
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
func (c *Client) topicBucket(k model.Key, topic []byte, nowMs int64) *bucket {
	if !k.ByteRate() {
		return nil
	}
	c.e.maybeSweep(nowMs)
	m := &c.e.mgr[model.NumKeys+k]
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

// topicLayers is the Client's per-topic pipeline, for topic.
func (c *Client) topicLayers(topic []byte) []layer {
	c.top.topic = topic
	return c.topics[:]
}

// RecordTopic charges bytes of topic to the client's per-topic bucket for
// k (producer_byte_rate or consumer_byte_rate) and returns the throttle,
// 0 when no per-topic quota applies to the topic. It records, and
// throttles, as RecordProduce and RecordFetch do.
func (c *Client) RecordTopic(k model.Key, topic []byte, bytes int, now time.Time) time.Duration {
	t := recordAll(c.topicLayers(topic), k, float64(bytes), now.UnixMilli(), c.e.maxThrottleMs)
	c.top.topic = nil
	return ms(t)
}

// HoldTopic returns how long a request carrying topic must wait before it
// is forwarded: the rest of its per-topic bucket's throttle, whichever
// connection it came on (SharedDeadline); 0 when no per-topic quota
// applies.
func (c *Client) HoldTopic(k model.Key, topic []byte, now time.Time) time.Duration {
	if !c.e.cfg.SharedDeadline {
		return 0
	}
	h := holdAll(c.topicLayers(topic), k, now.UnixMilli())
	c.top.topic = nil
	return ms(h)
}

// TopicFetchMax returns the most each of parts partitions of topic may
// return in one fetch now: what the per-topic bucket still has room for
// (capped, as ReserveFetch caps max_bytes, at Q × the burst), split evenly,
// at least 1 byte (the broker still returns a first batch). math.MaxInt32
// when no per-topic quota applies. Nothing is reserved: the fetch is
// charged when its response passes.
func (c *Client) TopicFetchMax(topic []byte, parts int, now time.Time) int32 {
	v, ok := clampAll(c.topicLayers(topic), model.ConsumerByteRate, math.Inf(1), now.UnixMilli(), false)
	c.top.topic = nil
	if !ok {
		return math.MaxInt32
	}
	v /= float64(max(parts, 1))
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
