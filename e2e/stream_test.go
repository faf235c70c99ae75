package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Large produce requests and fetch responses are streamed through the
// gateway rather than buffered; every byte must still arrive intact.
func TestLargeRecordsStreamed(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	const topic, n = "big", 400
	prod := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(900<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	sums := map[string][32]byte{}
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		size := 100 + (i*7919)%(40<<10) // 100 B to 40 KiB: small and spliced blocks mixed
		v := bytes.Repeat([]byte{byte(i)}, size)
		copy(v, fmt.Sprintf("rec-%d-", i))
		k := strconv.Itoa(i)
		sums[k] = sha256.Sum256(v)
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: v})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, env, nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(8<<20))
	seen := 0
	for seen < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", seen, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			if sha256.Sum256(r.Value) != sums[string(r.Key)] {
				t.Fatalf("record %s corrupted in transit", r.Key)
			}
			seen++
		})
	}
}

// A streamed fetch response that carries node endpoints (KIP-951, sent for
// a partition whose leader moved) has them rewritten to gateway addresses
// without changing the already-sent frame size.
func TestStreamedFetchNodeEndpointsRewritten(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	dev := env.App.DevCluster()
	const topic = "moving"
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if err := dev.MoveTopicPartition(topic, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("z"), 200<<10)
	for p := int32(0); p < 3; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: big}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Partition 2 moves to node 1; node 0 will answer NOT_LEADER for it,
	// with node 1's endpoint, next to 400 KiB of data for partitions 0-1.
	if err := dev.MoveTopicPartition(topic, 2, 1); err != nil {
		t.Fatal(err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var topicID [16]byte
	for _, tp := range md.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			topicID = tp.TopicID
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = 17
	req.MaxBytes = 8 << 20
	req.MaxWaitMillis = 100
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = topicID
	for p := int32(0); p < 3; p++ {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		fp.PartitionMaxBytes = 4 << 20
		fp.CurrentLeaderEpoch = -1
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	resp, err := cl.Broker(0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	gw := env.GatewayAddrs()
	var data int
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			data += len(p.RecordBatches)
		}
	}
	if data < 64<<10 {
		t.Fatalf("fetch returned %d bytes of records; the test needs a streamed (>= 64 KiB) response", data)
	}
	if len(fr.Brokers) == 0 {
		t.Skip("upstream sent no node endpoints for the moved partition") // kfake always does today
	}
	for _, b := range fr.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if !gw[addr] {
			t.Errorf("node endpoint %d is %s, not a gateway address", b.NodeID, addr)
		}
	}
}
