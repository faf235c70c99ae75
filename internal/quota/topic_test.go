package quota

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func onTopic(p model.Entity, t string) model.Entity                   { return model.TopicEntity(p, model.Exact(t)) }
func onPrefix(p model.Entity, t string) model.Entity                  { return model.TopicEntity(p, model.Prefix(t)) }
func userE(u string) model.Entity                                     { return model.UserEntity(model.Exact(u)) }
func topicQuotas(t *testing.T, k model.Key, es ...entry) model.Quotas { return quotasOf(t, k, es...) }

// The precedence of per-topic quotas, as docs/quotas.md states it: for
// one client (user, client-id) and one topic, one per-topic entity applies,
// principal first (user, default user, client-id prefix, every client),
// then the exact topic before the longest topic prefix. Each row is the
// entities configured (producer_byte_rate), the client and topic, and the
// entity and bucket that apply.
func TestTopicPrecedenceTable(t *testing.T) {
	every := model.Entity{}
	cases := []struct {
		rule                string
		entries             []entry
		user, client, topic string
		want                model.Entity // zero: no per-topic quota applies
		userTag, clientTag  string
		clientPrefix        bool
		topicTag            string
		topicPrefix         bool
	}{
		{"a topic quota alone holds every client on the topic",
			[]entry{{onTopic(every, "orders"), 100}}, "alice", "app", "orders", onTopic(every, "orders"), "", "", false, "orders", false},
		{"whoever the client is (one bucket for all)",
			[]entry{{onTopic(every, "orders"), 100}}, "bob", "", "orders", onTopic(every, "orders"), "", "", false, "orders", false},
		{"other topics have none",
			[]entry{{onTopic(every, "orders"), 100}}, "alice", "app", "payments", model.Entity{}, "", "", false, "", false},
		{"topic names match byte for byte",
			[]entry{{onTopic(every, "orders"), 100}}, "alice", "app", "Orders", model.Entity{}, "", "", false, "", false},
		{"a topic prefix holds every topic that starts with it, in one bucket",
			[]entry{{onPrefix(every, "logs-"), 100}}, "alice", "app", "logs-web", onPrefix(every, "logs-"), "", "", false, "logs-", true},
		{"a topic equal to the prefix is in it",
			[]entry{{onPrefix(every, "logs-"), 100}}, "alice", "app", "logs-", onPrefix(every, "logs-"), "", "", false, "logs-", true},
		{"the exact topic beats a prefix",
			[]entry{{onPrefix(every, "logs-"), 100}, {onTopic(every, "logs-audit"), 200}}, "alice", "app", "logs-audit", onTopic(every, "logs-audit"), "", "", false, "logs-audit", false},
		{"the longest topic prefix wins",
			[]entry{{onPrefix(every, "logs-"), 100}, {onPrefix(every, "logs-web-"), 300}}, "alice", "app", "logs-web-1", onPrefix(every, "logs-web-"), "", "", false, "logs-web-", true},
		{"a user's quota on the topic is the user's own bucket",
			[]entry{{onTopic(userE("alice"), "orders"), 100}}, "alice", "app", "orders", onTopic(userE("alice"), "orders"), "alice", "", false, "orders", false},
		{"other users are not held by it",
			[]entry{{onTopic(userE("alice"), "orders"), 100}}, "bob", "app", "orders", model.Entity{}, "", "", false, "", false},
		{"a user's quota beats the topic's quota for everyone",
			[]entry{{onTopic(every, "orders"), 100}, {onTopic(userE("alice"), "orders"), 400}}, "alice", "app", "orders", onTopic(userE("alice"), "orders"), "alice", "", false, "orders", false},
		{"the others share the topic's",
			[]entry{{onTopic(every, "orders"), 100}, {onTopic(userE("alice"), "orders"), 400}}, "bob", "app", "orders", onTopic(every, "orders"), "", "", false, "orders", false},
		{"principal first: the user's prefix quota beats everyone's exact topic",
			[]entry{{onTopic(every, "logs-audit"), 100}, {onPrefix(userE("alice"), "logs-"), 500}}, "alice", "app", "logs-audit", onPrefix(userE("alice"), "logs-"), "alice", "", false, "logs-", true},
		{"the default user gives each user a bucket of its own",
			[]entry{{onTopic(model.UserEntity(model.Default()), "orders"), 100}}, "bob", "app", "orders", onTopic(model.UserEntity(model.Default()), "orders"), "bob", "", false, "orders", false},
		{"a named user beats the default user",
			[]entry{{onTopic(model.UserEntity(model.Default()), "orders"), 100}, {onTopic(userE("alice"), "orders"), 600}}, "alice", "app", "orders", onTopic(userE("alice"), "orders"), "alice", "", false, "orders", false},
		{"the default user beats a client-id prefix",
			[]entry{{onTopic(model.UserEntity(model.Default()), "orders"), 100}, {onTopic(pfx("etl-"), "orders"), 700}}, "alice", "etl-1", "orders", onTopic(model.UserEntity(model.Default()), "orders"), "alice", "", false, "orders", false},
		{"a client-id prefix's clients share one bucket on the topic",
			[]entry{{onTopic(pfx("etl-"), "orders"), 100}}, "alice", "etl-1", "orders", onTopic(pfx("etl-"), "orders"), "", "etl-", true, "orders", false},
		{"whatever their user",
			[]entry{{onTopic(pfx("etl-"), "orders"), 100}}, "bob", "etl-2", "orders", onTopic(pfx("etl-"), "orders"), "", "etl-", true, "orders", false},
		{"the longest client-id prefix with a quota on the topic wins",
			[]entry{{onTopic(pfx("etl-"), "orders"), 100}, {onPrefix(pfx("etl-nightly-"), "ord"), 800}}, "alice", "etl-nightly-3", "orders", onPrefix(pfx("etl-nightly-"), "ord"), "", "etl-nightly-", true, "ord", true},
		{"a client-id prefix beats the topic's quota for everyone",
			[]entry{{onTopic(every, "orders"), 100}, {onTopic(pfx("etl-"), "orders"), 900}}, "alice", "etl-1", "orders", onTopic(pfx("etl-"), "orders"), "", "etl-", true, "orders", false},
		{"clients outside the prefix share the topic's",
			[]entry{{onTopic(every, "orders"), 100}, {onTopic(pfx("etl-"), "orders"), 900}}, "alice", "web", "orders", onTopic(every, "orders"), "", "", false, "orders", false},
		{"an empty client-id matches no client-id prefix",
			[]entry{{onTopic(pfx("etl-"), "orders"), 100}}, "alice", "", "orders", model.Entity{}, "", "", false, "", false},
		{"an empty user matches no user component",
			[]entry{{onTopic(model.UserEntity(model.Default()), "orders"), 100}}, "", "app", "orders", model.Entity{}, "", "", false, "", false},
		{"a client quota is not a topic quota",
			[]entry{{userE("alice"), 100}}, "alice", "app", "orders", model.Entity{}, "", "", false, "", false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			q := topicQuotas(t, model.ProducerByteRate, c.entries...)
			r := q.ResolveTopic(model.ProducerByteRate, c.user, c.client, c.topic)
			if r.Entity != c.want {
				t.Fatalf("%s/%s on %q resolved to %v (%v), want %v", c.user, c.client, c.topic, r.Entity, r.Level, c.want)
			}
			if c.want == (model.Entity{}) {
				if r.Limited() {
					t.Errorf("limited by %v, want no per-topic quota", r.Entity)
				}
				return
			}
			if r.Level != c.want.Level() || r.Quota != valueOf(c.entries, c.want) {
				t.Errorf("level %v quota %v, want %v %v", r.Level, r.Quota, c.want.Level(), valueOf(c.entries, c.want))
			}
			if r.UserTag != c.userTag || r.ClientTag != c.clientTag || r.ClientPrefix != c.clientPrefix ||
				r.TopicTag != c.topicTag || r.TopicPrefix != c.topicPrefix {
				t.Errorf("bucket (%q, %q, %v, %q, %v), want (%q, %q, %v, %q, %v)", r.UserTag, r.ClientTag, r.ClientPrefix,
					r.TopicTag, r.TopicPrefix, c.userTag, c.clientTag, c.clientPrefix, c.topicTag, c.topicPrefix)
			}
			// The client quota of the same client is untouched by
			// per-topic entities.
			if cr := q.Resolve(model.ProducerByteRate, c.user, c.client); cr.Entity.IsTopic() {
				t.Errorf("the client quota resolved to a topic entity %v", cr.Entity)
			}
		})
	}
}

