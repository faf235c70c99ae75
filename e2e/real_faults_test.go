package e2e

import (
	"context"
	"crypto/rand"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// Broker faults on the real cluster, under load through Tollgate, with a
// producer quota on the client: a rolling restart of all three brokers,
// the first killed with SIGKILL, the others stopped with SIGTERM (Kafka's
// controlled shutdown), and one broker stopped with SIGSTOP for longer than the
// gateway's upstream request timeout and the controller's session
// timeout (it is fenced; its leaderships move). Producers and consumers
// recover through the gateway without help (the group coordinator moves
// with the restarts: NOT_COORDINATOR passes through), every acknowledged record is
// consumed afterwards, and the quota holds: the achieved rate before the
// faults and after them is Q.
//
// The real cluster only (kfake has no processes to kill: its faults are
// faults_test.go's, in a bubble). On a cluster of its own, of the shared
// one's version, so that it runs beside the other tests (its brokers
// stopping would fail theirs).
func TestRealBrokerFaults(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		if !up.Real() {
			t.Log("kfake: no broker processes; its faults are in faults_test.go")
			return
		}
		c, err := kafka.Start(kafka.Config{Version: up.Kafka.Version})
		if err != nil {
			t.Fatalf("a Kafka cluster of the test's own: %v", err)
		}
		defer c.Stop()
		realBrokerFaults(t, &testkit.Upstream{Name: up.Name, Kafka: c})
	})
}

func realBrokerFaults(t *testing.T, up *testkit.Upstream) {
	const q = 256 << 10 // producer_byte_rate, bytes/s
	clientID := "faults-producer"
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Upstream.RequestTimeout = 5 * time.Second
		c.Quotas = []app.QuotaEntry{{ClientID: &clientID, ProducerByteRate: ptrF(q)}}
	})
	ctx := ctxT(t, 8*time.Minute)
	topic, group := up.Topic(t, "faults"), up.GroupID(t, "faults")
	adm := kadm.NewClient(newClient(t, env, nil))
	if _, err := adm.CreateTopic(ctx, 6, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, up.Kafka, topic)

	p := startAckedProducer(t, ctx, env, topic, clientID)
	c := startGroupConsumer(t, ctx, env, topic, group)

	// Past the start-up burst (a fresh bucket lets 10 s of Q through; a
	// cold broker may take longer than that to use it).
	waitBucketSpent(t, ctx, env, clientID)
	before := p.rate(ctx, 20*time.Second)
	t.Logf("before the faults: %.3f × Q", before/q)

	// A rolling restart of all three, one at a time, each back in sync
	// before the next: the node leading most partitions first, killed
	// with SIGKILL; the others stopped with SIGTERM (Kafka's controlled
	// shutdown moves their leaderships first).
	// Every node is restarted, so the group's coordinator moves too: the
	// consumer meets NOT_COORDINATOR and finds the new one through the
	// gateway's FindCoordinator.
	kadm.NewClient(newClient(t, env, nil)).FindGroupCoordinators(ctx, group).Each(func(c kadm.FindCoordinatorResponse) {
		t.Logf("group %s coordinated by node %d (err %v)", group, c.NodeID, c.Err)
	})
	victim := leaderOfMost(t, ctx, up.Kafka, topic)
	order := []int32{victim}
	for _, n := range up.Kafka.Nodes() {
		if n.ID != victim {
			order = append(order, n.ID)
		}
	}
	for i, id := range order {
		if i == 0 {
			t.Logf("rolling restart: SIGKILL node %d", id)
			if err := up.Kafka.Kill(id); err != nil {
				t.Fatal(err)
			}
			sleepCtx(ctx, 3*time.Second) // down, not only restarting
		} else {
			t.Logf("rolling restart: SIGTERM node %d", id)
			if err := up.Kafka.Terminate(id, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if err := up.Kafka.Restart(id); err != nil {
			t.Fatal(err)
		}
		waitFullISR(t, ctx, up.Kafka, topic)
	}

	stalled := leaderOfMost(t, ctx, up.Kafka, topic)
	t.Logf("SIGSTOP node %d for 15 s", stalled)
	if err := up.Kafka.Pause(stalled); err != nil {
		t.Fatal(err)
	}
	sleepCtx(ctx, 15*time.Second)
	if err := up.Kafka.Resume(stalled); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, up.Kafka, topic)

	// The bucket saved what it could not send while brokers were away: let
	// that drain before measuring again.
	waitBucketSpent(t, ctx, env, clientID)
	after := p.rate(ctx, 20*time.Second)
	t.Logf("after the faults: %.3f × Q", after/q)
	acked := p.stop()
	if ctx.Err() != nil {
		t.Fatal("the faults outlasted the test's time")
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"before", before}, {"after", after}} {
		// 20 s windows of a token bucket at Q: acknowledgements arrive a
		// batch at a time, so one batch of slack each side.
		if r.v < 0.85*q || r.v > 1.15*q {
			t.Errorf("achieved rate %s the faults: %.3f × Q, want 1 ± 0.15", r.name, r.v/q)
		}
	}
	if p.failed > 0 {
		// Those still in flight when the producer stopped are cancelled.
		t.Logf("%d records failed (not acknowledged); they are not required", p.failed)
	}
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	missing := c.waitAll(ctx, acked, 90*time.Second)
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged records never consumed (e.g. %v)", len(missing), len(acked), missing[:min(5, len(missing))])
	}
	t.Logf("%d records acknowledged, every one consumed through the gateway", len(acked))
}

