package quota

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func pfx(p string) model.Entity { return model.ClientPrefixEntity(p) }

// The precedence of client-id prefixes among Kafka's eight levels, as
// docs/quotas.md states it: one row per rule, each with the entities
// configured (producer_byte_rate) and the (user, client-id) resolved.
func TestPrefixPrecedenceTable(t *testing.T) {
	cases := []struct {
		rule         string
		entries      []entry
		user, client string
		want         model.Entity // the entity whose value applies; zero: none
		group        bool         // the bucket is the prefix group of want
		userTag      string
		clientTag    string
	}{
		{"a prefix groups every client-id that starts with it",
			[]entry{{pfx("bar-"), 100}}, "alice", "bar-1", pfx("bar-"), true, "", "bar-"},
		{"whatever the user",
			[]entry{{pfx("bar-"), 100}}, "bob", "bar-2", pfx("bar-"), true, "", "bar-"},
		{"a client-id equal to the prefix is in the group",
			[]entry{{pfx("bar-"), 100}}, "alice", "bar-", pfx("bar-"), true, "", "bar-"},
		{"a client-id that does not start with it is not",
			[]entry{{pfx("bar-"), 100}}, "alice", "ba", model.Entity{}, false, "", "ba"},
		{"matching is case-sensitive, byte for byte",
			[]entry{{pfx("bar-"), 100}}, "alice", "BAR-1", model.Entity{}, false, "", "BAR-1"},
		{"the empty client-id matches no prefix",
			[]entry{{pfx("bar-"), 100}}, "alice", "", model.Entity{}, false, "", ""},
		{"an exact client-id (level 7) beats a prefix",
			[]entry{{pfx("bar-"), 100}, {ent(none, ex("bar-1")), 200}}, "alice", "bar-1", ent(none, ex("bar-1")), false, "", "bar-1"},
		{"the other client-ids of the prefix keep the group",
			[]entry{{pfx("bar-"), 100}, {ent(none, ex("bar-1")), 200}}, "alice", "bar-2", pfx("bar-"), true, "", "bar-"},
		{"a prefix beats the default client-id (level 8)",
			[]entry{{pfx("bar-"), 100}, {ent(none, deflt), 300}}, "alice", "bar-1", pfx("bar-"), true, "", "bar-"},
		{"the default client-id takes the rest, one bucket each",
			[]entry{{pfx("bar-"), 100}, {ent(none, deflt), 300}}, "alice", "foo", ent(none, deflt), false, "", "foo"},
		{"the longest matching prefix wins",
			[]entry{{pfx("bar-"), 100}, {pfx("bar-etl-"), 400}, {pfx("b"), 500}}, "alice", "bar-etl-7", pfx("bar-etl-"), true, "", "bar-etl-"},
		{"a shorter prefix takes what the longer one does not match",
			[]entry{{pfx("bar-"), 100}, {pfx("bar-etl-"), 400}, {pfx("b"), 500}}, "alice", "bar-web", pfx("bar-"), true, "", "bar-"},
		{"the shortest prefix takes the rest",
			[]entry{{pfx("bar-"), 100}, {pfx("bar-etl-"), 400}, {pfx("b"), 500}}, "alice", "baz", pfx("b"), true, "", "b"},
		{"(user, client-id) (level 1) beats a prefix",
			[]entry{{pfx("bar-"), 100}, {ent(ex("alice"), ex("bar-1")), 600}}, "alice", "bar-1", ent(ex("alice"), ex("bar-1")), false, "alice", "bar-1"},
		{"another user of the client-id gets the prefix",
			[]entry{{pfx("bar-"), 100}, {ent(ex("alice"), ex("bar-1")), 600}}, "bob", "bar-1", pfx("bar-"), true, "", "bar-"},
		{"(user, default client-id) (level 2) beats a prefix",
			[]entry{{pfx("bar-"), 100}, {ent(ex("alice"), deflt), 700}}, "alice", "bar-1", ent(ex("alice"), deflt), false, "alice", "bar-1"},
		{"a user quota (level 3) beats a prefix",
			[]entry{{pfx("bar-"), 100}, {ent(ex("alice"), none), 800}}, "alice", "bar-1", ent(ex("alice"), none), false, "alice", ""},
		{"users without one keep the prefix",
			[]entry{{pfx("bar-"), 100}, {ent(ex("alice"), none), 800}}, "bob", "bar-1", pfx("bar-"), true, "", "bar-"},
		{"(default user, client-id) (level 4) beats a prefix",
			[]entry{{pfx("bar-"), 100}, {ent(deflt, ex("bar-1")), 900}}, "alice", "bar-1", ent(deflt, ex("bar-1")), false, "alice", "bar-1"},
		{"the prefix's other client-ids stay in the group",
			[]entry{{pfx("bar-"), 100}, {ent(deflt, ex("bar-1")), 900}}, "alice", "bar-2", pfx("bar-"), true, "", "bar-"},
		{"(default user, default client-id) (level 5) hides every prefix",
			[]entry{{pfx("bar-"), 100}, {ent(deflt, deflt), 1000}}, "alice", "bar-1", ent(deflt, deflt), false, "alice", "bar-1"},
		{"the default user (level 6) hides every prefix",
			[]entry{{pfx("bar-"), 100}, {ent(deflt, none), 1100}}, "alice", "bar-1", ent(deflt, none), false, "alice", ""},
		{"a literal client-id \"bar-*\" is only a name",
			[]entry{{ent(none, ex("bar-*")), 100}}, "alice", "bar-1", model.Entity{}, false, "", "bar-1"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			q := quotasOf(t, model.ProducerByteRate, c.entries...)
			r := q.Resolve(model.ProducerByteRate, c.user, c.client)
			if r.Entity != c.want || r.Level != c.want.Level() {
				t.Errorf("%s/%s resolved to %v (%v), want %v", c.user, c.client, r.Entity, r.Level, c.want)
			}
			if r.ClientPrefix != c.group || r.UserTag != c.userTag || r.ClientTag != c.clientTag {
				t.Errorf("%s/%s tags (%q, %q, prefix %v), want (%q, %q, prefix %v)", c.user, c.client,
					r.UserTag, r.ClientTag, r.ClientPrefix, c.userTag, c.clientTag, c.group)
			}
			if isSet(c.want) {
				if v, _ := q.Get(c.want, model.ProducerByteRate); v != r.Quota {
					t.Errorf("quota %v, the entity carries %v", r.Quota, v)
				}
			} else if r.Limited() {
				t.Errorf("limited by %v", r.Entity)
			}
		})
	}
}