func valueOf(es []entry, e model.Entity) float64 {
	for _, x := range es {
		if x.e == e {
			return x.v
		}
	}
	return math.NaN()
}

func TestTopicEntityValidation(t *testing.T) {
	long := strings.Repeat("t", 300)
	ok := []model.Entity{
		onTopic(model.Entity{}, "orders"), onPrefix(model.Entity{}, "logs-"), onTopic(userE("alice"), "orders"),
		onPrefix(model.UserEntity(model.Default()), "logs-"), onTopic(pfx("etl-"), "orders"), onTopic(model.Entity{}, long),
	}
	for _, e := range ok {
		if err := e.Validate(); err != nil {
			t.Errorf("%v: %v", e, err)
		}
	}
	bad := []struct {
		e    model.Entity
		want string
	}{
		{onTopic(model.Entity{}, ""), "Empty topic not supported"},
		{onPrefix(model.Entity{}, ""), "Empty topic-prefix not supported"},
		{model.TopicEntity(model.Entity{}, model.Default()), "topic has no default entity"},
		{onTopic(model.ClientEntity(model.Exact("app")), "orders"), "cannot be combined with client-id or ip"},
		{onTopic(model.ClientEntity(model.Default()), "orders"), "cannot be combined with client-id or ip"},
		{onTopic(model.UserClientEntity(model.Exact("alice"), model.Exact("app")), "orders"), "cannot be combined with client-id or ip"},
		{onTopic(model.Entity{User: model.Exact("alice"), Client: model.Prefix("etl-")}, "orders"), "cannot be combined"},
		{onTopic(pfx(""), "orders"), "Empty client-id-prefix not supported"},
		{onTopic(userE(""), "orders"), "Empty user not supported"},
	}
	for _, b := range bad {
		err := b.e.Validate()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%v: %v, want %q", b.e, err, b.want)
		}
	}
	var q model.Quotas
	for _, k := range []model.Key{model.RequestPercentage, model.ControllerMutationRate} {
		if err := q.Set(onTopic(model.Entity{}, "orders"), k, 1); err == nil || err.Error() != "Invalid configuration key "+k.String() {
			t.Errorf("%v on a topic: %v", k, err)
		}
	}
	if got := onPrefix(userE("alice"), "logs-").String(); got != `user="alice",topic-prefix="logs-"` {
		t.Errorf("String: %s", got)
	}
	if got := onTopic(model.Entity{}, "orders").String(); got != `topic="orders"` {
		t.Errorf("String: %s", got)
	}
}

