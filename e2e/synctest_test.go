package e2e

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The whole system (3-broker kfake cluster, gateway, kgo clients) runs in
// one synctest bubble over the in-memory network: virtual time advances
// only when everything is idle, so a 30 s sleep costs no real time.
// Throttling tests build on this.
func TestSynctestSmoke(t *testing.T) {
	testkit.SkipIfRealOnly(t)
	// Not parallel: bounds the real time the bubble takes.
	realStart := time.Now()
	var virtual time.Duration
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		env := testkit.StartInBubble(t, app.Options{})
		dialer := &testkit.Dialer{Net: env.Net}
		newC := func(opts ...kgo.Opt) *kgo.Client { return newClient(t, env, dialer, opts...) }
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		const topic, partitions, n = "synctest", 6, 1000

		adm := kadm.NewClient(newC())
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatalf("create topic: %v", err)
		}
		for p := int32(0); p < partitions; p++ {
			if err := env.App.DevCluster().MoveTopicPartition(topic, p, p%3); err != nil {
				t.Fatal(err)
			}
		}

		prod := newC(kgo.DefaultProduceTopic(topic))
		cons := newC(kgo.ConsumeTopics(topic), kgo.ConsumerGroup("synctest-g"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))

		produce := func(from, to int) {
			t.Helper()
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%17), Value: fmt.Appendf(nil, "%d", i)})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		seen := map[string]bool{}
		consume := func(want int) {
			t.Helper()
			for len(seen) < want {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", len(seen), want, err)
				}
				fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			}
		}

		produce(0, n/2)
		consume(n / 2)
		before := time.Now()
		time.Sleep(30 * time.Second) // virtual: the group heartbeats, the gateway refreshes metadata
		if slept := time.Since(before); slept != 30*time.Second {
			t.Errorf("slept %v of virtual time, want exactly 30s", slept)
		}
		produce(n/2, n)
		consume(n)
		if len(seen) != n {
			t.Errorf("consumed %d distinct records, want %d", len(seen), n)
		}
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if s := env.App.Gateway().Sessions(); s < 4 {
			t.Errorf("gateway has %d sessions open, want the clients' connections (>= 4)", s)
		}

		checkDialsGatewayOnly(t, "the clients", env, dialer.Addrs())
		gw := env.GatewayAddrs()
		for _, up := range env.App.DevCluster().Addrs() {
			if gw[up] {
				t.Errorf("upstream broker %s is also a gateway address", up)
			}
		}
		virtual = time.Since(start)
	})
	real := time.Since(realStart)
	t.Logf("virtual time %v, real time %v", virtual, real)
	if virtual < 30*time.Second {
		t.Errorf("virtual time advanced %v, want >= 30s", virtual)
	}
	if real > 20*time.Second {
		t.Errorf("real time %v: the bubble did not run on virtual time", real)
	}
}

// produceThrottle is a filter that throttles every Produce response by d.
type produceThrottle struct{ d time.Duration }

func (produceThrottle) Name() string  { return "produce-throttle" }
func (produceThrottle) Keys() []int16 { return []int16{0} }

func (p produceThrottle) Throttle(proxy.Conn, *proxy.Request, int) time.Duration { return p.d }

// A gateway throttle is honoured on the bubble's clock: each Produce after
// the first waits out the previous response's 2 s throttle, exactly, in no
// real time.
func TestSynctestThrottleVirtualTime(t *testing.T) {
	testkit.SkipIfRealOnly(t)
	// Not parallel: bounds the real time the bubble takes.
	realStart := time.Now()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{
			Filters: []proxy.Filter{produceThrottle{2 * time.Second}},
		})
		c, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext),
			kgo.DefaultProduceTopic("throttled"), kgo.AllowAutoTopicCreation(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := t.Context()
		produce := func(i int) time.Duration {
			t0 := time.Now()
			if err := c.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
			return time.Since(t0)
		}
		produce(0) // creates the topic, connects
		for i := 1; i <= 3; i++ {
			d := produce(i)
			t.Logf("produce %d: %v", i, d)
			if d < 2*time.Second || d > 2*time.Second+100*time.Millisecond {
				t.Errorf("produce %d took %v of virtual time, want the 2s throttle", i, d)
			}
		}
	})
	if real := time.Since(realStart); real > 10*time.Second {
		t.Errorf("real time %v", real)
	}
}
