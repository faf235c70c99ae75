package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/wire"
)

// What a newer broker's protocol brings, through the gateway on both
// upstreams: KRaft's DescribeCluster and DescribeQuorum, the broker's
// ApiVersions clamped to kmsg's, KIP-227 fetch sessions, KIP-848 consumer
// groups and KIP-932 share groups.

// KRaft's own views through the gateway. DescribeCluster (at every
// version the gateway offers) names the upstream's cluster id, a
// controller among its brokers, and each broker at the gateway's port,
// never its own address. DescribeQuorum reaches the real cluster's
// metadata quorum and comes back with its leader and voters but none of
// the controllers' listener addresses (the gateway has no port for
// them). kfake has no DescribeQuorum (it advertises none; its row checks
// DescribeCluster).
func TestKRaftViewsThroughGateway(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 30*time.Second)
		info := upstreamMetadata(t, env)
		gw := env.GatewayAddrs()
		raw := dialRaw(t, env.Bootstrap)
		av := raw.do(t, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		var dcMax, dqMax int16 = -1, -1
		for _, k := range av.ApiKeys {
			switch k.ApiKey {
			case int16(kmsg.DescribeCluster):
				dcMax = k.MaxVersion
			case int16(kmsg.DescribeQuorum):
				dqMax = k.MaxVersion
			}
		}
		if dcMax < 0 {
			t.Fatal("the gateway does not advertise DescribeCluster")
		}
		for v := int16(0); v <= dcMax; v++ {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version = v
			resp := raw.do(t, req).(*kmsg.DescribeClusterResponse)
			what := "DescribeCluster v" + strconv.Itoa(int(v))
			if resp.ErrorCode != 0 || resp.ClusterID != info.ClusterID || !info.Brokers[resp.ControllerID] || len(resp.Brokers) != 3 {
				t.Errorf("%s: error %d, cluster %q (upstream %q), controller %d, %d brokers", what, resp.ErrorCode, resp.ClusterID, info.ClusterID, resp.ControllerID, len(resp.Brokers))
			}
			for _, b := range resp.Brokers {
				if a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); !gw[a] || !info.Brokers[b.NodeID] {
					t.Errorf("%s: broker %d at %s, not a gateway address", what, b.NodeID, a)
				}
			}
		}
		if !up.Real() || dqMax < 0 {
			t.Logf("%s: DescribeQuorum advertised up to v%d", up.Name, dqMax)
			return
		}
		controllers := map[string]bool{}
		for _, n := range up.Kafka.Nodes() {
			controllers[n.Controller] = true
		}
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.Version = dqMax
		topic := kmsg.NewDescribeQuorumRequestTopic()
		topic.Topic = "__cluster_metadata"
		topic.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
		req.Topics = []kmsg.DescribeQuorumRequestTopic{topic}
		resp, err := req.RequestWith(ctx, newClient(t, env, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("DescribeQuorum v%d: %+v", dqMax, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID < 1 || len(p.CurrentVoters) != 3 {
			t.Errorf("DescribeQuorum: leader %d, voters %+v (error %d); want a leader among three voters", p.LeaderID, p.CurrentVoters, p.ErrorCode)
		}
		for _, n := range resp.Nodes {
			for _, l := range n.Listeners {
				a := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
				if controllers[a] || strings.Contains(a, up.Kafka.Nodes()[0].Controller) {
					t.Errorf("DescribeQuorum names controller %d's listener %s %s through the gateway", n.NodeID, l.Name, a)
				}
			}
		}
		t.Logf("%s: DescribeQuorum v%d: leader %d, %d voters, %d nodes with their listeners removed", up.Name, dqMax, p.LeaderID, len(p.CurrentVoters), len(resp.Nodes))
	})
}

