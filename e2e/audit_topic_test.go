package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

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