func isSet(e model.Entity) bool { return e.User.IsSet() || e.Client.IsSet() }

// Several client-ids of one prefix share one bucket in the engine: a burst
// from one throttles the others; a client-id outside the prefix, or with an
// exact entity, is not touched.
func TestPrefixGroupSharesOneBucket(t *testing.T) {
	var q model.Quotas
	must(t, q.Set(pfx("bar-"), model.ProducerByteRate, 1000))
	must(t, q.Set(ent(none, ex("bar-vip")), model.ProducerByteRate, 1000))
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket})
	e.SetQuotas(q)
	// The burst is Q·(N−1)·W = 10 000 bytes: 3 clients of the group take
	// 4 000 each.
	var last time.Duration
	for i, id := range []string{"bar-1", "bar-2", "bar-3"} {
		last = e.Client("user"+strings.Repeat("x", i), id).RecordProduce(4000, at(0))
	}
	if last != 2*time.Second {
		t.Errorf("third client of the group throttled %v, want 2s (the group's deficit of 2 000 bytes at 1 000/s)", last)
	}
	if d := e.Client("u", "bar-4").RecordProduce(0, at(0)); d == 0 {
		t.Error("a fourth client-id of the group is not throttled")
	}
	if d := e.Client("u", "bar-vip").RecordProduce(4000, at(0)); d != 0 {
		t.Errorf("the exact client-id bar-vip throttled %v: it has a bucket of its own", d)
	}
	if d := e.Client("u", "other").RecordProduce(1<<20, at(0)); d != 0 {
		t.Errorf("a client-id outside the prefix throttled %v", d)
	}
	var groups int
	for _, u := range e.Usage(at(0)) {
		if u.ClientIDPrefix {
			groups++
			if u.ClientID != "bar-" || u.User != "" || u.Level != model.LevelClientPrefix || u.Entity != pfx("bar-") {
				t.Errorf("group bucket %+v", u)
			}
		}
	}
	if groups != 1 {
		t.Errorf("%d prefix group buckets, want 1", groups)
	}
	// A client-id spelled like the prefix, with an exact entity, has a
	// bucket apart from the group's.
	must(t, q.Set(ent(none, ex("bar-")), model.ProducerByteRate, 1000))
	e.SetQuotas(q)
	if d := e.Client("u", "bar-").RecordProduce(4000, at(0)); d != 0 {
		t.Errorf("client-id \"bar-\" shares the group's bucket: throttled %v", d)
	}
	if d := e.Client("u", "bar-5").RecordProduce(0, at(0)); d == 0 {
		t.Error("the group forgot its deficit when an exact client-id spelled like it was added")
	}
}

func TestPrefixEntityValidation(t *testing.T) {
	var q model.Quotas
	for _, e := range []model.Entity{
		{Client: model.Prefix("")},
		{User: model.Exact("u"), Client: model.Prefix("p")},
		{User: model.Default(), Client: model.Prefix("p")},
		{User: model.Prefix("u")},
	} {
		if err := q.Set(e, model.ProducerByteRate, 1); err == nil {
			t.Errorf("Set(%v) accepted", e)
		}
	}
	if s := pfx("a\"b").String(); s != `client-id-prefix="a\"b"` {
		t.Errorf("String = %s", s)
	}
	if l := pfx("x").Level(); l != model.LevelClientPrefix || l.String() != "client-id-prefix" {
		t.Errorf("Level = %v", l)
	}
}

// A client choosing a very long client-id costs one probe per distinct
// prefix length, not one per byte.
func TestPrefixLongClientID(t *testing.T) {
	var q model.Quotas
	must(t, q.Set(pfx("x"), model.ProducerByteRate, 1))
	long := strings.Repeat("x", 32767)
	if r := q.Resolve(model.ProducerByteRate, "u", long); r.Entity != pfx("x") {
		t.Errorf("long client-id: %v", r.Entity)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
