package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Unlimited is the bound of a bucket no quota applies to. It is Kafka's
// Long.MAX_VALUE as a double, so such a bucket records but never throttles.
const Unlimited = float64(math.MaxInt64)

// table is one key's configured entities, i.e. what one Kafka quota manager
// knows. Resolution is per key on purpose (§10 pitfall 14): a user entity
// with only producer_byte_rate must not shadow a client-id entity's
// consumer_byte_rate.
type table struct {
	vals map[Entity]float64
	// count holds the number of entities per level. Kafka ≥ KAFKA-19282
	// keeps such counts and clears a level's enabled bit when its last
	// entity is removed; before it, a bit stayed set until restart.
	count [LevelDefaultClient + 1]int
	// plens holds the distinct lengths of the client-id prefixes, longest
	// first, and plenCount how many prefixes have each: the longest
	// matching prefix of a client-id is found with one map lookup per
	// distinct length, however long the client-id (a client chooses it).
	plens     []int
	plenCount map[int]int
}

func (t *table) clone() *table {
	if t == nil {
		return nil
	}
	c := &table{vals: make(map[Entity]float64, len(t.vals)), count: t.count, plens: slices.Clone(t.plens)}
	for e, v := range t.vals {
		c.vals[e] = v
	}
	if t.plenCount != nil {
		c.plenCount = make(map[int]int, len(t.plenCount))
		for l, n := range t.plenCount {
			c.plenCount[l] = n
		}
	}
	return c
}

// addEntity counts a new entity of t.
func (t *table) addEntity(e Entity) {
	t.count[e.Level()]++
	if !e.Client.IsPrefix() {
		return
	}
	l := len(e.Client.Value())
	if t.plenCount == nil {
		t.plenCount = make(map[int]int)
	}
	if t.plenCount[l]++; t.plenCount[l] == 1 {
		i, _ := slices.BinarySearchFunc(t.plens, l, func(a, b int) int { return cmp.Compare(b, a) })
		t.plens = slices.Insert(t.plens, i, l)
	}
}

// removeEntity uncounts an entity removed from t.
func (t *table) removeEntity(e Entity) {
	t.count[e.Level()]--
	if !e.Client.IsPrefix() {
		return
	}
	l := len(e.Client.Value())
	if t.plenCount[l]--; t.plenCount[l] == 0 {
		delete(t.plenCount, l)
		t.plens = slices.DeleteFunc(t.plens, func(x int) bool { return x == l })
	}
}

// longestPrefix returns the longest client-id prefix of t that client
// starts with. The empty client-id matches none (a prefix is never empty).
func (t *table) longestPrefix(client string) (string, bool) {
	for _, l := range t.plens {
		if l > len(client) {
			continue
		}
		if _, ok := t.vals[Entity{Client: Prefix(client[:l])}]; ok {
			return client[:l], true
		}
	}
	return "", false
}

// enabled is Kafka's enabled-levels bitmask E.
func (t *table) enabled() uint8 {
	if t == nil {
		return 0
	}
	var e uint8
	for l, n := range t.count {
		if n > 0 {
			e |= levelBit(Level(l))
		}
	}
	return e
}

func (t *table) has(user, client Name) bool {
	_, ok := t.vals[Entity{User: user, Client: client}]
	return ok
}

// Tags name a bucket: Kafka's metric tags (user, client), an empty tag being
// an unused dimension, or a client-id prefix group (prefix set, user empty,
// client the prefix). The group is its own kind of tag, so the group of
// prefix "bar-" and the bucket of a client-id spelled "bar-" never meet.
//
// A per-topic bucket also names its topic: topic is the topic, or the
// topic prefix when topicPrefix is set.
type Tags struct {
	User, Client string
	Prefix       bool
	Topic        string
	TopicPrefix  bool
}