func TestTopicQuotasSetRemove(t *testing.T) {
	var q model.Quotas
	e := onPrefix(userE("alice"), "logs-")
	must(t, q.Set(e, model.ConsumerByteRate, 500))
	must(t, q.Set(userE("alice"), model.ConsumerByteRate, 900))
	if !q.TopicEnabled(model.ConsumerByteRate) || q.TopicEnabled(model.ProducerByteRate) || q.Len() != 2 {
		t.Fatalf("enabled %v/%v len %d", q.TopicEnabled(model.ConsumerByteRate), q.TopicEnabled(model.ProducerByteRate), q.Len())
	}
	if v, ok := q.Get(e, model.ConsumerByteRate); !ok || v != 500 {
		t.Errorf("get %v %v", v, ok)
	}
	if es := q.Entities(); len(es) != 2 || es[0] != userE("alice") || es[1] != e {
		t.Errorf("entities %v", es)
	}
	c := q.Clone()
	if !q.Remove(e, model.ConsumerByteRate) || q.Remove(e, model.ConsumerByteRate) || q.TopicEnabled(model.ConsumerByteRate) {
		t.Error("remove")
	}
	if r := q.ResolveTopic(model.ConsumerByteRate, "alice", "", "logs-a"); r.Limited() {
		t.Errorf("removed, still %v", r.Entity)
	}
	if r := c.ResolveTopic(model.ConsumerByteRate, "alice", "", "logs-a"); r.Entity != e {
		t.Errorf("the clone lost it: %v", r.Entity)
	}
}

