package e2e

import (
	"bufio"
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