// tags is Step A of §3.3: the tags that name the bucket of (user, client).
// The user tag is the raw user name: Kafka uses the sanitized name, but
// sanitization is injective, so raw names identify the same buckets and the
// hot path need not encode anything.
//
// Client-id prefixes are client-level entities: when the tags take Kafka's
// client-only shape ("", client), a client-id without an entity of its own
// (level 7) that starts with a configured prefix goes to the longest such
// prefix's group (Redpanda's rule: exact client-id, then prefix, then the
// default client-id).
func (t *table) tags(enabled uint8, user, client string) Tags {
	switch enabled {
	case 0, bitClient:
		return t.clientTags(client)
	case bitUser:
		return Tags{User: user}
	case bitUserClient:
		return Tags{User: user, Client: client}
	}
	// More than one kind of level is configured: the first existing of
	// levels 1 to 6 decides the shape of the tags.
	u, c := Exact(user), Exact(client)
	switch {
	case t.has(u, c), t.has(u, Default()):
		return Tags{User: user, Client: client}
	case t.has(u, Name{}):
		return Tags{User: user}
	case t.has(Default(), c), t.has(Default(), Default()):
		return Tags{User: user, Client: client}
	case t.has(Default(), Name{}):
		return Tags{User: user}
	}
	return t.clientTags(client)
}

// clientTags is the client-only shape: the client-id's prefix group when it
// has no entity of its own and starts with a configured prefix, else
// ("", client).
func (t *table) clientTags(client string) Tags {
	if t == nil || len(t.plens) == 0 || t.has(Name{}, Exact(client)) {
		return Tags{Client: client}
	}
	if p, ok := t.longestPrefix(client); ok {
		return Tags{Client: p, Prefix: true}
	}
	return Tags{Client: client}
}

// limit is Step B of §3.3: the bound that applies to a bucket with the given
// tags, the level and the configured entity that supplied it. An empty tag
// means the dimension is unused, which is why an empty client-id can only be
// limited by a user-level quota. A prefix group is bounded by its prefix's
// entity alone.
func (t *table) limit(tg Tags) (Level, Entity, float64) {
	if t == nil {
		return LevelNone, Entity{}, Unlimited
	}
	if tg.Prefix {
		e := ClientPrefixEntity(tg.Client)
		if v, ok := t.vals[e]; ok {
			return LevelClientPrefix, e, v
		}
		return LevelNone, Entity{}, Unlimited
	}
	userTag, clientTag := tg.User, tg.Client
	var candidates [4]Entity
	var n int
	switch {
	case userTag != "" && clientTag != "":
		u, c := Exact(userTag), Exact(clientTag)
		candidates = [4]Entity{{User: u, Client: c}, {User: u, Client: Default()}, {User: Default(), Client: c}, {User: Default(), Client: Default()}}
		n = 4
	case userTag != "":
		candidates[0] = Entity{User: Exact(userTag)}
		candidates[1] = Entity{User: Default()}
		n = 2
	case clientTag != "":
		candidates[0] = Entity{Client: Exact(clientTag)}
		candidates[1] = Entity{Client: Default()}
		n = 2
	}
	for _, e := range candidates[:n] {
		if v, ok := t.vals[e]; ok {
			return e.Level(), e, v
		}
	}
	return LevelNone, Entity{}, Unlimited
}

// Quotas is a set of configured client quotas: for each key, the entities
// that carry it and their values. The zero value is an empty set ready to
// use. Like a map, a Quotas value refers to shared storage once it holds
// something; use Clone for an independent copy. It is not safe for
// concurrent mutation; the engine (quota.Engine) takes its own copy in
// SetQuotas.
type Quotas struct {
	keys   [NumKeys]*table
	topics [NumKeys]*TopicTable // per-topic entities (byte rates only)
	opts   map[Entity]Options   // Options, by entity
}

