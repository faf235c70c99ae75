package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/cluster"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/tollgate/tollgate/internal/testkit"
)

// A Tollgate cluster trusts only its own instances (issue 23 point 2). A
// tenant who can write to the brokers straight — pass-through deployments
// hand out real broker credentials, and the Tollgate cluster's ACLs are
// broad — writes the topics of a signed Tollgate cluster: an API key for
// the quota admin (unsigned, and under a genuine record's signature), an
// old genuine quota record copied back, the current one written again
// later, and the reports of 40 instances that charge a victim a terabyte.
// None of it is applied, each is refused and counted, and the genuine
// cluster goes on. Without cluster.secret_file the forged API key logs in
// as the quota admin.
func attackForgedClusterRecords(t *testing.T, up *testkit.Upstream) {
	secret := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(secret, []byte("c2VjcmV0LWZvci10aGUtZTJlLXRvbGxnYXRlLWNsdXN0ZXI=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const skew = 2 * time.Second
	envs, upstream, _ := startTollgateClusterOn(t, up, 2, nil, func(_ int, c *app.Config) {
		c.Cluster.SecretFile = secret
		c.Cluster.MaxClockSkew = skew
	})
	a, b := envs[0], envs[1]
	ctx := ctxT(t, 90*time.Second)
	st, _ := a.App.Cluster()
	cfgTopic := st.ConfigLog.Topic
	xTopic := strings.TrimSuffix(cfgTopic, "-config") + "-exchange"
	admA, admB := adminAs(t, a, "127.0.0.2"), adminAs(t, b, "127.0.0.2")
	alter := func(adm *kadm.Client, v float64) { t.Helper(); setAliceRate(t, ctx, adm, v) }
	alter(admA, 1000)
	alter(admA, 2000)
	// A SCRAM credential, which must not be in the topic in the clear.
	if res, err := admA.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-pw"}}); err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}

	var quotaRecs []*kgo.Record
	for _, r := range rawRecords(t, ctx, upstream, cfgTopic) {
		if !hasHeader(r, cluster.SigHeader) {
			t.Errorf("record at offset %d is not signed", r.Offset)
		}
		if up.Real() && r.Attrs.TimestampType() != 1 {
			t.Errorf("record at offset %d carries its producer's timestamp, not the broker's", r.Offset)
		}
		if strings.Contains(string(r.Key), "alice") {
			quotaRecs = append(quotaRecs, r)
		}
		if strings.Contains(string(r.Key), "carol") && (strings.Contains(string(r.Value), "iterations") || strings.Contains(string(r.Value), "salt")) {
			t.Errorf("carol's SCRAM credential is in the topic in the clear: %q", r.Value)
		}
	}
	if len(quotaRecs) != 2 {
		t.Fatalf("%d records of alice's quota in the topic, want 2", len(quotaRecs))
	}
	old, current := quotaRecs[0], quotaRecs[1]

	// The attacker's own API key, for the quota admin, as the store writes
	// API keys.
	plaintext, key, err := auth.NewAPIKey("admin")
	if err != nil {
		t.Fatal(err)
	}
	forgedValue, _ := json.Marshal(store.APIKey{ID: key.ID, Identity: "admin", Hash: key.Hash, Created: time.Now()})
	forgedKey := []byte("\x01\x08api_keys\x00" + key.ID)
	raw := franzClient(t, kgo.SeedBrokers(upstream...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(rs ...*kgo.Record) {
		t.Helper()
		for _, r := range rs {
			r.Partition = 0
			if err := raw.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("the attacker's produce to %s: %v", r.Topic, err)
			}
		}
	}
	produce(
		&kgo.Record{Topic: cfgTopic, Key: forgedKey, Value: forgedValue},
		&kgo.Record{Topic: cfgTopic, Key: forgedKey, Value: forgedValue, Headers: current.Headers},
		&kgo.Record{Topic: cfgTopic, Key: old.Key, Value: old.Value, Headers: old.Headers},
	)
	now := time.Now()
	for i := range 40 {
		r := cluster.Report{Instance: "fake-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Incarnation: now.UnixMilli(), Seq: 1, SentMs: now.UnixMilli(),
			Usage: []quota.Delta{{Key: model.ProducerByteRate, User: "victim", Value: 1e12, Total: 1e12}}}
		for _, p := range r.Encode() {
			produce(&kgo.Record{Topic: xTopic, Value: p})
		}
	}
	// The current record again, once it is older than max_clock_skew: the
	// real broker stamps it with its append time, a copy. kfake keeps the
	// producer's timestamp (Kafka does not, on a LogAppendTime topic), so
	// there the copy passes — the same key and value, changing nothing.
	time.Sleep(skew + 500*time.Millisecond)
	produce(&kgo.Record{Topic: cfgTopic, Key: current.Key, Value: current.Value, Headers: current.Headers, Timestamp: current.Timestamp})

	want := map[string]uint64{cluster.RefusedUnsigned: 1, cluster.RefusedBadSignature: 1, cluster.RefusedStale: 1}
	if up.Real() {
		want[cluster.RefusedStale] = 2
	}
	for _, env := range envs {
		waitUntil(t, "every forgery refused", 20*time.Millisecond, 20*time.Second, func() bool {
			st, _ := env.App.Cluster()
			return st.Exchange.Refused[cluster.RefusedUnsigned] >= 40 && countsAtLeast(st.ConfigLog.Refused, want)
		})
	}
	for _, env := range envs {
		st, _ := env.App.Cluster()
		if st.Live != 2 || !countsEqual(st.ConfigLog.Refused, want) {
			t.Errorf("%s: %d live instances, refusals %v (want %v)", st.InstanceID, st.Live, st.ConfigLog.Refused, want)
		}
		if err := loginWithKey(ctx, env, plaintext); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: the forged API key: %v, want %v", st.InstanceID, err, kerr.SaslAuthenticationFailed)
		}
		if r := env.App.Engine().Resolve(model.ProducerByteRate, "alice", "x", time.Now()); r.Quota != 2000 {
			t.Errorf("%s: alice's quota is %v after the copies, want 2000", st.InstanceID, r.Quota)
		}
	}
	if v := scrapeMetric(t, a, `tollgate_cluster_refused_total{reason="unsigned",topic="exchange"}`); v < 40 {
		t.Errorf("tollgate_cluster_refused_total for the exchange's unsigned reports: %v", v)
	}
	// The genuine cluster goes on: a change through B reaches A.
	alter(admB, 3000)
	waitUntil(t, "A applies B's change", 10*time.Millisecond, 10*time.Second, func() bool {
		return a.App.Engine().Resolve(model.ProducerByteRate, "alice", "x", time.Now()).Quota == 3000
	})
}

// rawRecords reads every record of topic straight from the upstream, with
// its headers and timestamp.
func rawRecords(t *testing.T, ctx context.Context, upstream []string, topic string) []*kgo.Record {
	t.Helper()
	ends, err := kadm.NewClient(franzClient(t, kgo.SeedBrokers(upstream...))).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	cl := franzClient(t, kgo.SeedBrokers(upstream...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), want, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func hasHeader(r *kgo.Record, key string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return true
		}
	}
	return false
}

func countsAtLeast(got, want map[string]uint64) bool {
	for k, v := range want {
		if got[k] < v {
			return false
		}
	}
	return true
}

func countsEqual(got, want map[string]uint64) bool {
	return len(got) == len(want) && countsAtLeast(got, want) && countsAtLeast(want, got)
}

// loginWithKey logs in to env's SASL listener with an API key and asks
// for metadata.
func loginWithKey(ctx context.Context, env *testkit.Env, key string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.App.Gateway().BootstrapAddrs()["SASL"]),
		kgo.SASL(plain.Auth{User: "token", Pass: key}.AsMechanism()), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).ListBrokers(ctx)
	return err
}