// Per-topic buckets are charged beside the client quota's and throttle by
// the same arithmetic: a topic over its quota is throttled, another topic
// of the same client is not, and the client quota counts everything.
func TestEngineTopicBuckets(t *testing.T) {
	for _, alg := range []ByteRateAlgorithm{ByteRateTokenBucket, ByteRateSampled} {
		e := newTestEngine(t, EngineConfig{ByteRate: alg, SharedDeadline: true})
		var q model.Quotas
		must(t, q.Set(onTopic(userE("alice"), "orders"), model.ProducerByteRate, 1000))
		must(t, q.Set(userE("alice"), model.ProducerByteRate, 1e9))
		e.SetQuotas(q)
		if !e.TopicQuotas(model.ProducerByteRate) || e.TopicQuotas(model.ConsumerByteRate) || e.TopicQuotas(model.RequestPercentage) {
			t.Fatal("TopicQuotas")
		}
		cl := e.Client("alice", "app")
		var throttled time.Duration
		for ms := int64(0); ms < 20_000; ms += 100 {
			throttled = max(throttled, cl.RecordTopic(model.ProducerByteRate, []byte("orders"), 500, at(ms)))
			if d := cl.RecordTopic(model.ProducerByteRate, []byte("payments"), 500, at(ms)); d != 0 {
				t.Fatalf("%v: a topic without a per-topic quota throttled %v", alg, d)
			}
			cl.RecordProduce(1000, at(ms))
		}
		if throttled == 0 {
			t.Errorf("%v: 5 000 B/s on a topic of 1 000 B/s never throttled", alg)
		}
		if h := cl.HoldTopic(model.ProducerByteRate, []byte("orders"), at(20_000)); h <= 0 {
			t.Errorf("%v: no hold on the throttled topic", alg)
		}
		if h := cl.HoldTopic(model.ProducerByteRate, []byte("payments"), at(20_000)); h != 0 {
			t.Errorf("%v: hold %v on a topic without a quota", alg, h)
		}
		us := e.Usage(at(20_000))
		if len(us) != 2 {
			t.Fatalf("%v: %d buckets, want the client's and one per-topic (none for payments): %+v", alg, len(us), us)
		}
		tb := us[1]
		if tb.Topic != "orders" || tb.TopicPrefix || tb.User != "alice" || tb.Level != model.LevelUserTopic || tb.Quota != 1000 {
			t.Errorf("%v: per-topic bucket %+v", alg, tb)
		}
		if us[0].Topic != "" || us[0].Throttles != 0 {
			t.Errorf("%v: client bucket %+v", alg, us[0])
		}
		st := e.Stats()
		if st[model.ProducerByteRate].Buckets != 2 || st[model.ProducerByteRate].Routes != 2 || len(st) != int(model.NumKeys) {
			t.Errorf("%v: stats %+v", alg, st)
		}
		r := e.ResolveTopic(model.ProducerByteRate, "alice", "other", "orders", at(20_000))
		if r.Entity != onTopic(userE("alice"), "orders") || r.Rate <= 0 {
			t.Errorf("%v: resolve %+v", alg, r)
		}
	}
}

// One topic-prefix bucket is shared by every topic of the prefix and every
// connection of the principal.
func TestEngineTopicPrefixShared(t *testing.T) {
	e := topicEngine(t, model.ConsumerByteRate, entry{onPrefix(pfx("etl-"), "logs-"), 1000})
	a, b := e.Client("alice", "etl-1"), e.Client("bob", "etl-2")
	// The burst is 10 s of 1 000 B: 10 000 B in all, whichever topic.
	a.RecordTopic(model.ConsumerByteRate, []byte("logs-a"), 6000, at(0))
	if d := b.RecordTopic(model.ConsumerByteRate, []byte("logs-b"), 6000, at(0)); d != 2*time.Second {
		t.Errorf("the second 6 000 B of the prefix group throttled %v, want 2s", d)
	}
	if h := a.HoldTopic(model.ConsumerByteRate, []byte("logs-c"), at(500)); h != 1500*time.Millisecond {
		t.Errorf("another topic of the prefix, another client: hold %v, want 1.5s", h)
	}
	if h := e.Client("carol", "web").HoldTopic(model.ConsumerByteRate, []byte("logs-a"), at(500)); h != 0 {
		t.Errorf("a client outside the group: hold %v", h)
	}
	if n := e.Stats()[model.ConsumerByteRate].Buckets; n != 1 {
		t.Errorf("%d buckets, want one for the group", n)
	}
}

