package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The quota API Tollgate answers itself over the Kafka protocol: the
// round trip, who may use it, its errors, and the audit of its changes
// (the audit file, and the audit topic).

// AlterClientQuotas and DescribeClientQuotas are answered by Tollgate
// itself (the upstream cluster never sees them), through kadm, sarama and
// kafka-go as independent implementations.
//
// On the real cluster too: it never sees them (its own quotas, asked
// directly, name none of the test's entities).
func TestQuotaAPIRoundTrip(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, quotaAPIRoundTrip)
}

func quotaAPIRoundTrip(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	ctx := ctxT(t, 30*time.Second)
	adm := adminAs(t, env, "127.0.0.2")

	// kadm: set, describe, remove.
	user := "team/a b=c"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	desc, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &user, MatchType: 0}})
	if err != nil || len(desc) != 1 || desc[0].Values[0].Value != 1048576 || *desc[0].Entity[0].Name != user {
		t.Fatalf("describe: %v %+v", err, desc)
	}
	// sarama ClusterAdmin.
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.LocalAddr = &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}
	sa, err := sarama.NewClusterAdmin([]string{env.Bootstrap}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	ent := []sarama.QuotaEntityComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Name: "sarama-app"}}
	if err := sa.AlterClientQuotas(ent, sarama.ClientQuotasOp{Key: "consumer_byte_rate", Value: 2048}, false); err != nil {
		t.Fatalf("sarama alter: %v", err)
	}
	got, err := sa.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Match: "sarama-app"}}, true)
	if err != nil || len(got) != 1 || got[0].Values["consumer_byte_rate"] != 2048 {
		t.Fatalf("sarama describe: %v %+v", err, got)
	}
	if err := sa.AlterClientQuotas(ent, sarama.ClientQuotasOp{Key: "consumer_byte_rate", Remove: true}, false); err != nil {
		t.Fatalf("sarama remove: %v", err)
	}
	if got, _ := sa.DescribeClientQuotas([]sarama.QuotaFilterComponent{{EntityType: sarama.QuotaEntityClientID, MatchType: sarama.QuotaMatchExact, Match: "sarama-app"}}, true); len(got) != 0 {
		t.Fatalf("sarama: still described after removal: %+v", got)
	}

	// kafka-go Client.
	kg := &kafka.Client{Addr: kafka.TCP(env.Bootstrap), Transport: &kafka.Transport{Dial: fromIP("127.0.0.2")}}
	ar, err := kg.AlterClientQuotas(ctx, &kafka.AlterClientQuotasRequest{Entries: []kafka.AlterClientQuotaEntry{{
		Entities: []kafka.AlterClientQuotaEntity{{EntityType: "user", EntityName: "kgo-user"}, {EntityType: "client-id", EntityName: "x"}},
		Ops:      []kafka.AlterClientQuotaOps{{Key: "request_percentage", Value: 50}},
	}}})
	if err != nil || ar.Entries[0].Error != nil {
		t.Fatalf("kafka-go alter: %v %+v", err, ar)
	}
	dr, err := kg.DescribeClientQuotas(ctx, &kafka.DescribeClientQuotasRequest{
		Components: []kafka.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: "kgo-user"}},
	})
	if err != nil || dr.Error != nil || len(dr.Entries) != 1 || dr.Entries[0].Values[0].Value != 50 {
		t.Fatalf("kafka-go describe: %v %+v", err, dr)
	}
	tr := kg.Transport.(*kafka.Transport)
	tr.CloseIdleConnections()

	// The upstream cluster was not told: none of the entities set above
	// is among its quotas (a real cluster shared with other tests may have
	// quotas of theirs).
	upQuotas, err := upstreamAdmin(t, env).DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatalf("the upstream's quotas: %v", err)
	}
	for _, q := range upQuotas {
		for _, c := range q.Entity {
			if c.Name != nil && (*c.Name == user || *c.Name == "sarama-app" || *c.Name == "kgo-user") {
				t.Errorf("the upstream cluster has the quota %+v: the request was forwarded", q)
			}
		}
	}

	// Kafka's validation, through kadm: per-entity errors with Kafka's words.
	bad, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &user}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 0}}},
		{Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &user}, {Type: "ip", Name: &user}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
	})
	if err != nil || len(bad) != 2 {
		t.Fatalf("bad alter: %v %+v", err, bad)
	}
	msgs := map[string]bool{}
	for _, b := range bad {
		if b.Err == nil {
			t.Fatalf("invalid entry accepted: %+v", b)
		}
		msgs[b.ErrMessage] = true
	}
	if !msgs["Quota producer_byte_rate must be greater than 0"] {
		t.Errorf("messages %v", msgs)
	}
}

