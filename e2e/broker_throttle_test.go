package e2e

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
)

// A broker with quotas of its own behind Tollgate: the client sees, in
// each response, the larger of the two throttles (the gateway's and the
// broker's own throttle_time_ms), as a client of two chained quota
// managers should. On the real cluster a broker quota on the client-id
// far below Tollgate's throttles the client while Tollgate's bucket never
// does; with the quotas the other way round, Tollgate's throttle is the
// one the client sees. kfake enforces no quotas: its row has the second
// half only.
func TestBrokerThrottleCombined(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		brokerID, gatewayID := up.Topic(t, "broker-quota"), up.Topic(t, "gateway-quota")
		env := up.Start(t, app.Options{}, func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{
				{ClientID: &brokerID, ProducerByteRate: ptrF(64 << 20)},
				{ClientID: &gatewayID, ProducerByteRate: ptrF(64 << 10)},
			}
		})
		ctx := ctxT(t, 90*time.Second)
		topic := up.Topic(t, "broker-throttle")
		adm := kadm.NewClient(newClient(t, env, nil))
		if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
		tollgateThrottles := func(id string) int64 {
			for _, u := range env.App.Engine().Usage(time.Now()) {
				if u.Key == model.ProducerByteRate && u.ClientID == id {
					return u.Throttles
				}
			}
			return 0
		}

		if up.Real() {
			// The broker's quota: 64 KiB/s per broker; Tollgate's: 64 MiB/s.
			id := brokerID
			direct := kadm.NewClient(directClient(t, up.Kafka))
			setBroker := func(op kadm.AlterClientQuotaOp) {
				t.Helper()
				res, err := direct.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
					Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &id}},
					Ops:    []kadm.AlterClientQuotaOp{op},
				}})
				if err != nil || res[0].Err != nil {
					t.Fatalf("broker quota on %s: %v %v", id, err, res)
				}
			}
			setBroker(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: 64 << 10})
			t.Cleanup(func() {
				setBroker(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Remove: true})
			})
			time.Sleep(time.Second) // the brokers apply it from the metadata log
			max := produceUntilThrottled(t, ctx, env, topic, id, 15*time.Second)
			if max == 0 {
				t.Fatal("a broker quota far below the gateway's never throttled the client through the gateway")
			}
			if n := tollgateThrottles(id); n != 0 {
				t.Errorf("Tollgate throttled %d times under a quota 1000× what was sent", n)
			}
			t.Logf("broker's own quota: the client saw throttles up to %v through the gateway, Tollgate none", max)
		}

		// Tollgate's quota far below the broker's (none, or kfake's).
		id := gatewayID
		max := produceUntilThrottled(t, ctx, env, topic, id, 15*time.Second)
		if max == 0 || tollgateThrottles(id) == 0 {
			t.Fatalf("Tollgate's quota did not throttle (client saw %v, Tollgate counted %d)", max, tollgateThrottles(id))
		}
	})
}

// produceUntilThrottled produces 16 KiB random records as client-id id
// until a response carries a throttle (or d passes) and returns the
// largest throttle seen.
func produceUntilThrottled(t *testing.T, ctx context.Context, env *testkit.Env, topic, id string, d time.Duration) time.Duration {
	t.Helper()
	h := &throttleHook{}
	cl := newClient(t, env, nil, kgo.ClientID(id), kgo.DefaultProduceTopic(topic), kgo.WithHooks(h),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v := make([]byte, 16<<10)
		rand.Read(v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce as %s: %v", id, err)
		}
		if m := time.Duration(h.max.Load()); m > 0 {
			return m
		}
	}
	return 0
}