// ackedProducer produces numbered records through the gateway as fast as
// its quota lets it and remembers each acknowledged one.
type ackedProducer struct {
	mu      sync.Mutex
	acked   map[string]bool
	bytes   int64
	failed  int
	cancel  context.CancelFunc
	done    chan struct{}
	cl      *kgo.Client
	recSize int
}

func startAckedProducer(t *testing.T, ctx context.Context, env *testkit.Env, topic, clientID string) *ackedProducer {
	p := &ackedProducer{acked: map[string]bool{}, done: make(chan struct{}), recSize: 1024}
	p.cl = newClient(t, env, nil, kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1<<30), kgo.MaxBufferedRecords(256),
		kgo.ProducerLinger(5*time.Millisecond),
		// The quota counts the bytes on the wire, as Kafka's does:
		// uncompressed, random values make them the bytes acknowledged.
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	pctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		for i := 0; pctx.Err() == nil; i++ {
			key := strconv.Itoa(i)
			v := make([]byte, p.recSize)
			rand.Read(v)
			r := &kgo.Record{Key: []byte(key), Value: v}
			p.cl.Produce(pctx, r, func(r *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.failed++
					return
				}
				p.acked[string(r.Key)] = true
				p.bytes += int64(len(r.Key) + len(r.Value))
			})
		}
	}()
	return p
}

// rate is the acknowledged bytes per second over the next d.
func (p *ackedProducer) rate(ctx context.Context, d time.Duration) float64 {
	p.mu.Lock()
	b0 := p.bytes
	p.mu.Unlock()
	start := time.Now()
	sleepCtx(ctx, d)
	p.mu.Lock()
	b1 := p.bytes
	p.mu.Unlock()
	return float64(b1-b0) / time.Since(start).Seconds()
}

// stop stops producing, waits for what is in flight, and returns the
// acknowledged keys.
func (p *ackedProducer) stop() []string {
	p.cancel()
	<-p.done
	fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p.cl.Flush(fctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.acked))
}

// groupConsumer consumes topic in a group through the gateway for the
// whole test, remembering every key it saw.
type groupConsumer struct {
	mu   sync.Mutex
	seen map[string]bool
}

func startGroupConsumer(t *testing.T, ctx context.Context, env *testkit.Env, topic, group string) *groupConsumer {
	c := &groupConsumer{seen: map[string]bool{}}
	cl := newClient(t, env, nil, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			fs := cl.PollFetches(cctx)
			fs.EachRecord(func(r *kgo.Record) {
				c.mu.Lock()
				c.seen[string(r.Key)] = true
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// waitAll waits (bounded) until every key was consumed and returns those
// that were not.
func (c *groupConsumer) waitAll(ctx context.Context, keys []string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var missing []string
		c.mu.Lock()
		for _, k := range keys {
			if !c.seen[k] {
				missing = append(missing, k)
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return missing
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitFullISR waits until every partition of topic has all three replicas
// in sync and a leader (asked of the cluster directly).
func waitFullISR(t *testing.T, ctx context.Context, c *kafka.Cluster, topic string) {
	t.Helper()
	adm := kadm.NewClient(directClient(t, c))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		md, err := adm.Metadata(ctx, topic)
		ok := err == nil && len(md.Topics[topic].Partitions) > 0
		if ok {
			for _, p := range md.Topics[topic].Partitions {
				ok = ok && len(p.ISR) == 3 && p.Leader >= 0
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: replicas not all in sync within 2m (%v)", topic, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// leaderOfMost is the node leading most partitions of topic.
func leaderOfMost(t *testing.T, ctx context.Context, c *kafka.Cluster, topic string) int32 {
	t.Helper()
	md, err := kadm.NewClient(directClient(t, c)).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	n := map[int32]int{}
	best := int32(-1)
	for _, p := range md.Topics[topic].Partitions {
		n[p.Leader]++
		if best < 0 || n[p.Leader] > n[best] {
			best = p.Leader
		}
	}
	return best
}

// directClient is a client of the real cluster itself, not through
// Tollgate (PLAINTEXT: ANONYMOUS, a super user), closed with the test.
func directClient(t *testing.T, c *kafka.Cluster) *kgo.Client {
	t.Helper()
	return franzClient(t, kgo.SeedBrokers(c.Bootstrap(kafka.Plaintext)...))
}

// waitBucketSpent waits (bounded) until the client-id's producer bucket
// has spent what it saved: its responses are throttled again and again (a
// throttle means the bucket is in debt). From then on it gets Q.
func waitBucketSpent(t *testing.T, ctx context.Context, env *testkit.Env, clientID string) {
	t.Helper()
	throttles := func() int64 {
		for _, u := range env.App.Engine().Usage(time.Now()) {
			if u.Key == model.ProducerByteRate && u.ClientID == clientID {
				return u.Throttles
			}
		}
		return 0
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n0 := throttles()
		sleepCtx(ctx, 2*time.Second)
		if throttles()-n0 >= 10 {
			return
		}
	}
	t.Fatalf("the producer of %s was not being throttled within 90 s", clientID)
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
