package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Sarama's metrics (rcrowley/go-metrics) start a global meter goroutine
// that never stops, which TestMain's leak check would report. Disabling
// them is sarama's documented switch; nothing else here uses go-metrics.
func init() { metrics.UseNilMetrics = true }

// saramaDialer adapts testkit.Dialer to the proxy.Dialer sarama takes in
// Net.Proxy, so that every connection sarama opens is recorded.
type saramaDialer struct {
	d       *testkit.Dialer
	timeout time.Duration
}

func (s saramaDialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	return s.d.DialContext(ctx, network, addr)
}

func saramaConfig(v sarama.KafkaVersion, d *testkit.Dialer) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "tollgate-e2e-sarama"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.Net.WriteTimeout = 10 * time.Second
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = saramaDialer{d: d, timeout: 5 * time.Second}
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Admin.Retry.Backoff = 50 * time.Millisecond
	cfg.Admin.Timeout = 10 * time.Second
	return cfg
}

// Sarama, at the newest protocol it knows and at an old one (2.1: Produce
// v7, Fetch v10, Metadata v7, JoinGroup v3...), produces to a topic whose
// partitions are led by all three brokers, consumes everything back in a
// consumer group in order per partition, and administers topics, all
// through the gateway and only ever dialing gateway addresses, on kfake and
// on the real Kafka.
func TestSarama(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		for _, tc := range []struct {
			name string
			v    sarama.KafkaVersion
		}{
			{"V2_1_0_0", sarama.V2_1_0_0},
			{"Max_" + sarama.MaxVersion.String(), sarama.MaxVersion},
		} {
			t.Run(tc.name, func(t *testing.T) { testSarama(t, up, tc.v) })
		}
	})
}