// Authorization: quota admins alter; any authenticated principal
// describes; ANONYMOUS describes only when allowed. Denied describe: 31
// for the whole response; denied alter: 31 on every entry. validate_only
// is an alter.
func TestQuotaAPIAuthorization(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, quotaAPIAuthorization)
}

func quotaAPIAuthorization(t *testing.T, up *testkit.Upstream) {
	for _, allowAnon := range []bool{false, true} {
		env := startControlOn(t, up, func(c *app.Config) { c.Authorization.AllowAnonymousDescribe = allowAnon })
		ctx := ctxT(t, 30*time.Second)
		name := "target"
		entity := []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &name}}
		for _, who := range []struct {
			ip               string
			alter, describe  bool
			anonymousAllowed bool
		}{
			{"127.0.0.2", true, true, false},  // admin
			{"127.0.0.3", false, true, false}, // alice
			{"127.0.0.1", false, allowAnon, true},
		} {
			req := kmsg.NewPtrDescribeClientQuotasRequest()
			cl := newClient(t, env, nil, kgo.Dialer(fromIP(who.ip)))
			dresp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if ok := dresp.ErrorCode == 0; ok != who.describe {
				t.Errorf("%s (anon describe %v): describe error %d, want allowed=%v", who.ip, allowAnon, dresp.ErrorCode, who.describe)
			}
			if !who.describe && (dresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || dresp.Entries != nil) {
				t.Errorf("%s: denied describe got %d with entries %v, want 31 and null", who.ip, dresp.ErrorCode, dresp.Entries)
			}
			for _, validateOnly := range []bool{true, false} {
				adm := kadm.NewClient(cl)
				var res []kadm.AlteredClientQuota
				ops := []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1000}}}}
				if validateOnly {
					res, err = adm.ValidateAlterClientQuotas(ctx, ops)
				} else {
					res, err = adm.AlterClientQuotas(ctx, ops)
				}
				if err != nil {
					t.Fatal(err)
				}
				allowed := res[0].Err == nil
				if allowed != who.alter {
					t.Errorf("%s validate_only=%v: alter allowed=%v (%v), want %v", who.ip, validateOnly, allowed, res[0].Err, who.alter)
				}
				if !who.alter && !strings.Contains(res[0].Err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
					t.Errorf("%s: denied alter error %v, want CLUSTER_AUTHORIZATION_FAILED", who.ip, res[0].Err)
				}
			}
		}
	}
}

// Every alteration is audited with old and new values; the change reaches
// a running producer's throttle within a second.
func TestQuotaAPIAuditAndLiveEffect(t *testing.T) {
	// Not parallel: expects the throttle within 1 s of wall time.
	testkit.EachUpstream(t, quotaAPIAuditAndLiveEffect)
}

