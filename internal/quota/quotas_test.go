package quota

import (
	"slices"
	"testing"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Shorthands for entity tables.
var (
	deflt = model.Default()
	none  = model.Name{}
)

func ex(s string) model.Name { return model.Exact(s) }

func ent(u, c model.Name) model.Entity { return model.Entity{User: u, Client: c} }

type entry struct {
	e model.Entity
	v float64
}

func quotasOf(t *testing.T, k model.Key, entries ...entry) model.Quotas {
	t.Helper()
	var q model.Quotas
	for _, en := range entries {
		if err := q.Set(en.e, k, en.v); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

func TestEntityLevel(t *testing.T) {
	cases := []struct {
		e    model.Entity
		want model.Level
	}{
		{ent(ex("u"), ex("c")), model.LevelUserClient},
		{ent(ex("u"), deflt), model.LevelUserDefaultClient},
		{ent(ex("u"), none), model.LevelUser},
		{ent(deflt, ex("c")), model.LevelDefaultUserClient},
		{ent(deflt, deflt), model.LevelDefaultUserDefaultClient},
		{ent(deflt, none), model.LevelDefaultUser},
		{ent(none, ex("c")), model.LevelClient},
		{ent(none, deflt), model.LevelDefaultClient},
		{ent(none, none), model.LevelNone},
	}
	for _, c := range cases {
		if got := c.e.Level(); got != c.want {
			t.Errorf("%v.Level() = %v, want %v", c.e, got, c.want)
		}
	}
}

func TestQuotasSetValidation(t *testing.T) {
	var q model.Quotas
	bad := []struct {
		e model.Entity
		k model.Key
		v float64
	}{
		{ent(none, none), model.ProducerByteRate, 1},
		{ent(ex(""), none), model.ProducerByteRate, 1},
		{ent(none, ex("")), model.ProducerByteRate, 1},
		{ent(ex("u"), none), model.ProducerByteRate, 0},
		{ent(ex("u"), none), model.ConsumerByteRate, -2},
		{ent(ex("u"), none), model.Key(9), 1},
	}
	for _, b := range bad {
		if err := q.Set(b.e, b.k, b.v); err == nil {
			t.Errorf("Set(%v, %v, %v) accepted", b.e, b.k, b.v)
		}
	}
	if q.Len() != 0 {
		t.Errorf("Len = %d after rejected sets", q.Len())
	}
}

func TestKeyNames(t *testing.T) {
	for _, k := range model.Keys() {
		got, ok := model.ParseKey(k.String())
		if !ok || got != k {
			t.Errorf("ParseKey(%q) = %v %v", k.String(), got, ok)
		}
	}
	if _, ok := model.ParseKey("connection_creation_rate"); ok {
		t.Error("connection_creation_rate is not a client quota key")
	}
}

// tv9Step is one check of TV9, ClientQuotaManagerTest.testQuotaConfigPrecedence.
// Changes apply before the check; value is recorded ×11 at one frozen
// instant, so a fresh window is 10 s.
type tv9Step struct {
	set           []entry
	remove        []model.Entity
	user, client  string
	bound         float64
	value         int
	throttleMs    int64 // [derived]; Kafka asserts only > 0 or not
	userTag, cTag string
}

var tv9Initial = []entry{
	{ent(deflt, none), 1000},
	{ent(none, deflt), 2000},
	{ent(deflt, deflt), 3000},
	{ent(ex("userA"), none), 4000},
	{ent(ex("userA"), ex("client1")), 5000},
	{ent(ex("userB"), none), 6000},
	{ent(ex("userB"), ex("client1")), 7000},
	{ent(ex("userB"), deflt), 8000},
	{ent(ex("userC"), none), 10000},
	{ent(none, ex("client1")), 9000},
}

var tv9Steps = []tv9Step{
	{user: "userA", client: "client1", bound: 5000, value: 4500, throttleMs: 0, userTag: "userA", cTag: "client1"},
	{user: "userA", client: "client2", bound: 4000, value: 4500, throttleMs: 2375, userTag: "userA"},
	{user: "userA", client: "client3", bound: 4000, value: 0, throttleMs: 2375, userTag: "userA"},
	{user: "userA", client: "client1", bound: 5000, value: 0, throttleMs: 0, userTag: "userA", cTag: "client1"},
	{user: "userB", client: "client1", bound: 7000, value: 8000, throttleMs: 2571, userTag: "userB", cTag: "client1"},
	{user: "userB", client: "client2", bound: 8000, value: 7000, throttleMs: 0, userTag: "userB", cTag: "client2"},
	{user: "userB", client: "client3", bound: 8000, value: 7000, throttleMs: 0, userTag: "userB", cTag: "client3"},
	{user: "userD", client: "client1", bound: 3000, value: 3500, throttleMs: 2833, userTag: "userD", cTag: "client1"},
	{user: "userD", client: "client2", bound: 3000, value: 2500, throttleMs: 0, userTag: "userD", cTag: "client2"},
	{user: "userE", client: "client1", bound: 3000, value: 2500, throttleMs: 0, userTag: "userE", cTag: "client1"},
	// Remove (default user, default client-id): new tags (userD, ""), fresh sensor.
	{remove: []model.Entity{ent(deflt, deflt)},
		user: "userD", client: "client1", bound: 1000, value: 0, throttleMs: 0, userTag: "userD"},
	{user: "userE", client: "client4", bound: 1000, value: 1500, throttleMs: 6500, userTag: "userE"},
	{user: "userF", client: "client4", bound: 1000, value: 800, throttleMs: 0, userTag: "userF"},
	{user: "userF", client: "client5", bound: 1000, value: 800, throttleMs: 7600, userTag: "userF"},
	// Remove default user.
	{remove: []model.Entity{ent(deflt, none)},
		user: "userF", client: "client4", bound: 2000, value: 0, throttleMs: 0, cTag: "client4"},
	{user: "userF", client: "client5", bound: 2000, value: 0, throttleMs: 0, cTag: "client5"},
	{user: "userF", client: "client5", bound: 2000, value: 2500, throttleMs: 3750, cTag: "client5"},
	{user: "userG", client: "client5", bound: 2000, value: 0, throttleMs: 3750, cTag: "client5"},
	// Value changes only: history kept.
	{set: []entry{{ent(ex("userA"), none), 8000}, {ent(ex("userA"), ex("client1")), 10000}},
		user: "userA", client: "client2", bound: 8000, value: 0, throttleMs: 0, userTag: "userA"},
	{user: "userA", client: "client2", bound: 8000, value: 4500, throttleMs: 2375, userTag: "userA"},
	{user: "userA", client: "client1", bound: 10000, value: 0, throttleMs: 0, userTag: "userA", cTag: "client1"},
	{user: "userA", client: "client1", bound: 10000, value: 6000, throttleMs: 1550, userTag: "userA", cTag: "client1"},
	{remove: []model.Entity{ent(ex("userA"), ex("client1"))},
		user: "userA", client: "client6", bound: 8000, value: 0, throttleMs: 2375, userTag: "userA"},
	{set: []entry{{ent(ex("userA"), ex("client6")), 11000}},
		user: "userA", client: "client6", bound: 11000, value: 8500, throttleMs: 0, userTag: "userA", cTag: "client6"},
	{set: []entry{{ent(ex("userA"), deflt), 12000}}, remove: []model.Entity{ent(ex("userA"), ex("client6"))},
		user: "userA", client: "client6", bound: 12000, value: 4000, throttleMs: 1458, userTag: "userA", cTag: "client6"},
}

func applyStep(t *testing.T, q *model.Quotas, s tv9Step) {
	t.Helper()
	for _, en := range s.set {
		if err := q.Set(en.e, model.ProducerByteRate, en.v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range s.remove {
		if !q.Remove(e, model.ProducerByteRate) {
			t.Fatalf("remove %v: not set", e)
		}
	}
}

// TV9 resolution only: bounds and tags, all 25 steps.
func TestQuotasTV9Resolution(t *testing.T) {
	q := quotasOf(t, model.ProducerByteRate, tv9Initial...)
	for i, s := range tv9Steps {
		applyStep(t, &q, s)
		r := q.Resolve(model.ProducerByteRate, s.user, s.client)
		if r.Quota != s.bound || r.UserTag != s.userTag || r.ClientTag != s.cTag {
			t.Errorf("step %d %s/%s: bound %v tags (%q, %q), want %v (%q, %q)",
				i+1, s.user, s.client, r.Quota, r.UserTag, r.ClientTag, s.bound, s.userTag, s.cTag)
		}
		if got, _ := q.Get(r.Entity, model.ProducerByteRate); got != r.Quota {
			t.Errorf("step %d: entity %v does not carry %v", i+1, r.Entity, r.Quota)
		}
	}
}

// Each of the 8 levels of §3.2 alone: who shares a bucket. Probes with the
// same group share; "-" means no quota applies.
func TestQuotasSharingRules(t *testing.T) {
	type probe struct{ user, client, group string }
	cases := []struct {
		entity model.Entity
		probes []probe
	}{
		{ent(ex("alice"), ex("app")), []probe{{"alice", "app", "A"}, {"alice", "other", "-"}, {"bob", "app", "-"}}},
		{ent(ex("alice"), deflt), []probe{{"alice", "app1", "A"}, {"alice", "app2", "B"}, {"bob", "app1", "-"}}},
		{ent(ex("alice"), none), []probe{{"alice", "app1", "A"}, {"alice", "app2", "A"}, {"bob", "app1", "-"}}},
		{ent(deflt, ex("app")), []probe{{"alice", "app", "A"}, {"bob", "app", "B"}, {"alice", "other", "-"}}},
		{ent(deflt, deflt), []probe{{"alice", "app1", "A"}, {"alice", "app2", "B"}, {"bob", "app1", "C"}}},
		{ent(deflt, none), []probe{{"alice", "app1", "A"}, {"alice", "app2", "A"}, {"bob", "app1", "B"}}},
		{ent(none, ex("app")), []probe{{"alice", "app", "A"}, {"bob", "app", "A"}, {"alice", "other", "-"}}},
		{ent(none, deflt), []probe{{"alice", "app1", "A"}, {"bob", "app1", "A"}, {"alice", "app2", "B"}}},
	}
	for _, c := range cases {
		name := c.entity.Level().String()
		q := quotasOf(t, model.ProducerByteRate, entry{c.entity, 1000})
		tags := map[string][2]string{}
		for _, p := range c.probes {
			r := q.Resolve(model.ProducerByteRate, p.user, p.client)
			if (p.group == "-") != !r.Limited() {
				t.Errorf("%s: %s/%s limited=%v, group %q", name, p.user, p.client, r.Limited(), p.group)
			}
			if p.group == "-" {
				continue
			}
			if r.Entity != c.entity || r.Level != c.entity.Level() {
				t.Errorf("%s: %s/%s resolved to %v", name, p.user, p.client, r.Entity)
			}
			tg := [2]string{r.UserTag, r.ClientTag}
			for g, other := range tags {
				if (g == p.group) != (other == tg) {
					t.Errorf("%s: %s/%s tags %q vs group %s tags %q", name, p.user, p.client, tg, g, other)
				}
			}
			tags[p.group] = tg
		}

		// Behaviour: a throttling burst from the first probe throttles
		// exactly the probes of its group.
		e := newTestEngine(t, EngineConfig{})
		e.SetQuotas(q)
		first := c.probes[0]
		if d := e.Client(first.user, first.client).RecordProduce(20000, at(0)); d == 0 {
			t.Fatalf("%s: burst not throttled", name)
		}
		for _, p := range c.probes[1:] {
			d := e.Client(p.user, p.client).RecordProduce(0, at(0))
			if (d > 0) != (p.group == first.group) {
				t.Errorf("%s: %s/%s throttle %v, shares with %s/%s: %v", name, p.user, p.client, d, first.user, first.client, p.group == first.group)
			}
		}
	}
}

// Empty client-id (null is ""): the client tag is empty, so only a user-level
// quota (3 or 6) can apply.
func TestQuotasEmptyClientID(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		user    string
		want    float64
		level   model.Level
	}{
		{"default client-id does not apply", []entry{{ent(none, deflt), 2000}}, "alice", model.Unlimited, model.LevelNone},
		{"(default, default) does not apply", []entry{{ent(deflt, deflt), 3000}}, "alice", model.Unlimited, model.LevelNone},
		{"(user, default) does not apply", []entry{{ent(ex("alice"), deflt), 5000}}, "alice", model.Unlimited, model.LevelNone},
		{"(user, default) picks the user shape, default user applies",
			[]entry{{ent(ex("alice"), deflt), 5000}, {ent(deflt, none), 1000}}, "alice", 1000, model.LevelDefaultUser},
		{"user applies", []entry{{ent(ex("alice"), none), 4000}, {ent(none, deflt), 2000}}, "alice", 4000, model.LevelUser},
		{"default user applies", []entry{{ent(deflt, none), 1000}}, "bob", 1000, model.LevelDefaultUser},
	}
	for _, c := range cases {
		q := quotasOf(t, model.ProducerByteRate, c.entries...)
		r := q.Resolve(model.ProducerByteRate, c.user, "")
		if r.Quota != c.want || r.Level != c.level || r.ClientTag != "" {
			t.Errorf("%s: quota %v level %v tags (%q, %q), want %v %v", c.name, r.Quota, r.Level, r.UserTag, r.ClientTag, c.want, c.level)
		}
	}
	// Behaviour: an unlimited empty client-id is never throttled.
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(none, deflt), 2000}))
	if d := e.Client("alice", "").RecordProduce(1<<30, at(0)); d != 0 {
		t.Errorf("empty client-id throttled %v", d)
	}
	if d := e.Client("alice", "app").RecordProduce(1<<30, at(0)); d == 0 {
		t.Error("named client-id not throttled")
	}
}

// Resolution is per key: a user entity with only producer_byte_rate does not
// shadow a client-id entity's consumer_byte_rate.
func TestQuotasPerKey(t *testing.T) {
	var q model.Quotas
	_ = q.Set(ent(ex("U"), none), model.ProducerByteRate, 100)
	_ = q.Set(ent(none, ex("C")), model.ConsumerByteRate, 200)
	p := q.Resolve(model.ProducerByteRate, "U", "C")
	f := q.Resolve(model.ConsumerByteRate, "U", "C")
	if p.Level != model.LevelUser || p.Quota != 100 || f.Level != model.LevelClient || f.Quota != 200 {
		t.Errorf("produce %v %v, fetch %v %v", p.Level, p.Quota, f.Level, f.Quota)
	}
	if r := q.Resolve(model.RequestPercentage, "U", "C"); r.Enabled || r.Limited() {
		t.Errorf("request_percentage enabled without entities: %+v", r)
	}
}

// KAFKA-19282: removing the last entity of a level clears its enabled bit,
// which changes the tag shape; removing the last entity disables the key.
func TestQuotasEnabledBitClearing(t *testing.T) {
	q := quotasOf(t, model.ProducerByteRate,
		entry{ent(ex("userA"), none), 4000},
		entry{ent(none, ex("C1")), 9000},
	)
	// Both bits: mixed mode, nothing of levels 1–6 for userB, so ("", C1).
	r := q.Resolve(model.ProducerByteRate, "userB", "C1")
	if r.UserTag != "" || r.ClientTag != "C1" || r.Quota != 9000 {
		t.Fatalf("before: %+v", r)
	}
	q.Remove(ent(none, ex("C1")), model.ProducerByteRate)
	// Only the user bit is left: tags (userB, ""). Before KAFKA-19282 the
	// client bit stayed set and the tags stayed ("", C1).
	r = q.Resolve(model.ProducerByteRate, "userB", "C1")
	if r.UserTag != "userB" || r.ClientTag != "" || r.Limited() || !r.Enabled {
		t.Errorf("after removing the client level: %+v", r)
	}
	q.Remove(ent(ex("userA"), none), model.ProducerByteRate)
	if q.Enabled(model.ProducerByteRate) {
		t.Error("still enabled with no entity")
	}
	// Re-adding then removing keeps the count right.
	_ = q.Set(ent(deflt, deflt), model.ProducerByteRate, 1)
	_ = q.Set(ent(deflt, deflt), model.ProducerByteRate, 2)
	q.Remove(ent(deflt, deflt), model.ProducerByteRate)
	if q.Enabled(model.ProducerByteRate) || q.Remove(ent(deflt, deflt), model.ProducerByteRate) {
		t.Error("level count off after set, set, remove")
	}

	// In the engine, a disabled key records nothing.
	e := newTestEngine(t, EngineConfig{})
	e.SetQuotas(quotasOf(t, model.ProducerByteRate, entry{ent(ex("userA"), none), 4000}))
	e.Client("userB", "C1").RecordProduce(1000, at(0))
	if u := e.Usage(at(0)); len(u) != 1 || u[0].User != "userB" || u[0].ClientID != "" {
		t.Fatalf("usage with the user bit: %+v", u)
	}
	e.SetQuotas(model.Quotas{})
	e.Client("userC", "C1").RecordProduce(1000, at(0))
	if u := e.Usage(at(0)); len(u) != 1 {
		t.Errorf("disabled key created buckets: %+v", u)
	}
	if r := e.Resolve(model.ProducerByteRate, "userC", "C1", at(0)); r.Enabled {
		t.Errorf("Resolve says enabled: %+v", r)
	}
}

// Names are arbitrary strings and round-trip exactly; a name spelled
// "<default>" is not the default.
func TestQuotasOddNames(t *testing.T) {
	names := []string{"<default>", "a/b", "x=y", "with space", "ünï©ødé 名前", "%3Cdefault%3E", "a:b", "*+", "\x00nul", "null"}
	var q model.Quotas
	for i, n := range names {
		_ = q.Set(ent(ex(n), none), model.ProducerByteRate, float64(1000+i))
		_ = q.Set(ent(none, ex(n)), model.ConsumerByteRate, float64(2000+i))
		_ = q.Set(ent(ex(n), ex(n)), model.RequestPercentage, float64(i+1))
	}
	for i, n := range names {
		r := q.Resolve(model.ProducerByteRate, n, "x")
		if r.Quota != float64(1000+i) || r.Entity.User.Value() != n || !r.Entity.User.IsExact() || r.UserTag != n {
			t.Errorf("user %q: %+v", n, r)
		}
		r = q.Resolve(model.ConsumerByteRate, "x", n)
		if r.Quota != float64(2000+i) || r.Entity.Client.Value() != n || r.ClientTag != n {
			t.Errorf("client %q: %+v", n, r)
		}
		r = q.Resolve(model.RequestPercentage, n, n)
		if r.Quota != float64(i+1) || r.Level != model.LevelUserClient {
			t.Errorf("pair %q: %+v", n, r)
		}
	}
	// No default configured: another user gets nothing, including one named
	// like the sanitized literal.
	if r := q.Resolve(model.ProducerByteRate, "someone", "x"); r.Limited() {
		t.Errorf("default leaked: %+v", r)
	}
	var got []string
	for _, e := range q.Entities() {
		if e.Level() == model.LevelUser {
			got = append(got, e.User.Value())
		}
	}
	want := slices.Clone(names)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Entities users = %q, want %q", got, want)
	}
	// A literal "<default>" and the default are different entities.
	_ = q.Set(ent(deflt, none), model.ProducerByteRate, 7)
	if v, _ := q.Get(ent(ex("<default>"), none), model.ProducerByteRate); v != 1000 {
		t.Errorf("literal <default> = %v", v)
	}
	if r := q.Resolve(model.ProducerByteRate, "someone", "x"); r.Quota != 7 || !r.Entity.User.IsDefault() {
		t.Errorf("default user: %+v", r)
	}
	if s := ent(ex("<default>"), deflt).String(); s != `user="<default>",client-id=<default>` {
		t.Errorf("String = %s", s)
	}
}

func TestQuotasCloneIsIndependent(t *testing.T) {
	q := quotasOf(t, model.ProducerByteRate, entry{ent(ex("a"), none), 1})
	c := q.Clone()
	_ = q.Set(ent(ex("b"), none), model.ProducerByteRate, 2)
	q.Remove(ent(ex("a"), none), model.ProducerByteRate)
	if c.Len() != 1 || !c.Enabled(model.ProducerByteRate) {
		t.Errorf("clone changed: len %d", c.Len())
	}
	if v := c.Values(ent(ex("a"), none)); v[model.ProducerByteRate] != 1 {
		t.Errorf("Values = %v", v)
	}
}