func testSarama(t *testing.T, up *testkit.Upstream, v sarama.KafkaVersion) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 90*time.Second)
	dialer := &testkit.Dialer{}
	topic, group := up.Topic(t, "sarama-orders"), up.GroupID(t, "sarama-g1")
	const partitions, perPartition = 6, 50
	upInfo := upstreamMetadata(t, env)

	client, err := sarama.NewClient([]string{env.Bootstrap}, saramaConfig(v, dialer))
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatalf("cluster admin: %v", err)
	}

	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: -1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	upLeaders := env.SpreadLeaders(t, topic, partitions)
	// The client must learn the leaders: refresh until every partition
	// has the upstream's leader, and three distinct brokers lead.
	leaders := map[int32]bool{}
	settled := false
	for i := 0; i < 100 && !settled; i++ {
		if err := client.RefreshMetadata(topic); err != nil {
			t.Fatalf("refresh metadata: %v", err)
		}
		clear(leaders)
		settled = true
		for p := int32(0); p < partitions; p++ {
			b, err := client.Leader(topic, p)
			if err != nil {
				t.Fatalf("leader of %d: %v", p, err)
			}
			leaders[b.ID()] = true
			settled = settled && b.ID() == upLeaders[p]
		}
		settled = settled && len(leaders) == 3
		if !settled {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !settled {
		t.Fatalf("partitions led by %v, want 3 brokers, the upstream's leaders %v", leaders, upLeaders)
	}

	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatalf("sync producer: %v", err)
	}
	var msgs []*sarama.ProducerMessage
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < partitions; p++ {
			msgs = append(msgs, &sarama.ProducerMessage{
				Topic:     topic,
				Partition: p,
				Key:       sarama.StringEncoder(fmt.Sprintf("k%d", p)),
				Value:     sarama.StringEncoder(fmt.Sprintf("%d-%d", p, i)),
			})
		}
	}
	// Half one by one (offsets must be consecutive per partition), half in
	// one batch.
	half := len(msgs) / 2
	nextOff := map[int32]int64{}
	for _, m := range msgs[:half] {
		p, off, err := prod.SendMessage(m)
		if err != nil {
			t.Fatalf("send %v: %v", m.Value, err)
		}
		if p != m.Partition || off != nextOff[p] {
			t.Fatalf("record %v went to %d@%d, want %d@%d", m.Value, p, off, m.Partition, nextOff[p])
		}
		nextOff[p]++
	}
	if err := prod.SendMessages(msgs[half:]); err != nil {
		t.Fatalf("send batch: %v", err)
	}
	if err := prod.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
	for p := int32(0); p < partitions; p++ {
		hw, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("offset of %d: %v", p, err)
		}
		if hw != perPartition {
			t.Errorf("partition %d high watermark %d, want %d", p, hw, perPartition)
		}
	}

	cg, err := sarama.NewConsumerGroupFromClient(group, client)
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	h := &saramaHandler{want: partitions * perPartition, next: map[int32]int{}, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for i := 0; i < 20 && cctx.Err() == nil; i++ {
			err := cg.Consume(cctx, []string{topic}, h)
			if err != nil && cctx.Err() == nil && !coordinatorMoving(err) {
				errc <- err
				return
			}
			if err != nil && cctx.Err() == nil {
				// Sarama gives up after its few rebalance retries; an
				// application calls Consume again, as here. A fresh
				// cluster's group coordinator is still loading its
				// __consumer_offsets partition (Kafka 3.9: seconds).
				t.Logf("consume: %v; again", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	go func() {
		for err := range cg.Errors() {
			t.Logf("consumer group error: %v", err)
		}
	}()
	select {
	case <-h.done:
	case err := <-errc:
		t.Fatalf("consume: %v (consumed %d)", err, h.count())
	case <-ctx.Done():
		t.Fatalf("consumed %d of %d: %v", h.count(), partitions*perPartition, ctx.Err())
	}
	if err := h.firstErr(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for range errc {
	}
	if err := cg.Close(); err != nil { // commits the marked offsets
		t.Fatalf("close consumer group: %v", err)
	}
	offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3, 4, 5}})
	if err != nil {
		t.Fatalf("list group offsets: %v", err)
	}
	for p := int32(0); p < partitions; p++ {
		b := offs.GetBlock(topic, p)
		if b == nil || b.Offset != perPartition {
			t.Errorf("committed offset of partition %d = %+v, want %d", p, b, perPartition)
		}
	}
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if groups[group] != "consumer" {
		t.Errorf("list groups = %v, want %s of type consumer", groups, group)
	}

	saramaAdmin(t, env, up, admin, upInfo, topic)

	gw := env.GatewayAddrs()
	if brokers := client.Brokers(); len(brokers) != 3 {
		t.Errorf("sarama knows %d brokers, want 3", len(brokers))
	}
	for _, b := range client.Brokers() {
		if !gw[b.Addr()] {
			t.Errorf("sarama broker %d at %s is not a gateway address (gateway: %v)", b.ID(), b.Addr(), keys(gw))
		}
	}
	checkDialsGatewayOnly(t, "sarama", env, dialer.Addrs())
	checkNoUpstreamDials(t, "sarama", env, dialer.Addrs())
}

// saramaAdmin creates, describes, lists and deletes a topic; ordersTopic
// is the test's other topic, which the listing must show too.
func saramaAdmin(t *testing.T, env *testkit.Env, up *testkit.Upstream, admin sarama.ClusterAdmin, upInfo upstreamInfo, ordersTopic string) {
	t.Helper()
	topic := up.Topic(t, "sarama-admin")
	// The replication factor the upstream gives -1 (3 on both: kfake's
	// brokers, the real cluster's default.replication.factor).
	const replicas = 3
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions:     4,
		ReplicationFactor: -1,
		ConfigEntries:     map[string]*string{"retention.ms": kmsg.StringPtr("3600000")},
	}, false); err != nil {
		t.Fatalf("admin create topic: %v", err)
	}
	err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: -1}, false)
	if !isKErr(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("creating %s twice: err %v, want %v", topic, err, sarama.ErrTopicAlreadyExists)
	}
	env.WaitTopic(t, topic, int32(4))
	md, err := admin.DescribeTopics([]string{topic})
	if err != nil {
		t.Fatalf("describe topics: %v", err)
	}
	if len(md) != 1 || md[0].Name != topic || md[0].Err != sarama.ErrNoError || len(md[0].Partitions) != 4 {
		t.Fatalf("describe topics = %s", describeSaramaTopics(md))
	}
	for _, p := range md[0].Partitions {
		if !upInfo.Brokers[p.Leader] || len(p.Replicas) != replicas {
			t.Errorf("partition %d: leader %d replicas %v", p.ID, p.Leader, p.Replicas)
		}
	}
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if d, ok := topics[topic]; !ok || d.NumPartitions != 4 || d.ReplicationFactor != replicas {
		t.Errorf("list topics: %s = %+v (present %v)", topic, d, ok)
	}
	if _, ok := topics[ordersTopic]; !ok {
		t.Errorf("list topics lacks %s: %v", ordersTopic, topics)
	}
	brokers, ctrl, err := admin.DescribeCluster()
	if err != nil {
		t.Fatalf("describe cluster: %v", err)
	}
	gw := env.GatewayAddrs()
	if len(brokers) != 3 || !upInfo.Brokers[ctrl] {
		t.Errorf("describe cluster: %d brokers, controller %d", len(brokers), ctrl)
	}
	for _, b := range brokers {
		if !upInfo.Brokers[b.ID()] {
			t.Errorf("describe cluster: broker %d is not an upstream broker (%v)", b.ID(), upInfo.Brokers)
		}
		if !gw[b.Addr()] {
			t.Errorf("describe cluster: broker %d at %s is not a gateway address", b.ID(), b.Addr())
		}
	}

	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	// A real cluster's deletion shows in the metadata of every broker
	// after a while; bounded at 15 s.
	gone := false
	for deadline := time.Now().Add(15 * time.Second); !gone && time.Now().Before(deadline); {
		topics, err := admin.ListTopics()
		if err != nil {
			t.Fatalf("list topics after delete: %v", err)
		}
		_, present := topics[topic]
		gone = !present
		if !gone {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !gone {
		t.Errorf("%s still listed after delete", topic)
	}
}

func describeSaramaTopics(md []*sarama.TopicMetadata) string {
	s := ""
	for _, m := range md {
		s += fmt.Sprintf("{%s err=%v partitions=%d} ", m.Name, m.Err, len(m.Partitions))
	}
	return s
}

func isKErr(err error, want sarama.KError) bool {
	if err == nil {
		return false
	}
	if te, ok := err.(*sarama.TopicError); ok {
		return te.Err == want
	}
	return err == want || err.Error() == want.Error()
}

// saramaHandler checks order per partition and marks every message.
type saramaHandler struct {
	want int
	mu   sync.Mutex
	next map[int32]int
	n    int
	err  error
	once sync.Once
	done chan struct{}
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			want := fmt.Sprintf("%d-%d", m.Partition, h.next[m.Partition])
			wantKey := "k" + strconv.Itoa(int(m.Partition))
			if h.err == nil && (string(m.Value) != want || string(m.Key) != wantKey || m.Offset != int64(h.next[m.Partition])) {
				h.err = fmt.Errorf("partition %d offset %d: got %q=%q, want %q=%q at offset %d",
					m.Partition, m.Offset, m.Key, m.Value, wantKey, want, h.next[m.Partition])
			}
			h.next[m.Partition]++
			h.n++
			if h.n >= h.want || h.err != nil {
				h.once.Do(func() { close(h.done) })
			}
			h.mu.Unlock()
			s.MarkMessage(m, "")
		}
	}
}

func (h *saramaHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func (h *saramaHandler) firstErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// coordinatorMoving says whether err is a group coordinator's passing
// state: not (yet) the coordinator, or loading it.
func coordinatorMoving(err error) bool {
	return errors.Is(err, sarama.ErrNotCoordinatorForConsumer) || errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) ||
		errors.Is(err, sarama.ErrOffsetsLoadInProgress)
}