func quotaAPIAuditAndLiveEffect(t *testing.T, up *testkit.Upstream) {
	var dataDir string
	env := startControlOn(t, up, func(c *app.Config) { dataDir = c.DataDir })
	ctx := ctxT(t, 30*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	hook := &throttleSeen{}
	topic := up.Topic(t, "live")
	freshTopics(t, up, topic)
	prod := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.WithHooks(hook),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 256<<10)
	for i := 0; i < 4; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if hook.throttles.Load() != 0 {
		t.Fatal("throttled before any quota")
	}
	anon := "ANONYMOUS"
	set := func(v float64) {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &anon}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: v}},
		}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("alter: %v %+v", err, res)
		}
	}
	// 4 KiB/s. What was produced before the quota existed is not charged
	// (nor is it in Kafka, whose sensors record from the first quota on),
	// so the running producer goes on with 64 KiB records: the first one
	// or two of them overdraw the new quota's bucket (its burst is ten
	// windows of the quota, 40 KiB). A one-byte record per round trip
	// would take the bucket's whole burst in round trips: fast on kfake,
	// seconds on a real cluster's acks=all.
	set(4096)
	start := time.Now()
	chunk := make([]byte, 64<<10)
	for hook.throttles.Load() == 0 {
		if time.Since(start) > time.Second {
			t.Fatal("the quota did not throttle the running producer within 1 s")
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: chunk}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	set(8192)
	// A denied change by alice, audited too.
	alice := kadm.NewClient(newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.3"))))
	alice.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &anon}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}},
	}})

	f, err := os.Open(filepath.Join(dataDir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line is not JSON: %s", sc.Text())
		}
		events = append(events, ev)
	}
	if len(events) != 3 {
		t.Fatalf("%d audit events, want 3:\n%v", len(events), events)
	}
	second := events[1]
	ch := second["changes"].([]any)[0].(map[string]any)
	if second["outcome"] != "applied" || ch["key"] != "producer_byte_rate" || ch["old"] != 4096.0 || ch["new"] != 8192.0 {
		t.Errorf("second event: %v", second)
	}
	init := second["initiator"].(map[string]any)
	if !strings.Contains(init["principal"].(string), "admin") || !strings.HasPrefix(init["source"].(string), "127.0.0.2:") {
		t.Errorf("initiator %v", init)
	}
	if events[2]["outcome"] != "denied" || !strings.Contains(events[2]["initiator"].(map[string]any)["principal"].(string), "alice") {
		t.Errorf("denied event: %v", events[2])
	}
}

// Kafka's AlterClientQuotas and DescribeClientQuotas errors (spec §4.4,
// §4.5), codes and messages word for word, over the Kafka protocol through
// the gateway. (internal/control has the full table at the handler.)
// Answered by Tollgate alike whichever cluster it fronts.
func TestQuotaAPIErrorsThroughGateway(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, quotaAPIErrorsThroughGateway)
}

