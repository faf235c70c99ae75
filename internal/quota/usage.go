package quota

import (
	"cmp"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Usage is one live bucket, for metrics. Kafka's equivalent is the pair of
// sensors <Type>-<userTag>:<clientTag> and <Type>ThrottleTime-….
type Usage struct {
	Key model.Key
	// User and ClientID are the bucket's tags; "" is an unused dimension.
	// User is the raw name; Kafka's user tag is Sanitize(User).
	User, ClientID string
	// ClientIDPrefix says the bucket is a client-id prefix group: ClientID
	// is the prefix, shared by every client-id that starts with it.
	ClientIDPrefix bool
	// Topic names a per-topic quota's bucket ("" for a client quota's):
	// the topic, or the topic prefix shared by its topics when
	// TopicPrefix.
	Topic       string
	TopicPrefix bool
	// Level and Entity say which configured quota bounds the bucket;
	// LevelNone with Quota = Unlimited when none does.
	Level  model.Level
	Entity model.Entity
	Quota  float64
	// Rate is the current rate per second (bytes, percent, or partitions)
	// and Utilization is Rate ÷ Quota, 0 when unlimited. In a Tollgate
	// cluster Rate is the whole cluster's, as this instance knows it.
	Rate, Utilization float64
	// InstanceRate is this instance's own part of Rate: Rate times this
	// instance's share of the bucket's recent traffic (its own against
	// the others' reports, smoothed over exchange intervals), so never
	// more than Rate. Outside a Tollgate cluster it is Rate.
	InstanceRate float64
	// Tokens is the controller-mutation bucket's balance; 0 for other keys.
	Tokens float64
	// Throttles counts the throttled records and ThrottleTotal sums their
	// throttle times (after the MaxThrottle cap).
	Throttles     int64
	ThrottleTotal time.Duration
	// Shadow says the bucket's quota is in shadow mode (measured, not
	// enforced) and Shadowed is what it would have throttled while it was.
	Shadow   bool
	Shadowed model.ShadowStats
	// Options are the bucket's entity's options as the bucket applies them
	// (Options.Shadow is Shadow).
	Options model.Options
	// Created and LastActive are when the bucket was created and last
	// recorded into.
	Created, LastActive time.Time
}

// snapshot reads a bucket at nowMs without changing it; inCluster: the
// engine is part of a Tollgate cluster. b.mu must be held.
func (b *bucket) snapshot(nowMs int64, inCluster bool) Usage {
	u := Usage{
		Key:            b.key,
		User:           b.user,
		ClientID:       b.client,
		ClientIDPrefix: b.prefix,
		Topic:          b.topic,
		TopicPrefix:    b.topicPrefix,
		Level:          b.level,
		Entity:         b.entity,
		Quota:          b.quota,
		Throttles:      b.throttles,
		ThrottleTotal:  ms(b.throttleMs),
		Shadow:         b.shadow,
		Options:        model.Options{Shadow: b.shadow, Burst: b.burst, HasBurst: b.hasBurst},
		Shadowed:       b.sh.stats(),
		Created:        time.UnixMilli(b.created),
		LastActive:     time.UnixMilli(b.lastActive),
	}
	u.Rate, _ = b.rate.Peek(nowMs)
	u.InstanceRate = u.Rate
	if inCluster {
		u.InstanceRate = u.Rate * b.instancePart()
	}
	if b.key.Counted() {
		u.Tokens = b.tokens.Peek(nowMs)
	}
	if b.level != model.LevelNone {
		u.Utilization = u.Rate / b.quota
	}
	return u
}

// Usage returns every live bucket at now, ordered by key and tags. Buckets
// idle for Expiry or longer are left out even if Expire has not run yet.
// Reading usage never changes a bucket.
func (e *Engine) Usage(now time.Time) []Usage {
	nowMs := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Usage
	for i := range e.mgr {
		for _, b := range e.mgr[i].buckets {
			b.mu.Lock()
			if nowMs-b.lastActive < e.expiryMs {
				out = append(out, b.snapshot(nowMs, e.clusterOn()))
			}
			b.mu.Unlock()
		}
	}
	slices.SortFunc(out, byTags)
	return out
}

// Resolve says which quota applies to (user, clientID) for key k at now:
// the level and entity, the value, the bucket tags, and the bucket's current
// rate and utilization. It creates nothing and changes nothing.
func (e *Engine) Resolve(k model.Key, user, clientID string, now time.Time) model.Resolution {
	if !k.Valid() {
		return model.Resolution{Key: k, Quota: model.Unlimited}
	}
	e.mu.Lock()
	r := e.quotas.Resolve(k, user, clientID)
	b := e.mgr[k].buckets[model.Tags{User: r.UserTag, Client: r.ClientTag, Prefix: r.ClientPrefix}]
	e.mu.Unlock()
	if b == nil || !r.Enabled {
		return r
	}
	b.mu.Lock()
	r.Rate, _ = b.rate.Peek(now.UnixMilli())
	// As snapshot fills Usage.InstanceRate.
	r.InstanceRate = r.Rate
	if e.clusterOn() {
		r.InstanceRate = r.Rate * b.instancePart()
	}
	r.Shadowed = b.sh.stats()
	b.mu.Unlock()
	if r.Limited() {
		r.Utilization = r.Rate / r.Quota
	}
	return r
}

// Busiest returns at most n live buckets, the busiest at now: the highest
// utilization first, then the highest rate, then the most throttles (ties go
// by key and tags), ordered like Usage; and the number of live buckets of
// each key. It is what a bounded metrics export needs: one pass over the
// buckets and O(n) memory however many there are. Reading never changes a
// bucket.
func (e *Engine) Busiest(now time.Time, n int) (top []Usage, live map[model.Key]int) {
	nowMs := now.UnixMilli()
	live = make(map[model.Key]int, model.NumKeys)
	sel := newSmallest(n, busier)
	e.mu.Lock()
	for k := range model.NumKeys {
		live[k] = 0
	}
	for i := range e.mgr {
		for _, b := range e.mgr[i].buckets {
			b.mu.Lock()
			if nowMs-b.lastActive < e.expiryMs {
				live[b.key]++
				sel.offer(b.snapshot(nowMs, e.clusterOn()))
			}
			b.mu.Unlock()
		}
	}
	e.mu.Unlock()
	top = sel.items
	slices.SortFunc(top, byTags)
	return top, live
}

// busier orders usage by how much an operator wants to see it.
func busier(a, b Usage) bool {
	c := cmp.Or(cmp.Compare(b.Utilization, a.Utilization), cmp.Compare(b.Rate, a.Rate),
		cmp.Compare(b.Throttles, a.Throttles))
	if c == 0 {
		c = byTags(a, b)
	}
	return c < 0
}

func byTags(a, b Usage) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Topic, b.Topic), compareBool(a.TopicPrefix, b.TopicPrefix),
		cmp.Compare(a.User, b.User), cmp.Compare(a.ClientID, b.ClientID), compareBool(a.ClientIDPrefix, b.ClientIDPrefix))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}
