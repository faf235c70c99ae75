package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Produce and consume with a consumer group through the gateway across 3
// brokers: every record arrives, in order per partition, and the client
// only ever dials gateway addresses.
func TestFranzGoProduceConsumeGroup(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		franzGoProduceConsumeGroup(t, env, up.Topic(t, "orders"), up.GroupID(t, "g1"))
	})
}

func franzGoProduceConsumeGroup(t *testing.T, env *testkit.Env, topic, group string) {
	ctx := ctxT(t, 60*time.Second)
	dialer := &testkit.Dialer{}
	const partitions, perPartition = 6, 200

	adm := kadm.NewClient(newClient(t, env, dialer))
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	// Spread leadership over all three brokers.
	env.SpreadLeaders(t, topic, partitions)

	prod := newClient(t, env, dialer, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	cons := newClient(t, env, dialer, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int{}
	total := 0
	for total < partitions*perPartition {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, partitions*perPartition, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("%d-%d", r.Partition, next[r.Partition])
			if string(r.Value) != want {
				t.Fatalf("partition %d: got %q, want %q", r.Partition, r.Value, want)
			}
			next[r.Partition]++
			total++
		})
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.At != perPartition {
			t.Errorf("committed offset of partition %d = %+v, want %d", p, o, perPartition)
		}
	}

	dialed := dialer.Addrs()
	checkDialsGatewayOnly(t, "the client", env, dialed)
	for _, up := range env.UpstreamAddrs() {
		for _, a := range dialed {
			if a == up {
				t.Errorf("client dialed upstream broker %s directly", up)
			}
		}
	}
}