// A newer broker's ApiVersions, through the gateway: asked of the broker
// directly and through Tollgate, the gateway's answer is the broker's
// clamped to what kmsg can parse — every key the broker advertises that
// kmsg knows is there, with the broker's min and min(broker max, kmsg
// max); keys kmsg does not know are gone; the only additions are the APIs
// Tollgate answers itself (telemetry), with kmsg's ranges. Against Kafka
// 4.x this is where a newer broker's APIs meet an older kmsg.
func TestApiVersionsClampedFromBroker(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		req := func() *kmsg.ApiVersionsRequest {
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = 3
			r.ClientSoftwareName, r.ClientSoftwareVersion = "tollgate-e2e", "1"
			return r
		}
		direct := dialRaw(t, env.UpstreamAddrs()[0]).do(t, req()).(*kmsg.ApiVersionsResponse)
		through := dialRaw(t, env.Bootstrap).do(t, req()).(*kmsg.ApiVersionsResponse)
		if direct.ErrorCode != 0 || through.ErrorCode != 0 {
			t.Fatalf("ApiVersions errors: direct %d, through %d", direct.ErrorCode, through.ErrorCode)
		}
		got := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range through.ApiKeys {
			got[k.ApiKey] = k
		}
		ownAnswers := map[int16]bool{int16(kmsg.GetTelemetrySubscriptions): true, int16(kmsg.PushTelemetry): true}
		unknown := 0
		for _, d := range direct.ApiKeys {
			a := wire.Lookup(d.ApiKey)
			g, ok := got[d.ApiKey]
			delete(got, d.ApiKey)
			switch {
			case ownAnswers[d.ApiKey]:
			case !a.Known:
				unknown++
				if ok {
					t.Errorf("key %d (unknown to kmsg) advertised through the gateway: %+v", d.ApiKey, g)
				}
			case d.MinVersion > a.Max:
				if ok {
					t.Errorf("%s: broker's min %d is above kmsg's max %d, yet advertised: %+v", kmsg.NameForKey(d.ApiKey), d.MinVersion, a.Max, g)
				}
			case !ok:
				t.Errorf("%s (broker %d–%d, kmsg max %d) missing through the gateway", kmsg.NameForKey(d.ApiKey), d.MinVersion, d.MaxVersion, a.Max)
			case g.MinVersion != d.MinVersion || g.MaxVersion != min(d.MaxVersion, a.Max):
				t.Errorf("%s: through %d–%d, want %d–%d (broker %d–%d, kmsg max %d)", kmsg.NameForKey(d.ApiKey),
					g.MinVersion, g.MaxVersion, d.MinVersion, min(d.MaxVersion, a.Max), d.MinVersion, d.MaxVersion, a.Max)
			}
		}
		for k, g := range got {
			if !ownAnswers[k] {
				t.Errorf("%s advertised through the gateway but not by the broker: %+v", kmsg.NameForKey(k), g)
			}
		}
		t.Logf("%s: %d keys advertised, %d unknown to kmsg dropped, %d through the gateway", up.Name, len(direct.ApiKeys), unknown, len(through.ApiKeys))
	})
}

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