// The fetch clamp of a topic is what its bucket has room for, split over
// the topic's partitions in the fetch, at most Q × the burst, at least 1.
func TestEngineTopicFetchMax(t *testing.T) {
	e := topicEngine(t, model.ConsumerByteRate, entry{onTopic(model.Entity{}, "orders"), 1000})
	cl := e.Client("alice", "c")
	if got := cl.TopicFetchMax([]byte("orders"), 2, at(0)); got != 5000 {
		t.Errorf("fresh: %d per partition, want the 10 000 B burst over 2", got)
	}
	if got := cl.TopicFetchMax([]byte("other"), 2, at(0)); got != math.MaxInt32 {
		t.Errorf("a topic without a quota: %d", got)
	}
	cl.RecordTopic(model.ConsumerByteRate, []byte("orders"), 12_000, at(0))
	if got := cl.TopicFetchMax([]byte("orders"), 1, at(1000)); got != 1 {
		t.Errorf("in deficit: %d, want 1", got)
	}
	if got := cl.TopicFetchMax([]byte("orders"), 1, at(5000)); got != 3000 {
		t.Errorf("after 5 s: %d, want 3 000", got)
	}
}

// A change of value keeps the per-topic bucket (Kafka's rule); a change of
// which entity applies moves the client to a fresh one; removing the last
// per-topic quota turns the per-topic path off.
func TestEngineTopicQuotaChanges(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true})
	set := func(entries ...entry) { setEntries(t, e, model.ProducerByteRate, entries...) }
	topic := []byte("orders")
	set(entry{onTopic(model.Entity{}, "orders"), 1000})
	cl := e.Client("alice", "app")
	cl.RecordTopic(model.ProducerByteRate, topic, 10_000, at(0)) // the whole burst
	set(entry{onTopic(model.Entity{}, "orders"), 500})
	if d := cl.RecordTopic(model.ProducerByteRate, topic, 500, at(0)); d != time.Second {
		t.Errorf("after a value change: %v, want 1s (the bucket kept its history, now at 500 B/s)", d)
	}
	set(entry{onTopic(model.Entity{}, "orders"), 500}, entry{onTopic(userE("alice"), "orders"), 500})
	if d := cl.RecordTopic(model.ProducerByteRate, topic, 500, at(0)); d != 0 {
		t.Errorf("a new entity applies: %v, want a fresh bucket", d)
	}
	set()
	if e.TopicQuotas(model.ProducerByteRate) {
		t.Error("no per-topic quota left, still enabled")
	}
	if d := cl.RecordTopic(model.ProducerByteRate, topic, 1e6, at(0)); d != 0 {
		t.Errorf("no quota: %v", d)
	}
}

// Steady per-topic charging does not allocate: the topic is looked up in
// the client's own cache with the bytes of the request.
func TestEngineTopicNoAllocs(t *testing.T) {
	e := topicEngine(t, model.ProducerByteRate, entry{onTopic(model.Entity{}, "orders"), 1e12})
	cl := e.Client("alice", "app")
	topic, other := []byte("orders"), []byte("payments")
	now := at(0)
	cl.RecordTopic(model.ProducerByteRate, topic, 100, now)
	cl.RecordTopic(model.ProducerByteRate, other, 100, now)
	if n := testing.AllocsPerRun(100, func() {
		cl.HoldTopic(model.ProducerByteRate, topic, now)
		cl.RecordTopic(model.ProducerByteRate, topic, 100, now)
		cl.RecordTopic(model.ProducerByteRate, other, 100, now)
		cl.TopicFetchMax(other, 1, now)
	}); n != 0 {
		t.Errorf("%v allocs per run", n)
	}
}

