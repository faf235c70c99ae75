package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Large produce requests and fetch responses are streamed through the
// gateway rather than buffered; every byte must still arrive intact.
func TestLargeRecordsStreamed(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, largeRecordsStreamed)
}

func largeRecordsStreamed(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	const n = 400
	topic := up.Topic(t, "big")
	freshTopics(t, up, topic)
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
//
// The condition: a Fetch to broker `from` for three partitions, two it
// leads with 400 KiB of records and one it no longer hosts, which it
// answers NOT_LEADER_OR_FOLLOWER with the new leader's endpoint. kfake
// moves the leaders (all to 0, then partition 2 to 1). The real cluster
// gets the same deterministically: the topic is created with every
// partition on brokers 1, 2, 3 in that order (led by 1), then partition 2
// is reassigned to brokers 2 and 3 only, so that broker 1 drops it and 2
// leads it. (Moving the leader alone would not do: a real follower serves a
// consumer's Fetch v11+ itself, KIP-392, with no error and no endpoints.)
func TestStreamedFetchNodeEndpointsRewritten(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, streamedFetchNodeEndpointsRewritten)
}

func streamedFetchNodeEndpointsRewritten(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 90*time.Second)
	topic := up.Topic(t, "moving")
	freshTopics(t, up, topic)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	from, to := int32(0), int32(1)
	if up.Real() {
		from, to = 1, 2
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p := int32(0); p < 3; p++ {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, []int32{1, 2, 3}
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s on brokers 1, 2, 3: %v %+v", topic, err, resp)
		}
		waitLeaders(t, env, topic, map[int32]int32{0: 1, 1: 1, 2: 1})
	} else {
		dev := env.App.DevCluster()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 3; p++ {
			if err := dev.MoveTopicPartition(topic, p, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	big := bytes.Repeat([]byte("z"), 200<<10)
	for p := int32(0); p < 3; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: big}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Partition 2 moves to broker `to`; broker `from` will answer
	// NOT_LEADER for it, with the new leader's endpoint, next to 400 KiB
	// of data for partitions 0-1.
	if up.Real() {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 2, []int32{2, 3})
		res, err := upstreamAdmin(t, env).AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("reassign %s/2 to brokers 2, 3: %v", topic, err)
		}
		waitLeaders(t, env, topic, map[int32]int32{0: 1, 1: 1, 2: 2})
	} else if err := env.App.DevCluster().MoveTopicPartition(topic, 2, to); err != nil {
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
	// The broker learns it no longer hosts partition 2 from its metadata
	// log, perhaps after the metadata the test read: asked again until it
	// says so, bounded.
	var fr *kmsg.FetchResponse
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := cl.Broker(int(from)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		fr = resp.(*kmsg.FetchResponse)
		moved := false
		for _, tp := range fr.Topics {
			for _, p := range tp.Partitions {
				moved = moved || (p.Partition == 2 && p.ErrorCode == kerr.NotLeaderForPartition.Code)
			}
		}
		if moved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d still answers partition 2 without NOT_LEADER_OR_FOLLOWER: %+v", from, fr.Topics)
		}
		time.Sleep(100 * time.Millisecond)
	}
	gw := env.GatewayAddrs()
	var data int
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			data += len(p.RecordBatches)
			if p.Partition == 2 && p.CurrentLeader.LeaderID != to {
				t.Errorf("partition 2's current leader is %d, want %d", p.CurrentLeader.LeaderID, to)
			}
		}
	}
	if data < 64<<10 {
		t.Fatalf("fetch returned %d bytes of records; the test needs a streamed (>= 64 KiB) response", data)
	}
	if len(fr.Brokers) == 0 {
		t.Fatal("upstream sent no node endpoints for the moved partition")
	}
	// The new leader's endpoint is among them (Kafka sends that one only,
	// kfake every broker's), and each is the gateway's.
	newLeader := false
	for _, b := range fr.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if !gw[addr] {
			t.Errorf("node endpoint %d is %s, not a gateway address", b.NodeID, addr)
		}
		newLeader = newLeader || b.NodeID == to
	}
	if !newLeader {
		t.Errorf("node endpoints %+v: none of the new leader %d", fr.Brokers, to)
	}
}

// waitLeaders waits (bounded) until the upstream's metadata, asked
// straight, shows topic's partitions led as want says.
func waitLeaders(t *testing.T, env *testkit.Env, topic string, want map[int32]int32) {
	t.Helper()
	adm := upstreamAdmin(t, env)
	eventually(t, 30*time.Second, "leaders of "+topic, func() error {
		md, err := adm.Metadata(ctxT(t, 5*time.Second), topic)
		if err != nil {
			return err
		}
		got := map[int32]int32{}
		for _, p := range md.Topics[topic].Partitions {
			got[p.Partition] = p.Leader
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("leaders %v, want %v", got, want)
		}
		return nil
	})
}
