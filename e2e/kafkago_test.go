package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// kafkaGoTransport is a kafka-go Transport that dials through d and whose
// background goroutines stop when the test ends.
func kafkaGoTransport(t *testing.T, d *testkit.Dialer) *kafka.Transport {
	bg, cancel := context.WithCancel(context.Background())
	tr := &kafka.Transport{
		Dial:        d.DialContext,
		DialTimeout: 5 * time.Second,
		MetadataTTL: 200 * time.Millisecond,
		ClientID:    "tollgate-e2e-kafkago",
		Context:     bg,
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
	})
	return tr
}

// kafkaGoKeyPartition sends a record whose key is "<n>" to partition n.
var kafkaGoKeyPartition = kafka.BalancerFunc(func(m kafka.Message, partitions ...int) int {
	p, err := strconv.Atoi(string(m.Key))
	if err != nil {
		panic(fmt.Sprintf("key %q is not a partition number", m.Key))
	}
	return partitions[p%len(partitions)]
})

// segmentio/kafka-go through the gateway: kafka.Client creates topics and
// reads metadata (broker addresses are the gateway's), one Writer produces
// with acks=all and another with acks=0 (requests with no response), a
// Reader in a consumer group reads every record of both topics in order per
// partition and commits, ListGroups and OffsetFetch see the group, and every
// connection any of them opened went to a gateway address; on kfake and on
// the real Kafka.
func TestKafkaGo(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		testKafkaGo(t, env, up.Topic(t, "kafkago-acks-all"), up.Topic(t, "kafkago-acks-none"), up.GroupID(t, "kafkago-g1"))
	})
}

