package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// KIP-227 fetch sessions through the gateway: a consumer's full fetch
// opens a session on the broker, and the incremental fetches after it name
// only the partitions whose position changed — here none at all, so every
// byte of data they bring comes from partitions the request does not name.
// On both upstreams, by name (Fetch v12) and by topic id (v16):
//   - the client quota's max_bytes clamp holds on each incremental fetch
//     (the request's top-level field, rewritten in place every time);
//   - a per-topic quota charges the record bytes of its topic from the
//     response, named in the request or not: the held topic's bytes stay
//     within its bucket (burst + rate × time + one answer), and the
//     responses carry its throttle;
//   - Tollgate's own topic (audit.topic), named in the full fetch, is
//     refused there and so never joins the broker's session: no
//     incremental answer carries it, though its partition gets records.
func TestFetchSessionIncremental(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		for _, v := range []int16{12, 16} {
			t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { fetchSessionIncremental(t, up, v) })
		}
	})
}

const (
	sessionClientQ = 96 << 10 // alice's consumer_byte_rate
	sessionTopicQ  = 16 << 10 // her per-topic consumer_byte_rate on the held topic
	sessionRecord  = 8 << 10  // each record's value
)

func fetchSessionIncremental(t *testing.T, up *testkit.Upstream, v int16) {
	held, free, audit := up.Topic(t, "fs-held"), up.Topic(t, "fs-free"), up.Topic(t, "fs-audit")
	freshTopics(t, up, held, free, audit)
	env := startControlOn(t, up, func(c *app.Config) { c.Audit.Topic = audit })
	ctx := ctxT(t, 90*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	for _, topic := range []string{held, free} {
		if r, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	leaders := env.SpreadLeaders(t, held, 3)
	freeLeaders := env.SpreadLeaders(t, free, 3)
	// One broker's session: the held topic's partition 0, and the free
	// topic's partition that broker leads.
	broker, freeP := leaders[0], int32(-1)
	for p, l := range freeLeaders {
		if l == broker {
			freeP = p
		}
	}
	if freeP < 0 {
		t.Fatalf("no partition of %s led by broker %d: %v", free, broker, freeLeaders)
	}
	user := "alice"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: sessionClientQ}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "topic", Name: &held}, {Type: "user", Name: &user}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: sessionTopicQ}}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("quotas: %v %+v", err, res)
	}
	// The quota change was audited: audit.topic exists, with a record.
	eventually(t, 30*time.Second, "audit.topic written", func() error {
		_, err := upstreamTopicID(ctx, env, audit)
		return err
	})
	ids := map[string][16]byte{}
	for _, topic := range []string{held, free, audit} {
		id, err := upstreamTopicID(ctx, env, topic)
		if err != nil {
			t.Fatal(err)
		}
		ids[topic] = id
	}
	byID := map[[16]byte]string{ids[held]: held, ids[free]: free, ids[audit]: audit}

	// The full fetch, at the end of every partition: it opens the session.
	conn := brokerAs(t, ctx, env, broker, "127.0.0.3")
	named := func(topic string, p int32) kmsg.FetchRequestTopic {
		rt := kmsg.NewFetchRequestTopic()
		if v >= 13 {
			rt.TopicID = ids[topic]
		} else {
			rt.Topic = topic
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset = p, 8<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		return rt
	}
	fetch := func(sessionID, epoch int32, topics ...kmsg.FetchRequestTopic) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = v, -1, 200, 1, 64<<20
		req.SessionID, req.SessionEpoch, req.Topics = sessionID, epoch, topics
		return conn.do(t, req).(*kmsg.FetchResponse)
	}
	topicOf := func(rt kmsg.FetchResponseTopic) string {
		if v >= 13 {
			return byID[rt.TopicID]
		}
		return rt.Topic
	}
	full := fetch(0, 0, named(held, 0), named(free, freeP), named(audit, 0))
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: error %d, session %d (want a session)", full.ErrorCode, full.SessionID)
	}
	for _, rt := range full.Topics {
		for _, p := range rt.Partitions {
			if topicOf(rt) == audit && (p.ErrorCode != errTAF.Code || len(p.RecordBatches) != 0) {
				t.Errorf("full fetch: audit.topic answered error %d with %d bytes, want TOPIC_AUTHORIZATION_FAILED", p.ErrorCode, len(p.RecordBatches))
			}
			if topicOf(rt) != audit && p.ErrorCode != 0 {
				t.Errorf("full fetch: %s/%d error %d", topicOf(rt), p.Partition, p.ErrorCode)
			}
		}
	}

	// Records into the free partition now (straight to the upstream: the
	// producer is not the tenant), into the held one and audit.topic once
	// two incremental fetches have passed, so that the held partition's
	// records reach a session whose requests have not named it since the
	// full fetch.
	val := make([]byte, sessionRecord)
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(sessionRecord+512))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// Each past its bucket's burst: 240 KiB held, 960 KiB free.
	const heldRecs, freeRecs = 30, 120
	produce := func(topic string, p int32, n int) {
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: val})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(free, freeP, freeRecs)

	// Incremental fetches, as a client makes them: each names only the
	// partitions whose position moved since the broker last heard of it.
	type part struct {
		topic string
		p     int32
	}
	next := map[part]int64{} // the client's position
	told := map[part]int64{} // what the session has
	start := time.Now()
	var heldBytes, heldUnnamed, freeBytes, throttled int
	epoch := int32(1)
	for (next[part{free, freeP}] < freeRecs || next[part{held, 0}] < heldRecs) && time.Since(start) < 40*time.Second {
		if epoch == 3 {
			produce(held, 0, heldRecs)
			auditSomething(t, ctx, env)
		}
		var topics []kmsg.FetchRequestTopic
		namedHeld := false
		for k, off := range next {
			if off != told[k] {
				rt := named(k.topic, k.p)
				rt.Partitions[0].FetchOffset = off
				topics = append(topics, rt)
				told[k], namedHeld = off, namedHeld || k.topic == held
			}
		}
		resp := fetch(full.SessionID, epoch, topics...)
		epoch++
		if resp.ErrorCode != 0 {
			t.Fatalf("incremental fetch %d: error %d", epoch-1, resp.ErrorCode)
		}
		if resp.ThrottleMillis > 0 {
			throttled++
			// Kafka's client waits out the throttle before its next request.
			time.Sleep(time.Duration(resp.ThrottleMillis) * time.Millisecond)
		}
		answer := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				n := len(p.RecordBatches)
				answer += n
				k := part{topicOf(rt), p.Partition}
				next[k] = nextOffset(p.RecordBatches, next[k])
				switch k.topic {
				case held:
					heldBytes += n
					if !namedHeld {
						heldUnnamed += n
					}
				case free:
					freeBytes += n
				default:
					t.Fatalf("incremental fetch %d: an answer for %q (%x) with %d bytes, error %d", epoch-1, rt.Topic, rt.TopicID, n, p.ErrorCode)
				}
			}
		}
		// The client's clamp: what its bucket has room for (ten seconds
		// of its rate at most), and one record batch past it (Kafka
		// returns the first batch whatever max_bytes says).
		if limit := 10*sessionClientQ + 2*(sessionRecord+512); answer > limit {
			t.Errorf("incremental fetch %d: %d bytes, more than the client quota's clamp %d", epoch-1, answer, limit)
		}
	}
	elapsed := time.Since(start)
	if next[part{free, freeP}] < freeRecs || next[part{held, 0}] < heldRecs {
		t.Fatalf("read to offsets %v in %v, want %d of the free partition and %d of the held one", next, elapsed, freeRecs, heldRecs)
	}
	if heldUnnamed == 0 {
		t.Errorf("no record of the held partition came to a request that did not name it")
	}
	// The held topic's bucket: its burst (ten seconds of its rate), its
	// rate since, and one answer's overshoot — the partition_max_bytes the
	// session keeps from the full fetch, clamped then to the bucket's room
	// (its burst), and one batch.
	if limit := int(float64(sessionTopicQ)*(10+elapsed.Seconds())) + 10*sessionTopicQ + sessionRecord + 512; heldBytes > limit {
		t.Errorf("the held topic delivered %d bytes in %v through a session that never named it, want at most %d", heldBytes, elapsed, limit)
	}
	if throttled == 0 {
		t.Errorf("no incremental fetch carried a throttle (held %d bytes, free %d in %v)", heldBytes, freeBytes, elapsed)
	}
	t.Logf("Fetch v%d, %d incremental fetches in %v: held %d bytes (%d to requests not naming it), free %d bytes, %d throttled", v, epoch-1, elapsed.Round(time.Millisecond), heldBytes, heldUnnamed, freeBytes, throttled)
}

// upstreamTopicID is topic's id, asked of the upstream straight.
func upstreamTopicID(ctx context.Context, env *testkit.Env, topic string) ([16]byte, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...))
	if err != nil {
		return [16]byte{}, err
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return [16]byte{}, err
	}
	return td[topic].ID, td[topic].Err
}

// nextOffset is the offset after the last whole record batch of batches
// (cur when there is none).
func nextOffset(batches []byte, cur int64) int64 {
	for len(batches) >= 12 {
		size := 12 + int(int32(binary.BigEndian.Uint32(batches[8:12])))
		if size > len(batches) {
			break // a partial batch at the end of the answer
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batches[:size]); err != nil {
			break
		}
		cur = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		batches = batches[size:]
	}
	return cur
}