// Set configures value v for key k on entity e. It rejects what Kafka's
// AlterClientQuotas rejects for every key: an invalid entity and a value
// that is not > 0 (NaN included, which Kafka lets slip through). The
// LONG-only integer checks belong to the admin API, not here.
func (q *Quotas) Set(e Entity, k Key, v float64) error {
	if !k.Valid() {
		return fmt.Errorf("Invalid configuration key %v", k)
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if !(v > 0) {
		return fmt.Errorf("Quota %v must be greater than 0", k)
	}
	if e.IsTopic() {
		if !k.ByteRate() {
			return fmt.Errorf("Invalid configuration key %v", k) // a topic quota takes the byte rates only (model.TopicKeys)
		}
		t := q.topics[k]
		if t == nil {
			t = &TopicTable{vals: make(map[Entity]float64)}
			q.topics[k] = t
		}
		if _, ok := t.vals[e]; !ok {
			t.count(e, 1)
		}
		t.vals[e] = v
		return nil
	}
	t := q.keys[k]
	if t == nil {
		t = &table{vals: make(map[Entity]float64)}
		q.keys[k] = t
	}
	if _, ok := t.vals[e]; !ok {
		t.addEntity(e)
	}
	t.vals[e] = v
	return nil
}

// Remove deletes key k from entity e and reports whether it was set.
func (q *Quotas) Remove(e Entity, k Key) bool {
	if k.Valid() && e.IsTopic() {
		t := q.topics[k]
		if t == nil {
			return false
		}
		if _, ok := t.vals[e]; !ok {
			return false
		}
		delete(t.vals, e)
		t.count(e, -1)
		return true
	}
	if !k.Valid() || q.keys[k] == nil {
		return false
	}
	t := q.keys[k]
	if _, ok := t.vals[e]; !ok {
		return false
	}
	delete(t.vals, e)
	t.removeEntity(e)
	return true
}

// Get returns the value of key k on entity e.
func (q *Quotas) Get(e Entity, k Key) (float64, bool) {
	if k.Valid() && e.IsTopic() {
		if q.topics[k] == nil {
			return 0, false
		}
		v, ok := q.topics[k].vals[e]
		return v, ok
	}
	if !k.Valid() || q.keys[k] == nil {
		return 0, false
	}
	v, ok := q.keys[k].vals[e]
	return v, ok
}

// Len returns the number of (entity, key) pairs configured.
func (q *Quotas) Len() int {
	n := 0
	for _, t := range q.keys {
		if t != nil {
			n += len(t.vals)
		}
	}
	for _, t := range q.topics {
		if t != nil {
			n += len(t.vals)
		}
	}
	return n
}

// Entities lists every entity that has at least one key, ordered by level
// and then by name, so that listings are deterministic.
func (q *Quotas) Entities() []Entity {
	seen := make(map[Entity]bool)
	var out []Entity
	add := func(vals map[Entity]float64) {
		for e := range vals {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	for _, t := range q.keys {
		if t != nil {
			add(t.vals)
		}
	}
	for _, t := range q.topics {
		if t != nil {
			add(t.vals)
		}
	}
	slices.SortFunc(out, Compare)
	return out
}

// Values returns every key configured on entity e.
func (q *Quotas) Values(e Entity) map[Key]float64 {
	out := make(map[Key]float64)
	for k := range NumKeys {
		if v, ok := q.Get(e, k); ok {
			out[k] = v
		}
	}
	return out
}

// Clone returns an independent copy.
func (q *Quotas) Clone() Quotas {
	var c Quotas
	for k, t := range q.keys {
		c.keys[k] = t.clone()
	}
	for k, t := range q.topics {
		c.topics[k] = t.clone()
	}
	if q.opts != nil {
		c.opts = make(map[Entity]Options, len(q.opts))
		for e, o := range q.opts {
			c.opts[e] = o
		}
	}
	return c
}

// Enabled reports whether key k has any entity at all. A Kafka manager
// without one records nothing and never throttles.
func (q *Quotas) Enabled(k Key) bool {
	return k.Valid() && q.keys[k].enabled() != 0
}

// Resolution says which quota applies to a (user, client-id) for one key
// and which bucket accounts for it.
type Resolution struct {
	Key Key
	// Enabled is false when no entity carries Key; nothing is then
	// recorded or throttled for it.
	Enabled bool
	// Level is the level of Entity; LevelNone means unlimited.
	Level Level
	// Entity is the configured entity whose value applies.
	Entity Entity
	// Quota is the bound, Unlimited when no quota applies.
	Quota float64
	// UserTag and ClientTag name the bucket (Kafka's metric tags). An empty
	// tag is an unused dimension. UserTag is the raw user name; Kafka's
	// metric tag is Sanitize(UserTag).
	UserTag, ClientTag string
	// ClientPrefix says the bucket is a client-id prefix group: ClientTag
	// is the prefix, shared by every client-id that starts with it.
	ClientPrefix bool
	// TopicTag names the topic of a per-topic quota's bucket (ResolveTopic),
	// the topic prefix when TopicPrefix; "" for a client quota.
	TopicTag    string
	TopicPrefix bool
	// Options are the options of Entity: Shadow, a shadow quota.
	Options Options
	// Rate is the bucket's current rate per second and Utilization is
	// Rate ÷ Quota; both are 0 when the bucket does not exist yet.
	// InstanceRate is this instance's own part of Rate, as
	// quota.Usage.InstanceRate: Rate outside a Tollgate cluster.
	// Shadowed is what a shadow bucket would have throttled. Only
	// quota.Engine.Resolve fills them.
	Rate, Utilization, InstanceRate float64
	Shadowed                        ShadowStats
}

// Limited reports whether a finite quota applies.
func (r Resolution) Limited() bool { return r.Level != LevelNone }

// Resolve runs Kafka's precedence algorithm (Step A, then Step B) for key k.
// A nil or empty client-id must be passed as "": Kafka treats null as "".
func (q *Quotas) Resolve(k Key, user, clientID string) Resolution {
	if !k.Valid() {
		return Resolution{Key: k, Quota: Unlimited}
	}
	t := q.keys[k]
	r := resolve(k, t, t.enabled(), user, clientID)
	if r.Limited() {
		r.Options = q.optionsOf(r.Entity)
	}
	return r
}

func resolve(k Key, t *table, enabled uint8, user, clientID string) Resolution {
	tg := t.tags(enabled, user, clientID)
	lvl, ent, v := t.limit(tg)
	return Resolution{
		Key:          k,
		Enabled:      enabled != 0,
		Level:        lvl,
		Entity:       ent,
		Quota:        v,
		UserTag:      tg.User,
		ClientTag:    tg.Client,
		ClientPrefix: tg.Prefix,
	}
}

// Bits of Kafka's "enabled levels" mask (§3.3 Step A).
const (
	bitClient     = 1 // levels 7, 8 and the client-id prefix level
	bitUser       = 2 // levels 3, 6
	bitUserClient = 4 // levels 1, 2, 4, 5
)

// levelBit returns the enabled-levels bit the level belongs to.
func levelBit(l Level) uint8 {
	switch l {
	case LevelClient, LevelClientPrefix, LevelDefaultClient:
		return bitClient
	case LevelUser, LevelDefaultUser:
		return bitUser
	case LevelNone, LevelUserTopic, LevelDefaultUserTopic, LevelClientPrefixTopic, LevelTopic:
		return 0 // per-topic levels live in their own tables
	}
	return bitUserClient
}

// The engine's view of the tables: it names a client's bucket (Tags, Step
// A), bounds it (Limit, Step B), and reads a per-topic table without a lock
// (TopicTable).

// Tags names the bucket of (user, client) for key k (k valid).
func (q *Quotas) Tags(k Key, user, client string) Tags {
	t := q.keys[k]
	return t.tags(t.enabled(), user, client)
}

// Limit is the bound of key k's bucket with tags tg, the level and the
// entity that supplies it (k valid).
func (q *Quotas) Limit(k Key, tg Tags) (Level, Entity, float64) { return q.keys[k].limit(tg) }

// TopicTable returns key k's per-topic entities; nil when there are none
// (k valid).
func (q *Quotas) TopicTable(k Key) *TopicTable { return q.topics[k] }