func testKafkaGo(t *testing.T, env *testkit.Env, topicAll, topicNone, group string) {
	ctx := ctxT(t, 90*time.Second)
	dialer := &testkit.Dialer{}
	tr := kafkaGoTransport(t, dialer)
	client := &kafka.Client{Addr: kafka.TCP(env.Bootstrap), Transport: tr, Timeout: 10 * time.Second}
	const (
		partsAll     = 6
		partsNone    = 3
		perPartition = 40
	)
	upInfo := upstreamMetadata(t, env)

	cr, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topicAll, NumPartitions: partsAll, ReplicationFactor: -1},
		{Topic: topicNone, NumPartitions: partsNone, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "3600000"}}},
	}})
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	if len(cr.Errors) != 2 || cr.Errors[topicAll] != nil || cr.Errors[topicNone] != nil {
		t.Fatalf("create topics: %v", cr.Errors)
	}
	cr, err = client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topicAll, NumPartitions: 1, ReplicationFactor: -1},
	}})
	if err != nil {
		t.Fatalf("create topic again: %v", err)
	}
	if !errors.Is(cr.Errors[topicAll], kafka.TopicAlreadyExists) {
		t.Errorf("creating %s twice: %v, want %v", topicAll, cr.Errors[topicAll], kafka.TopicAlreadyExists)
	}
	upLeaders := env.SpreadLeaders(t, topicAll, partsAll)
	env.WaitTopic(t, topicAll, int32(partsAll))
	env.WaitTopic(t, topicNone, int32(partsNone))

	// Metadata: three brokers, all at gateway addresses, and the upstream's
	// leaders (kfake's moved ones). kafka-go answers Metadata from its
	// transport's cache (TTL 200ms here), so poll until they show.
	gw := env.GatewayAddrs()
	var md *kafka.MetadataResponse
	movedLeaders := func() bool {
		for _, tp := range md.Topics {
			if tp.Name != topicAll || len(tp.Partitions) != partsAll {
				continue
			}
			for _, p := range tp.Partitions {
				if int32(p.Leader.ID) != upLeaders[int32(p.ID)] {
					return false
				}
			}
			return true
		}
		return false
	}
	for i := 0; ; i++ {
		var err error
		if md, err = client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topicAll, topicNone}}); err != nil {
			t.Fatalf("metadata: %v", err)
		}
		if movedLeaders() {
			break
		}
		if i == 100 {
			t.Fatalf("metadata never showed the upstream's leaders %v: %+v", upLeaders, md.Topics)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if md.ClusterID != upInfo.ClusterID {
		t.Errorf("cluster id %q, want the upstream's %q", md.ClusterID, upInfo.ClusterID)
	}
	if len(md.Brokers) != 3 {
		t.Errorf("metadata has %d brokers, want 3: %+v", len(md.Brokers), md.Brokers)
	}
	for _, b := range append(md.Brokers, md.Controller) {
		if !upInfo.Brokers[int32(b.ID)] {
			t.Errorf("metadata broker %d is not an upstream broker (%v)", b.ID, upInfo.Brokers)
		}
		if a := net.JoinHostPort(b.Host, strconv.Itoa(b.Port)); !gw[a] {
			t.Errorf("metadata broker %d at %s is not a gateway address (gateway: %v)", b.ID, a, keys(gw))
		}
	}
	parts := map[string]int{}
	leaders := map[int]bool{}
	for _, tp := range md.Topics {
		if tp.Error != nil {
			t.Errorf("metadata topic %s: %v", tp.Name, tp.Error)
		}
		parts[tp.Name] = len(tp.Partitions)
		for _, p := range tp.Partitions {
			if tp.Name == topicAll {
				leaders[p.Leader.ID] = true
			}
			if a := net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port)); !gw[a] {
				t.Errorf("leader of %s/%d at %s is not a gateway address", tp.Name, p.ID, a)
			}
		}
	}
	if parts[topicAll] != partsAll || parts[topicNone] != partsNone || len(leaders) != 3 {
		t.Fatalf("metadata: partitions %v, leaders of %s %v", parts, topicAll, leaders)
	}

	// Produce: acks=all in a few synchronous batches, then acks=0.
	write := func(w *kafka.Writer, topic string, partitions int) {
		t.Helper()
		defer func() {
			if err := w.Close(); err != nil {
				t.Errorf("close writer %s: %v", topic, err)
			}
		}()
		const batch = 10
		for i := 0; i < perPartition; i += batch {
			var msgs []kafka.Message
			for j := i; j < i+batch; j++ {
				for p := 0; p < partitions; p++ {
					msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(p)), Value: fmt.Appendf(nil, "%s-%d-%d", topic, p, j)})
				}
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("write %s: %v", topic, err)
			}
		}
	}
	write(&kafka.Writer{
		Addr: kafka.TCP(env.Bootstrap), Topic: topicAll, Balancer: kafkaGoKeyPartition, Transport: tr,
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000,
	}, topicAll, partsAll)
	write(&kafka.Writer{
		Addr: kafka.TCP(env.Bootstrap), Topic: topicNone, Balancer: kafkaGoKeyPartition, Transport: tr,
		RequiredAcks: kafka.RequireNone, BatchTimeout: time.Millisecond, BatchSize: 1000,
	}, topicNone, partsNone)

	// acks=0 gets no answer: wait (bounded) until the broker has everything.
	offReq := map[string][]kafka.OffsetRequest{}
	for p := 0; p < partsAll; p++ {
		offReq[topicAll] = append(offReq[topicAll], kafka.LastOffsetOf(p))
	}
	for p := 0; p < partsNone; p++ {
		offReq[topicNone] = append(offReq[topicNone], kafka.LastOffsetOf(p))
	}
	var lastOffsets string
	for deadline := time.Now().Add(15 * time.Second); ; {
		lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: offReq})
		if err != nil {
			t.Fatalf("list offsets: %v", err)
		}
		complete := len(lo.Topics[topicAll]) == partsAll && len(lo.Topics[topicNone]) == partsNone
		lastOffsets = ""
		for _, topic := range []string{topicAll, topicNone} {
			for _, po := range lo.Topics[topic] {
				if po.Error != nil || po.LastOffset != perPartition {
					complete = false
				}
				lastOffsets += fmt.Sprintf("%s/%d=%d(%v) ", topic, po.Partition, po.LastOffset, po.Error)
			}
		}
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("high watermarks never reached %d: %s", perPartition, lastOffsets)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Consume both topics in one group.
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{env.Bootstrap},
		GroupID:           group,
		GroupTopics:       []string{topicAll, topicNone},
		Dialer:            &kafka.Dialer{DialFunc: dialer.DialContext, Timeout: 5 * time.Second, ClientID: "tollgate-e2e-kafkago"},
		StartOffset:       kafka.FirstOffset,
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		JoinGroupBackoff:  100 * time.Millisecond,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    100 * time.Millisecond,
		RetentionTime:     time.Hour,
	})
	readerClosed := false
	closeReader := func() {
		if !readerClosed {
			readerClosed = true
			if err := r.Close(); err != nil {
				t.Errorf("close reader: %v", err)
			}
		}
	}
	defer closeReader()
	type tp struct {
		topic string
		p     int
	}
	next := map[tp]int{}
	seenNone := map[string]bool{}
	var toCommit []kafka.Message
	want := perPartition * (partsAll + partsNone)
	for n := 0; n < want; n++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("fetch after %d of %d: %v", n, want, err)
		}
		k := tp{m.Topic, m.Partition}
		w := fmt.Sprintf("%s-%d-%d", m.Topic, m.Partition, next[k])
		if m.Topic == topicNone {
			// acks=0 requests get no answer to wait for, and kafka-go
			// sends a partition's batches on whichever of its pooled
			// connections is free: batches may reach the broker in
			// another order (as without the gateway). Each record must
			// be there once.
			var j int
			if _, err := fmt.Sscanf(string(m.Value), m.Topic+"-%d-%d", new(int), &j); err != nil || j < 0 || j >= perPartition ||
				!strings.HasPrefix(string(m.Value), fmt.Sprintf("%s-%d-", m.Topic, m.Partition)) || seenNone[string(m.Value)] {
				t.Fatalf("%s/%d: got %q=%q at %d: not one of its records, or twice", m.Topic, m.Partition, m.Key, m.Value, m.Offset)
			}
			seenNone[string(m.Value)] = true
			w = string(m.Value)
		}
		if string(m.Value) != w || m.Offset != int64(next[k]) || string(m.Key) != strconv.Itoa(m.Partition) {
			t.Fatalf("%s/%d: got %q=%q at %d, want %q at %d", m.Topic, m.Partition, m.Key, m.Value, m.Offset, w, next[k])
		}
		next[k]++
		toCommit = append(toCommit, m)
	}
	if err := r.CommitMessages(ctx, toCommit...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if st := r.Stats(); st.Messages != int64(want) {
		t.Errorf("reader stats: %d messages, want %d", st.Messages, want)
	}

	// The group is listed (while its member is alive) and its offsets are
	// committed.
	lg, err := client.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	found := false
	for _, g := range lg.Groups {
		if g.GroupID == group {
			found = true
			if g.ProtocolType != "consumer" || !upInfo.Brokers[int32(g.Coordinator)] {
				t.Errorf("list groups: %+v", g)
			}
		}
	}
	if lg.Error != nil || !found {
		t.Errorf("list groups: error %v, groups %+v; want %s", lg.Error, lg.Groups, group)
	}
	dg, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		t.Fatalf("describe groups: %v", err)
	}
	if len(dg.Groups) != 1 || dg.Groups[0].Error != nil || dg.Groups[0].GroupState != "Stable" || len(dg.Groups[0].Members) != 1 {
		t.Errorf("describe groups: %+v", dg.Groups)
	} else {
		assigned := 0
		for _, mt := range dg.Groups[0].Members[0].MemberAssignments.Topics {
			assigned += len(mt.Partitions)
		}
		if assigned != partsAll+partsNone {
			t.Errorf("member assigned %d partitions, want %d: %+v", assigned, partsAll+partsNone, dg.Groups[0].Members[0].MemberAssignments)
		}
	}
	closeReader()

	of, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{
		topicAll: {0, 1, 2, 3, 4, 5}, topicNone: {0, 1, 2},
	}})
	if err != nil || of.Error != nil {
		t.Fatalf("offset fetch: %v %v", err, of.Error)
	}
	for _, topic := range []string{topicAll, topicNone} {
		ps := of.Topics[topic]
		if len(ps) == 0 {
			t.Errorf("offset fetch: no offsets for %s", topic)
		}
		for _, p := range ps {
			if p.Error != nil || p.CommittedOffset != perPartition {
				t.Errorf("committed offset of %s/%d = %d (%v), want %d", topic, p.Partition, p.CommittedOffset, p.Error, perPartition)
			}
		}
	}

	checkDialsGatewayOnly(t, "kafka-go", env, dialer.Addrs())
	checkNoUpstreamDials(t, "kafka-go", env, dialer.Addrs())
}