func quotaAPIErrorsThroughGateway(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.2")))
	s := kmsg.StringPtr
	type comp struct {
		typ  string
		name *string
	}
	alter := func(comps []comp, key string, v float64) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		for _, c := range comps {
			ec := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ec.Type, ec.Name = c.typ, c.name
			e.Entity = append(e.Entity, ec)
		}
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = key, v
		e.Ops = append(e.Ops, op)
		req.Entries = append(req.Entries, e)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Entries) != 1 {
			t.Fatalf("alter: %v %+v", err, resp)
		}
		m := ""
		if resp.Entries[0].ErrorMessage != nil {
			m = *resp.Entries[0].ErrorMessage
		}
		return resp.Entries[0].ErrorCode, m
	}
	for _, tc := range []struct {
		comps []comp
		key   string
		v     float64
		code  int16
		msg   string
	}{
		{nil, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Invalid empty client quota entity"},
		{[]comp{{"group", s("g")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Unhandled client quota entity type: group"},
		{[]comp{{"user", s("")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Empty user not supported"},
		{[]comp{{"client-id", s("")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Empty client-id not supported"},
		{[]comp{{"ip", s("1.2.3.4")}, {"user", s("u")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code,
			"Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{[]comp{{"ip", s("example.invalid")}}, "connection_creation_rate", 1, kerr.InvalidRequest.Code, "example.invalid is not a valid IP or resolvable host."},
		{[]comp{{"user", s("alice")}}, "foobar", 1, kerr.InvalidRequest.Code, "Invalid configuration key foobar"},
		{[]comp{{"user", s("alice")}}, "connection_creation_rate", 1, kerr.InvalidRequest.Code, "Invalid configuration key connection_creation_rate"},
		{[]comp{{"ip", s("1.2.3.4")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Invalid configuration key producer_byte_rate"},
		{[]comp{{"user", s("alice")}}, "producer_byte_rate", 0, kerr.InvalidRequest.Code, "Quota producer_byte_rate must be greater than 0"},
		{[]comp{{"user", s("alice")}}, "consumer_byte_rate", 2.245, kerr.InvalidRequest.Code, "consumer_byte_rate cannot be a fractional value."},
		{[]comp{{"user", s("alice")}}, "consumer_byte_rate", 36893488147419103232.4, kerr.InvalidRequest.Code, "Proposed value for consumer_byte_rate is too large for a LONG."},
		{[]comp{{"ip", s("1.2.3.4")}}, "connection_creation_rate", 2147483648, kerr.InvalidRequest.Code, "Proposed value for connection_creation_rate is too large for an INT."},
		{[]comp{{"user", s("alice")}}, "producer_byte_rate", 1048576, 0, ""},
		{[]comp{{"ip", nil}}, "connection_creation_rate", 10, 0, ""},
	} {
		if code, msg := alter(tc.comps, tc.key, tc.v); code != tc.code || msg != tc.msg {
			t.Errorf("alter %+v %s=%v: got %d %q, want %d %q", tc.comps, tc.key, tc.v, code, msg, tc.code, tc.msg)
		}
	}

	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Strict, req.Components = strict, comps
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	c := func(typ string, mt int8, m *string) kmsg.DescribeClientQuotasRequestComponent {
		x := kmsg.NewDescribeClientQuotasRequestComponent()
		x.EntityType, x.MatchType, x.Match = typ, kmsg.QuotasMatchType(mt), m
		return x
	}
	for _, tc := range []struct {
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
		msg   string
	}{
		{[]kmsg.DescribeClientQuotasRequestComponent{c("", 0, s("x"))}, kerr.InvalidRequest.Code, "Invalid empty entity type."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("user", 0, s("a")), c("user", 1, nil)}, kerr.InvalidRequest.Code, "Entity type user cannot appear more than once in the filter."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("group", 0, s("g"))}, kerr.UnsupportedVersion.Code, "Unsupported entity type group"},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("user", 0, nil)}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("client-id", 1, s("c"))}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("user", 3, nil)}, kerr.InvalidRequest.Code, "Unknown match type 3"},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("ip", 2, nil), c("user", 0, s("u"))}, kerr.InvalidRequest.Code,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
	} {
		for _, strict := range []bool{false, true} {
			r := describe(strict, tc.comps...)
			m := ""
			if r.ErrorMessage != nil {
				m = *r.ErrorMessage
			}
			if r.ErrorCode != tc.code || m != tc.msg || r.Entries != nil {
				t.Errorf("describe %v strict=%v: got %d %q, want %d %q", tc.comps, strict, r.ErrorCode, m, tc.code, tc.msg)
			}
		}
	}
	// Non-strict empty filter: everything, ip entities included.
	if r := describe(false); r.ErrorCode != 0 || len(r.Entries) != 2 {
		t.Errorf("describe all: %d entries %+v", len(r.Entries), r.Entries)
	}
	// Strict user filter: the user entity only.
	if r := describe(true, c("user", 2, nil)); len(r.Entries) != 1 {
		t.Errorf("strict SPECIFIED user: %d entries", len(r.Entries))
	}
}

// audit.topic: every event is also produced to a topic on the upstream
// cluster, before the alteration's response.
func TestAuditTopicSink(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, auditTopicSink)
}

func auditTopicSink(t *testing.T, up *testkit.Upstream) {
	topic := up.Topic(t, "tollgate-audit")
	freshTopics(t, up, topic)
	env := startControlOn(t, up, func(c *app.Config) {
		c.Audit.Topic = topic
		c.Audit.Required = true
	})
	ctx := ctxT(t, 30*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	name := "audited"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	// Read the topic straight from the upstream cluster.
	rec, ev := oneAuditEvent(t, ctx, topic, kgo.SeedBrokers(env.UpstreamAddrs()...))
	ch := ev["changes"].([]any)[0].(map[string]any)
	if ev["action"] != "alter_client_quotas" || ev["outcome"] != "applied" || ch["new"] != 4096.0 || string(rec.Key) != ev["id"] {
		t.Fatalf("event %v", ev)
	}
}

// oneAuditEvent reads the audit topic from its start with a client of
// opts (the upstream's brokers, and how to log in there): it must hold one
// record, returned with its event.
func oneAuditEvent(t *testing.T, ctx context.Context, topic string, opts ...kgo.Opt) (*kgo.Record, map[string]any) {
	t.Helper()
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fs := cons.PollFetches(ctx)
	if fs.Err() != nil || fs.NumRecords() != 1 {
		t.Fatalf("audit topic: %d records, %v", fs.NumRecords(), fs.Err())
	}
	var ev map[string]any
	if err := json.Unmarshal(fs.Records()[0].Value, &ev); err != nil {
		t.Fatalf("event %s: %v", fs.Records()[0].Value, err)
	}
	return fs.Records()[0], ev
}
