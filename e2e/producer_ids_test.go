package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// producer_ids_rate (issue 25 point 3, KIP-936): an application that makes
// a producer per message asks the cluster for a new producer id each time
// — each one state a broker keeps for a day. Under a quota of one id a
// second with a burst of three, such a client (mallory, ten producers one
// after another, each on connections of its own) gets its ids held and
// throttled by Tollgate, while a well-behaved client beside it (alice, one
// producer sending throughout, under the same quota) is never held; every
// record of both is acknowledged.
func TestProducerIDsQuota(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, producerIDsQuota)
}

func producerIDsQuota(t *testing.T, up *testkit.Upstream) {
	mallory, alice := "mallory", "alice"
	rate, burst := 1.0, 3.0
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{
			{CIDR: "127.0.0.4/32", Principal: mallory},
			{CIDR: "127.0.0.5/32", Principal: alice},
			{CIDR: "127.0.0.6/32", Principal: "admin"},
		}
		c.Authorization.QuotaAdmins = []string{"admin"}
		c.Quotas = append(c.Quotas,
			app.QuotaEntry{User: &mallory, ProducerIDsRate: &rate, BurstSeconds: &burst},
			app.QuotaEntry{User: &alice, ProducerIDsRate: &rate, BurstSeconds: &burst})
	})
	ctx := ctxT(t, 2*time.Minute)
	topic := up.Topic(t, "pids")
	if _, err := kadm.NewClient(newClient(t, env, nil)).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	env.WaitTopic(t, topic, 1)

	// alice: one idempotent producer, one record after another, for as
	// long as mallory runs.
	aliceDone := make(chan error, 1)
	aliceCtx, stopAlice := context.WithCancel(ctx)
	good := newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.5")), kgo.DefaultProduceTopic(topic), kgo.ClientID("alice-app"))
	aliceAcked := 0
	go func() {
		for aliceCtx.Err() == nil {
			if err := good.ProduceSync(aliceCtx, &kgo.Record{Value: []byte("steady")}).FirstErr(); err != nil {
				if aliceCtx.Err() == nil {
					aliceDone <- err
					return
				}
				break
			}
			aliceAcked++
			time.Sleep(50 * time.Millisecond)
		}
		aliceDone <- nil
	}()

	// mallory: a new producer (a new client, so a new producer id) for
	// each of ten records.
	start := time.Now()
	const n = 10
	for i := range n {
		cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(fromIP("127.0.0.4")), kgo.DefaultProduceTopic(topic),
			kgo.ClientID(fmt.Sprintf("per-message-%d", i)), kgo.DisableClientMetrics())
		if err != nil {
			t.Fatal(err)
		}
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr()
		cl.Close()
		if err != nil {
			t.Fatalf("mallory's producer %d: %v", i, err)
		}
	}
	took := time.Since(start)
	stopAlice()
	if err := <-aliceDone; err != nil {
		t.Fatalf("alice's producer: %v", err)
	}

	throttled := func(user string) float64 {
		return scrapeMetricOr(t, env, fmt.Sprintf(`tollgate_quota_throttled_total{client_id="",client_id_prefix="",quota="producer_ids_rate",topic="",topic_prefix="",user=%q}`, user), 0)
	}
	// Ten ids against a burst of three: the seven past it are each a
	// deficit Tollgate throttled (and held the next id for).
	if got := throttled(mallory); got < n-burst-1 {
		t.Errorf("mallory's producer_ids_rate bucket throttled %v times for %d ids (burst %v), want at least %v", got, n, burst, n-burst-1)
	}
	if got := throttled(alice); got != 0 || aliceAcked == 0 {
		t.Errorf("alice, one producer: throttled %v times, %d records acknowledged", got, aliceAcked)
	}
	// Through Kafka's API, as Tollgate's extension: AlterClientQuotas
	// sets it, DescribeClientQuotas shows it, and it applies at once.
	adm := adminAs(t, env, "127.0.0.6")
	carol := "carol"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &carol}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_ids_rate", Value: 2.5}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas producer_ids_rate: %v %+v", err, res)
	}
	desc, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &carol, MatchType: 0}})
	if err != nil || len(desc) != 1 || desc[0].Values[0].Key != "producer_ids_rate" || desc[0].Values[0].Value != 2.5 {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, desc)
	}

	t.Logf("mallory's %d producers took %v (ids held past the burst of %v at %v/s); alice's one producer had %d records acknowledged meanwhile",
		n, took.Round(time.Millisecond), burst, rate, aliceAcked)
}