// Topic names come from clients: a client naming a new topic per request
// grows nothing without bound (its cache starts over; routes and buckets
// are capped like every other).
func TestEngineTopicBounded(t *testing.T) {
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, MaxBuckets: 50, MaxRoutes: 80})
	var q model.Quotas
	must(t, q.Set(onTopic(model.UserEntity(model.Default()), "x"), model.ProducerByteRate, 1000))
	must(t, q.Set(onPrefix(model.Entity{}, "t"), model.ProducerByteRate, 1000))
	e.SetQuotas(q)
	cl := e.Client("alice", "app")
	for i := range 5000 {
		cl.RecordTopic(model.ProducerByteRate, []byte("t"+strings.Repeat("x", i%300)), 1, at(int64(i)))
		cl.RecordTopic(model.ProducerByteRate, []byte("u"+strings.Repeat("x", i%300)), 1, at(int64(i)))
		e.Client("user"+strings.Repeat("u", i%100), "a").RecordTopic(model.ProducerByteRate, []byte("x"), 1, at(int64(i)))
	}
	if len(cl.tcache[model.ProducerByteRate]) > topicCacheMax {
		t.Errorf("cache %d", len(cl.tcache[model.ProducerByteRate]))
	}
	st := e.Stats()[model.ProducerByteRate]
	if st.Buckets > 50 || st.Routes > 80 {
		t.Errorf("stats %+v", st)
	}
}

// In a Tollgate cluster, per-topic usage travels with its topic: another
// instance records it into its own per-topic bucket of that topic.
func TestEngineTopicClusterExchange(t *testing.T) {
	mk := func() *Engine {
		e := topicEngine(t, model.ProducerByteRate, entry{onPrefix(userE("alice"), "logs-"), 1000}, entry{userE("alice"), 1e9})
		e.JoinCluster(time.Second, at(0))
		e.Tick(ClusterTick{Live: 2, Connected: true, Decided: true}, at(0))
		return e
	}
	a, b := mk(), mk()
	a.Client("alice", "app").RecordTopic(model.ProducerByteRate, []byte("logs-a"), 8000, at(100))
	a.Client("alice", "app").RecordProduce(8100, at(100))
	ds := a.DrainUsage(nil, at(200))
	var topic *Delta
	for i := range ds {
		if ds[i].Topic != "" {
			topic = &ds[i]
		}
	}
	if len(ds) != 2 || topic == nil || topic.Topic != "logs-a" || topic.User != "alice" || topic.Value != 8000 {
		t.Fatalf("deltas %+v", ds)
	}
	b.ApplyRemote(ds, at(300))
	// b's bucket of the prefix now holds 8 000 of its 10 000 B burst.
	if d := b.Client("alice", "other").RecordTopic(model.ProducerByteRate, []byte("logs-b"), 3000, at(300)); d <= 0 {
		t.Errorf("the remote usage did not reach b's per-topic bucket: %v", d)
	}
	// A delta naming a topic b has no per-topic quota for is skipped.
	b.ApplyRemote([]Delta{{Key: model.ProducerByteRate, User: "alice", Client: "app", Topic: "other", Value: 1e9, Total: 1e9}}, at(400))
	for _, u := range b.Usage(at(400)) {
		if u.Topic == "other" {
			t.Errorf("a bucket for a topic without a quota: %+v", u)
		}
	}
}

// topicEngine is a token-bucket engine sharing its deadlines that holds
// the quotas of key entries give.
func topicEngine(t *testing.T, key model.Key, entries ...entry) *Engine {
	t.Helper()
	e := newTestEngine(t, EngineConfig{ByteRate: ByteRateTokenBucket, SharedDeadline: true})
	setEntries(t, e, key, entries...)
	return e
}

// setEntries sets e's quotas to those of key entries give.
func setEntries(t *testing.T, e *Engine, key model.Key, entries ...entry) {
	t.Helper()
	var q model.Quotas
	for _, x := range entries {
		must(t, q.Set(x.e, key, x.v))
	}
	e.SetQuotas(q)
}
