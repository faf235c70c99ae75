package control

import (
	"math"
	"testing"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const typePrefix = "client-id-prefix"

// The client-id-prefix entity through AlterClientQuotas: what is refused,
// with which code and message, and that nothing is stored.
func TestAlterPrefixErrors(t *testing.T) {
	checkRejected(t, []rejectCase{
		{"default prefix", entry(ent(dflt(typePrefix)), set("producer_byte_rate", 1)), msgPrefixDefault},
		{"empty prefix", entry(ent(named(typePrefix, "")), set("producer_byte_rate", 1)), "Empty client-id-prefix not supported"},
		{"with a user", entry(ent(named("user", "u"), named(typePrefix, "p-")), set("producer_byte_rate", 1)), msgPrefixAlone},
		{"with the default user", entry(ent(dflt("user"), named(typePrefix, "p-")), set("producer_byte_rate", 1)), msgPrefixAlone},
		{"with a client-id", entry(ent(named("client-id", "c"), named(typePrefix, "p-")), set("producer_byte_rate", 1)), msgPrefixAlone},
		{"with an ip", entry(ent(named(typePrefix, "p-"), named("ip", "1.2.3.4")), set("connection_creation_rate", 1)), msgPrefixAlone},
		{"ip key", entry(ent(named(typePrefix, "p-")), set("connection_creation_rate", 1)), "Invalid configuration key connection_creation_rate"},
		{"zero", entry(ent(named(typePrefix, "p-")), set("producer_byte_rate", 0)), "Quota producer_byte_rate must be greater than 0"},
		{"fraction", entry(ent(named(typePrefix, "p-")), set("consumer_byte_rate", 1.5)), "consumer_byte_rate cannot be a fractional value."},
		{"unknown key", entry(ent(named(typePrefix, "p-")), set("prefix_rate", 1)), "Invalid configuration key prefix_rate"},
	})
}

// Set, describe with each match type, remove: the prefix entity is an
// entity of its own, never confused with a client-id of the same name.
func TestPrefixAlterDescribe(t *testing.T) {
	f := newFixture(t)
	f.mustAlter(t,
		entry(ent(named(typePrefix, "bar-")), set("producer_byte_rate", 1024), set("consumer_byte_rate", 2048)),
		entry(ent(named(typePrefix, "baz-")), set("request_percentage", 5)),
		entry(ent(named("client-id", "bar-")), set("producer_byte_rate", 512)),
		entry(ent(dflt("client-id")), set("producer_byte_rate", 256)),
	)
	if v := f.stored(t, store.Named(typePrefix, "bar-")); v["producer_byte_rate"] != 1024 || v["consumer_byte_rate"] != 2048 {
		t.Fatalf("stored %v", v)
	}
	f.describeCases(t, []describeCase{
		{"exact prefix", true, []kmsg.DescribeClientQuotasRequestComponent{exact(typePrefix, "bar-")}, []string{"client-id-prefix=bar-;"}},
		{"exact prefix, not strict", false, []kmsg.DescribeClientQuotasRequestComponent{exact(typePrefix, "bar-")}, []string{"client-id-prefix=bar-;"}},
		{"exact prefix is not a prefix match", true, []kmsg.DescribeClientQuotasRequestComponent{exact(typePrefix, "ba")}, nil},
		{"any prefix", false, []kmsg.DescribeClientQuotasRequestComponent{anyOf(typePrefix)}, []string{"client-id-prefix=bar-;", "client-id-prefix=baz-;"}},
		{"exact client-id is not the prefix", true, []kmsg.DescribeClientQuotasRequestComponent{exact("client-id", "bar-")}, []string{"client-id=bar-;"}},
		{"any client-id lists no prefix", false, []kmsg.DescribeClientQuotasRequestComponent{anyOf("client-id")}, []string{"client-id=bar-;", "client-id=<nil>;"}},
	})
	if all := f.describe(t, admin, false); len(all.Entries) != 4 {
		t.Errorf("empty filter: %d entries, want 4", len(all.Entries))
	}

	// The data path gets the prefix as a model.Prefix entity.
	q, _, err := f.cq.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := q.Get(model.ClientPrefixEntity("bar-"), model.ConsumerByteRate); !ok || v != 2048 {
		t.Errorf("engine input: %v %v", v, ok)
	}
	if r := q.Resolve(model.ProducerByteRate, "u", "bar-7"); r.Entity != model.ClientPrefixEntity("bar-") || r.Quota != 1024 {
		t.Errorf("bar-7 resolves to %v %v", r.Entity, r.Quota)
	}

	f.mustAlter(t, entry(ent(named(typePrefix, "bar-")), rm("producer_byte_rate"), rm("consumer_byte_rate")))
	if got := describedEntities(f.describe(t, admin, false, anyOf(typePrefix))); len(got) != 1 || got[0] != "client-id-prefix=baz-;" {
		t.Errorf("after removal: %q", got)
	}
}

func TestDescribePrefixFilterErrors(t *testing.T) {
	cases := []struct {
		name  string
		comps []kmsg.DescribeClientQuotasRequestComponent
		msg   string
	}{
		{"default prefix", []kmsg.DescribeClientQuotasRequestComponent{defaultOf(typePrefix)},
			"Request specified MATCH_TYPE_DEFAULT for client-id-prefix, which has no default entity."},
		{"prefix with user", []kmsg.DescribeClientQuotasRequestComponent{anyOf("user"), exact(typePrefix, "p")},
			"Invalid entity filter component combination. A client-id-prefix filter component should not be used with another one: client-id-prefix entities stand alone."},
		{"prefix with client-id", []kmsg.DescribeClientQuotasRequestComponent{anyOf(typePrefix), defaultOf("client-id")},
			"Invalid entity filter component combination. A client-id-prefix filter component should not be used with another one: client-id-prefix entities stand alone."},
		{"exact prefix without a match", []kmsg.DescribeClientQuotasRequestComponent{matchType(typePrefix, 0, nil)},
			"Request specified MATCH_TYPE_EXACT, but set match string to null."},
	}
	f := newFixture(t)
	for _, tc := range cases {
		resp := roundTripDescribe(t, f.describe(t, admin, false, tc.comps...))
		if resp.ErrorCode != kerr.InvalidRequest.Code || deref(resp.ErrorMessage) != tc.msg || resp.Entries != nil {
			t.Errorf("%s: %d %q", tc.name, resp.ErrorCode, deref(resp.ErrorMessage))
		}
	}
}

// shadow = 1 marks an entity's quotas shadow; any other value is refused;
// removing it is the switch to enforced, one audited entry with the old
// value.
func TestShadowKey(t *testing.T) {
	f := newFixture(t)
	user := ent(named("user", "alice"))
	for _, tc := range []struct {
		e   kmsg.AlterClientQuotasRequestEntry
		msg string
	}{
		{entry(user, set("shadow", 0)), "Quota shadow must be 1 (it marks the entity's quotas shadow: measured, not enforced; remove the key to enforce them)"},
		{entry(user, set("shadow", 2)), "Quota shadow must be 1 (it marks the entity's quotas shadow: measured, not enforced; remove the key to enforce them)"},
		{entry(user, set("shadow", -1)), "Quota shadow must be 1 (it marks the entity's quotas shadow: measured, not enforced; remove the key to enforce them)"},
		{entry(ent(named("ip", "1.2.3.4")), set("shadow", 1)), "Invalid configuration key shadow"},
	} {
		got := f.alter(t, admin, false, tc.e).Entries[0]
		if got.ErrorCode != kerr.InvalidRequest.Code || deref(got.ErrorMessage) != tc.msg {
			t.Errorf("%v: %d %q", tc.e.Ops, got.ErrorCode, deref(got.ErrorMessage))
		}
	}
	f.mustAlter(t,
		entry(user, set("producer_byte_rate", 1024), set("shadow", 1)),
		entry(ent(named(typePrefix, "etl-")), set("consumer_byte_rate", 2048), set("shadow", 1)),
	)
	q, _, err := f.cq.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	if !q.Options(model.UserEntity(model.Exact("alice"))).Shadow || !q.Options(model.ClientPrefixEntity("etl-")).Shadow {
		t.Fatal("shadow not handed to the engine")
	}
	if r := q.Resolve(model.ProducerByteRate, "alice", "x"); !r.Options.Shadow || r.Quota != 1024 {
		t.Errorf("resolve %+v", r)
	}
	n := len(f.events(t))
	f.mustAlter(t, entry(user, rm("shadow")))
	evs := f.events(t)
	if len(evs) != n+1 {
		t.Fatalf("%d events for the switch, want 1", len(evs)-n)
	}
	ev := evs[n]
	changes, _ := ev["changes"].([]any)
	if ev["outcome"] != "applied" || len(changes) != 1 {
		t.Fatalf("switch event %v", ev)
	}
	ch := changes[0].(map[string]any)
	if ch["key"] != "shadow" || ch["old"] != float64(1) || ch["new"] != nil {
		t.Errorf("switch change %v", ch)
	}
	q, _, _ = f.cq.Quotas()
	if q.Options(model.UserEntity(model.Exact("alice"))).Shadow {
		t.Error("still shadow after the switch")
	}
	if v := f.stored(t, store.Named("user", "alice")); v["producer_byte_rate"] != 1024 || len(v) != 1 {
		t.Errorf("stored after the switch: %v", v)
	}
}

// burst_seconds: from 0 (none) to 3600, fractions allowed; the engine gets
// it as the entity's burst.
func TestBurstSecondsKey(t *testing.T) {
	f := newFixture(t)
	user := ent(named("user", "alice"))
	msg := "Quota burst_seconds must be from 0 to 3600 (seconds of quota a fresh client may send at once; 0: none; remove the key for Kafka's, 10)"
	for _, v := range []float64{-1, 3600.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		got := f.alter(t, admin, false, entry(user, set("burst_seconds", v))).Entries[0]
		if got.ErrorCode != kerr.InvalidRequest.Code || deref(got.ErrorMessage) != msg {
			t.Errorf("burst_seconds=%v: %d %q", v, got.ErrorCode, deref(got.ErrorMessage))
		}
	}
	if got := f.alter(t, admin, false, entry(ent(dflt("ip")), set("burst_seconds", 1))).Entries[0]; deref(got.ErrorMessage) != "Invalid configuration key burst_seconds" {
		t.Errorf("ip: %q", deref(got.ErrorMessage))
	}
	for _, v := range []float64{0, 0.5, 2, 3600} {
		f.mustAlter(t, entry(user, set("producer_byte_rate", 1000), set("burst_seconds", v)))
		q, _, err := f.cq.Quotas()
		if err != nil {
			t.Fatal(err)
		}
		if o := q.Options(model.UserEntity(model.Exact("alice"))); !o.HasBurst || o.Burst != v {
			t.Errorf("burst_seconds=%v: options %+v", v, o)
		}
	}
	f.mustAlter(t, entry(user, rm("burst_seconds")))
	q, _, _ := f.cq.Quotas()
	if o := q.Options(model.UserEntity(model.Exact("alice"))); o.HasBurst {
		t.Errorf("after removal: %+v", o)
	}
}

// Per-topic entities (topic, topic-prefix) through AlterClientQuotas: what
// is refused, with which code and message, and that nothing is stored.
func TestAlterTopicErrors(t *testing.T) {
	checkRejected(t, []rejectCase{
		{"default topic", entry(ent(dflt("topic")), set("producer_byte_rate", 1)), "Invalid quota entity, topic has no default entity (a quota is on a named topic or on the topics of a prefix)"},
		{"default topic prefix", entry(ent(named("user", "u"), dflt("topic-prefix")), set("producer_byte_rate", 1)), "Invalid quota entity, topic-prefix has no default entity (a quota is on a named topic or on the topics of a prefix)"},
		{"empty topic", entry(ent(named("topic", "")), set("producer_byte_rate", 1)), "Empty topic not supported"},
		{"empty topic prefix", entry(ent(named("topic-prefix", "")), set("producer_byte_rate", 1)), "Empty topic-prefix not supported"},
		{"both", entry(ent(named("topic", "a"), named("topic-prefix", "b")), set("producer_byte_rate", 1)), msgTopicBoth},
		{"with a client-id", entry(ent(named("client-id", "c"), named("topic", "t")), set("producer_byte_rate", 1)), msgTopicWith},
		{"with the default client-id", entry(ent(dflt("client-id"), named("topic", "t")), set("producer_byte_rate", 1)), msgTopicWith},
		{"with an ip", entry(ent(named("ip", "1.2.3.4"), named("topic-prefix", "t")), set("producer_byte_rate", 1)), msgTopicWith},
		{"with a user and a client-id-prefix", entry(ent(named("user", "u"), named(typePrefix, "p-"), named("topic", "t")), set("producer_byte_rate", 1)), msgTopicPrefix},
		{"with the default client-id-prefix", entry(ent(dflt(typePrefix), named("topic", "t")), set("producer_byte_rate", 1)), msgPrefixDefault},
		{"request_percentage", entry(ent(named("topic", "t")), set("request_percentage", 1)), "Invalid configuration key request_percentage"},
		{"controller_mutation_rate", entry(ent(named("user", "u"), named("topic", "t")), set("controller_mutation_rate", 1)), "Invalid configuration key controller_mutation_rate"},
		{"zero", entry(ent(named("topic", "t")), set("producer_byte_rate", 0)), "Quota producer_byte_rate must be greater than 0"},
		{"fraction", entry(ent(named("topic", "t")), set("consumer_byte_rate", 1.5)), "consumer_byte_rate cannot be a fractional value."},
		{"shadow 2", entry(ent(named("topic", "t")), set("consumer_byte_rate", 1), set("shadow", 2)), "Quota shadow must be 1 (it marks the entity's quotas shadow: measured, not enforced; remove the key to enforce them)"},
	})
}

// Set, describe, build, remove: per-topic entities are entities of their
// own, listed only to filters that name topic or topic-prefix (and to the
// empty filter), and reach the engine as model.Entity.Topic.
func TestTopicAlterDescribe(t *testing.T) {
	f := newFixture(t)
	f.mustAlter(t,
		entry(ent(named("topic", "orders")), set("producer_byte_rate", 1000)),
		entry(ent(named("user", "alice"), named("topic", "orders")), set("producer_byte_rate", 2000), set("shadow", 1)),
		entry(ent(dflt("user"), named("topic-prefix", "logs-")), set("consumer_byte_rate", 3000), set("burst_seconds", 0)),
		entry(ent(named(typePrefix, "etl-"), named("topic-prefix", "logs-")), set("consumer_byte_rate", 4000)),
		entry(ent(named("user", "alice")), set("producer_byte_rate", 5000)),
	)
	f.describeCases(t, []describeCase{
		{"exact topic, strict", true, []kmsg.DescribeClientQuotasRequestComponent{exact("topic", "orders")}, []string{"topic=orders;"}},
		{"exact topic", false, []kmsg.DescribeClientQuotasRequestComponent{exact("topic", "orders")}, []string{"topic=orders;", "topic=orders;user=alice;"}},
		{"a user's topic quota", true, []kmsg.DescribeClientQuotasRequestComponent{exact("user", "alice"), anyOf("topic")}, []string{"topic=orders;user=alice;"}},
		{"any topic prefix", false, []kmsg.DescribeClientQuotasRequestComponent{anyOf("topic-prefix")}, []string{"topic-prefix=logs-;user=<nil>;", "client-id-prefix=etl-;topic-prefix=logs-;"}},
		{"a user filter lists no per-topic entity", false, []kmsg.DescribeClientQuotasRequestComponent{exact("user", "alice")}, []string{"user=alice;"}},
		{"a prefix filter lists no per-topic entity", false, []kmsg.DescribeClientQuotasRequestComponent{anyOf(typePrefix)}, nil},
	})
	if all := f.describe(t, admin, false); len(all.Entries) != 5 {
		t.Errorf("empty filter: %d entries, want 5", len(all.Entries))
	}
	for _, bad := range [][]kmsg.DescribeClientQuotasRequestComponent{
		{defaultOf("topic")}, {anyOf("topic"), anyOf("topic-prefix")}, {anyOf("topic"), anyOf("client-id")}, {exact("topic-prefix", "x"), anyOf("ip")},
	} {
		if resp := f.describe(t, admin, false, bad...); resp.ErrorCode != kerr.InvalidRequest.Code || resp.Entries != nil {
			t.Errorf("%v: %d %q", bad, resp.ErrorCode, deref(resp.ErrorMessage))
		}
	}

	q, _, err := f.cq.Quotas()
	if err != nil {
		t.Fatal(err)
	}
	if r := q.ResolveTopic(model.ProducerByteRate, "alice", "app", "orders"); r.Entity != model.TopicEntity(model.UserEntity(model.Exact("alice")), model.Exact("orders")) || r.Quota != 2000 || !r.Options.Shadow {
		t.Errorf("alice on orders: %+v", r)
	}
	if r := q.ResolveTopic(model.ConsumerByteRate, "bob", "etl-1", "logs-x"); r.Level != model.LevelDefaultUserTopic || r.Quota != 3000 || !r.Options.HasBurst {
		t.Errorf("bob on logs-x: %+v", r)
	}
	if r := q.Resolve(model.ProducerByteRate, "alice", "app"); r.Quota != 5000 {
		t.Errorf("alice's client quota: %+v", r)
	}
	f.mustAlter(t, entry(ent(named("topic", "orders")), rm("producer_byte_rate")))
	if got := describedEntities(f.describe(t, admin, true, exact("topic", "orders"))); len(got) != 0 {
		t.Errorf("after removal: %q", got)
	}
}
