package model

import (
	"cmp"
	"slices"
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

// TopicTable is one key's per-topic entities (Quotas.TopicTable). Once
// handed to the engine (quota.Engine) it is never modified (SetQuotas
// takes a clone), so the hot path reads it without a lock.
type TopicTable struct {
	vals map[Entity]float64
	// Entities per principal kind, so that a kind without any is skipped.
	nUser, nDefaultUser, nEvery int
	cp, tp                      lengths // client-id prefix and topic prefix lengths
}

func (t *TopicTable) clone() *TopicTable {
	if t == nil {
		return nil
	}
	c := &TopicTable{vals: make(map[Entity]float64, len(t.vals)), nUser: t.nUser, nDefaultUser: t.nDefaultUser,
		nEvery: t.nEvery, cp: t.cp.clone(), tp: t.tp.clone()}
	for e, v := range t.vals {
		c.vals[e] = v
	}
	return c
}

func (t *TopicTable) count(e Entity, d int) {
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

// Enabled reports whether the table has any entity.
func (t *TopicTable) Enabled() bool { return t != nil && len(t.vals) > 0 }

// onTopic returns the topic component of principal p's entity that applies
// to topic: the exact topic, else the longest topic prefix.
func (t *TopicTable) onTopic(p Entity, topic string) (Name, bool) {
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

// Tags names the per-topic bucket of (user, client) on topic, false when
// no per-topic quota applies (no bucket is made for such a topic).
func (t *TopicTable) Tags(user, client, topic string) (Tags, bool) {
	if !t.Enabled() {
		return Tags{}, false
	}
	with := func(tg Tags, n Name) Tags {
		tg.Topic, tg.TopicPrefix = n.Value(), n.IsPrefix()
		return tg
	}
	if user != "" && t.nUser > 0 {
		if n, ok := t.onTopic(Entity{User: Exact(user)}, topic); ok {
			return with(Tags{User: user}, n), true
		}
	}
	if user != "" && t.nDefaultUser > 0 {
		if n, ok := t.onTopic(Entity{User: Default()}, topic); ok {
			return with(Tags{User: user}, n), true
		}
	}
	for _, l := range t.cp.ls {
		if l > len(client) {
			continue
		}
		if n, ok := t.onTopic(Entity{Client: Prefix(client[:l])}, topic); ok {
			return with(Tags{Client: client[:l], Prefix: true}, n), true
		}
	}
	if t.nEvery > 0 {
		if n, ok := t.onTopic(Entity{}, topic); ok {
			return with(Tags{}, n), true
		}
	}
	return Tags{}, false
}

// Limit is the bound of a per-topic bucket with the given tags, the level
// and the entity that supplies it; LevelNone and Unlimited when its entity
// is gone.
func (t *TopicTable) Limit(tg Tags) (Level, Entity, float64) {
	if !t.Enabled() {
		return LevelNone, Entity{}, Unlimited
	}
	tn := Exact(tg.Topic)
	if tg.TopicPrefix {
		tn = Prefix(tg.Topic)
	}
	var cands [2]Entity
	n := 1
	switch {
	case tg.Prefix:
		cands[0] = Entity{Client: Prefix(tg.Client), Topic: tn}
	case tg.User != "":
		cands[0], cands[1] = Entity{User: Exact(tg.User), Topic: tn}, Entity{User: Default(), Topic: tn}
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
func (q *Quotas) TopicEnabled(k Key) bool { return k.Valid() && q.topics[k].Enabled() }

// ResolveTopic says which per-topic quota applies to (user, clientID) on
// topic for key k, and which bucket accounts for it: Limited() is false
// when none does (the topic is then held by the client quota alone).
func (q *Quotas) ResolveTopic(k Key, user, clientID, topic string) Resolution {
	if !k.Valid() {
		return Resolution{Key: k, Quota: Unlimited}
	}
	t := q.topics[k]
	r := Resolution{Key: k, Enabled: t.Enabled(), Quota: Unlimited}
	tg, ok := t.Tags(user, clientID, topic)
	if !ok {
		return r
	}
	r.Level, r.Entity, r.Quota = t.Limit(tg)
	r.UserTag, r.ClientTag, r.ClientPrefix = tg.User, tg.Client, tg.Prefix
	r.TopicTag, r.TopicPrefix = tg.Topic, tg.TopicPrefix
	r.Options = q.optionsOf(r.Entity)
	return r
}