// KIP-848 consumer groups through the gateway: two franz-go consumers
// with the server-side assignor (ConsumerGroupHeartbeat; Kafka 4.x's
// coordinator assigns the partitions) share a topic's six partitions,
// consume every record once between them, and ConsumerGroupDescribe
// through the gateway names each member's own address (the gateway writes
// it back over its own, in the upstream's format), not the gateway's.
// Kafka 3.9 has no KIP-848 groups by default; franz-go then falls back to
// the classic protocol, which the same checks hold for.
func TestConsumerGroupProtocol(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 90*time.Second)
		topic, group := up.Topic(t, "kip848"), up.GroupID(t, "kip848")
		adm := kadm.NewClient(newClient(t, env, nil))
		if _, err := adm.CreateTopic(ctx, 6, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
		type member struct {
			ip       string
			mu       sync.Mutex
			assigned int
			seen     map[string]int
		}
		members := []*member{{ip: "127.0.0.21"}, {ip: "127.0.0.22"}}
		var total sync.WaitGroup
		const n = 600
		seen := make(chan string, 2*n)
		for _, m := range members {
			m.seen = map[string]int{}
			cl := newClient(t, env, nil, kgo.Dialer(fromIP(m.ip)), kgo.ClientID("kip848-"+m.ip),
				kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ServerSideBalancer(),
				kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
					m.mu.Lock()
					m.assigned += len(a[topic])
					m.mu.Unlock()
				}))
			total.Add(1)
			go func() {
				defer total.Done()
				for ctx.Err() == nil {
					fs := cl.PollFetches(ctx)
					fs.EachRecord(func(r *kgo.Record) { seen <- string(r.Value) })
				}
			}()
		}
		// Both members hold partitions before anything is produced.
		deadline := time.Now().Add(60 * time.Second)
		for {
			both := true
			for _, m := range members {
				m.mu.Lock()
				both = both && m.assigned > 0
				m.mu.Unlock()
			}
			if both {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the two members did not both get partitions within 60 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		prod := newClient(t, env, nil, kgo.DefaultProduceTopic(topic))
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i), Partition: int32(i % 6)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for len(got) < n && ctx.Err() == nil {
			select {
			case v := <-seen:
				got[v]++
			case <-ctx.Done():
			}
		}
		if len(got) < n {
			t.Fatalf("consumed %d of %d records", len(got), n)
		}
		for v, c := range got {
			if c > 1 {
				t.Errorf("record %s consumed %d times", v, c)
			}
		}

		described, err := adm.DescribeConsumerGroups(ctx, group)
		if err == nil && described[group].Err == nil && len(described[group].Members) > 0 {
			hosts := map[string]bool{}
			for _, m := range described[group].Members {
				hosts[strings.TrimPrefix(m.ClientHost, "/")] = true
			}
			for _, m := range members {
				if !hosts[m.ip] && !hosts[m.ip+":0"] && !hostHasIP(hosts, m.ip) {
					t.Errorf("ConsumerGroupDescribe through the gateway shows hosts %v, not member %s's own address", hosts, m.ip)
				}
			}
			t.Logf("%s: KIP-848 group, members at %v", up.Name, hosts)
		} else {
			// The classic protocol (a broker without KIP-848 groups).
			dg, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			hosts := map[string]bool{}
			for _, m := range dg[group].Members {
				hosts[strings.TrimPrefix(m.ClientHost, "/")] = true
			}
			for _, m := range members {
				if !hostHasIP(hosts, m.ip) {
					t.Errorf("DescribeGroups through the gateway shows hosts %v, not member %s's own address", hosts, m.ip)
				}
			}
			t.Logf("%s: classic group (ConsumerGroupDescribe: %v), members at %v", up.Name, err, hosts)
		}
	})
}

// hostHasIP says whether a member host (Kafka's "ip", kfake's "ip:port")
// is ip.
func hostHasIP(hosts map[string]bool, ip string) bool {
	for h := range hosts {
		if h == ip || strings.HasPrefix(h, ip+":") {
			return true
		}
	}
	return false
}

const consoleShareConsumer = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"

// A share group (KIP-932) through the gateway: Kafka's console share
// consumer (the Java KafkaShareConsumer: ShareGroupHeartbeat, ShareFetch
// with its acknowledgements, FindCoordinator for the share coordinator)
// reads every record of a topic whose partitions are led by all three
// brokers, the group's share.auto.offset.reset set to earliest through the
// gateway (IncrementalAlterConfigs on the group), and dials only gateway
// addresses. Kafka 4's share groups are on by default (share.version 2 on
// 4.4); Kafka 3.9 has none, so its row has nothing to run.
func TestJavaShareConsumer(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		if strings.HasPrefix(javaVersion(up), "3.") {
			t.Log("Kafka 3.x has no share groups (KIP-932 arrived in 4.0)")
			return
		}
		javaShareConsumer(t, up)
	})
}

func javaShareConsumer(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 3*time.Minute)
	topic, group := up.Topic(t, "share-orders"), up.GroupID(t, "share-g")
	const partitions, n = 3, 60
	freshTopics(t, up, topic)
	cl := newClient(t, env, nil)
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	env.SpreadLeaders(t, topic, partitions)

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set the group's share.auto.offset.reset: %v %+v", err, resp)
	}

	var want []string
	var recs []*kgo.Record
	for i := range n {
		k, v := fmt.Sprintf("k%d", i%partitions), fmt.Sprintf("v%d", i)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
		want = append(want, k+"\t"+v)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := runJava(t, up, 150*time.Second, "", consoleShareConsumer,
		"--bootstrap-server", env.Bootstrap, "--topic", topic, "--group", group,
		"--max-messages", fmt.Sprint(n), "--timeout-ms", "60000",
		"--formatter-property", "print.key=true")
	got := strings.Split(strings.TrimSuffix(run.Stdout, "\n"), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the share consumer read %d records:\n%s\nwant %d:\n%s\nstderr:\n%s", len(got), tail(strings.Join(got, "\n"), 10), len(want), tail(strings.Join(want, "\n"), 10), tail(run.Stderr, 30))
	}
	checkJavaDials(t, "the share consumer", env, run.Dials)
}
