package testkit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// Upstream is the cluster a test's gateway fronts: the embedded kfake
// cluster (in-process, started with each gateway) or the test binary's
// real Apache Kafka cluster (kafka.Shared, started once and shared by
// every test of the binary).
type Upstream struct {
	// Name is the subtest's name: "kfake", or "kafka-4.4.0".
	Name string
	// Kafka is the real cluster; nil for kfake.
	Kafka *kafka.Cluster
}

// Real says whether this is a real Apache Kafka cluster.
func (u *Upstream) Real() bool { return u.Kafka != nil }

// upstreamNames are the upstreams EachUpstream runs: TOLLGATE_UPSTREAMS
// (a comma-separated list of "kfake" and "kafka"), both by default.
func upstreamNames() []string {
	v := os.Getenv("TOLLGATE_UPSTREAMS")
	if v == "" {
		return []string{"kfake", "kafka"}
	}
	return strings.Split(v, ",")
}

// RealOnly says whether this run leaves kfake out (TOLLGATE_UPSTREAMS=kafka:
// the pass of the suite against an older Kafka line), so that tests with no
// real-cluster row can skip themselves.
func RealOnly() bool {
	return !slices.Contains(upstreamNames(), "kfake")
}

// EachUpstream runs f once per upstream as a subtest named after it, so
// that a difference between kfake and the real broker shows as a failing
// row. The real cluster's row fails, not skips, when the cluster cannot
// start. Rows run one after the other; the caller may t.Parallel.
func EachUpstream(t *testing.T, f func(t *testing.T, up *Upstream)) {
	t.Helper()
	for _, name := range upstreamNames() {
		switch name {
		case "kfake":
			t.Run("kfake", func(t *testing.T) { f(t, &Upstream{Name: "kfake"}) })
		case "kafka":
			c, err := kafka.Shared()
			name := "kafka-" + kafka.DefaultVersion()
			if err == nil {
				name = "kafka-" + c.Version // an attached cluster's own
			}
			t.Run(name, func(t *testing.T) {
				if err != nil {
					t.Fatalf("the real Kafka cluster: %v", err)
				}
				f(t, &Upstream{Name: name, Kafka: c})
			})
		default:
			t.Fatalf("TOLLGATE_UPSTREAMS: unknown upstream %q (kfake, kafka)", name)
		}
	}
}

// Configure points cfg at the upstream: for the real cluster, its
// PLAINTEXT listener (the gateway connects as ANONYMOUS, a super user);
// kfake needs nothing (no upstream is the embedded cluster).
func (u *Upstream) Configure(cfg *app.Config) {
	if u.Real() {
		cfg.Upstream.Bootstrap = u.Kafka.Bootstrap(kafka.Plaintext)
	}
}

// Start runs Tollgate in front of the upstream (see testkit.Start).
func (u *Upstream) Start(t testing.TB, opts app.Options, edit ...func(*app.Config)) *Env {
	t.Helper()
	env := start(t, config(t, append([]func(*app.Config){u.Configure}, edit...)), opts, nil)
	env.Upstream = u
	return env
}

// Topic is a topic name of this test's own: base with a suffix from the
// test's name and this test binary's run, so that tests sharing the real
// cluster never meet in a topic (or a group: GroupID), nor a run in the
// topics an earlier run left on an attached cluster.
func (u *Upstream) Topic(t testing.TB, base string) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return base + "-" + hex.EncodeToString(sum[:3]) + runID
}

// runID tells this test binary's run from others on an attached cluster.
var runID = func() string {
	b := make([]byte, 2)
	rand.Read(b)
	return hex.EncodeToString(b)
}()

// GroupID is a consumer group id of this test's own (see Topic).
func (u *Upstream) GroupID(t testing.TB, base string) string { return u.Topic(t, base) }

// Addrs are the upstream brokers' addresses: env's embedded cluster's, or
// the real cluster's PLAINTEXT listeners.
func (e *Env) UpstreamAddrs() []string {
	if e.Upstream != nil && e.Upstream.Real() {
		return e.Upstream.Kafka.Bootstrap(kafka.Plaintext)
	}
	return e.App.DevCluster().Addrs()
}

// SpreadLeaders makes the partitions of topic led by more than one broker,
// partition p by broker p mod 3 where the upstream lets a test choose
// (kfake); a real cluster's assignment already spreads them, which it
// checks. It returns the leader of each partition once every broker says
// the same of it (WaitTopic).
func (e *Env) SpreadLeaders(t testing.TB, topic string, partitions int32) map[int32]int32 {
	t.Helper()
	if e.Upstream == nil || !e.Upstream.Real() {
		for p := range partitions {
			if err := e.App.DevCluster().MoveTopicPartition(topic, p, p%3); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e.waitLeaders(t, topic, partitions, min(3, int(partitions)))
}

// WaitTopic waits until every upstream broker knows topic with its
// partitions, each led, and all say the same of the leaders, which it
// returns. A KRaft broker applies the metadata log on its own: a topic
// just created can be unknown to its own leader while another broker
// already names it (what Kafka's own tests wait for with
// TestUtils.waitForPartitionMetadata).
func (e *Env) WaitTopic(t testing.TB, topic string, partitions int32) map[int32]int32 {
	t.Helper()
	return e.waitLeaders(t, topic, partitions, 1)
}

// waitLeaders is WaitTopic with at least spread distinct leaders.
func (e *Env) waitLeaders(t testing.TB, topic string, partitions int32, spread int) map[int32]int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.UpstreamAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		leaders, brokers, err := agreedLeaders(ctx, cl, adm, topic)
		if err == nil && int32(len(leaders)) == partitions && len(brokers) >= spread {
			return leaders
		}
		if ctx.Err() != nil {
			t.Fatalf("partitions of %s led by %v, want %d partitions led, every broker agreeing and %d brokers leading (%v)", topic, leaders, partitions, spread, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agreedLeaders asks every broker of the cluster for topic's leaders and
// returns them if all answer the same, with the set of leading brokers.
func agreedLeaders(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) (map[int32]int32, map[int32]bool, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	want := map[int32]int32{}
	brokers := map[int32]bool{}
	for _, p := range md.Topics[topic].Partitions {
		if p.Err == nil && p.Leader >= 0 {
			want[p.Partition] = p.Leader
			brokers[p.Leader] = true
		}
	}
	for _, b := range md.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return want, brokers, err
		}
		got := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 || want[p.Partition] != p.Leader {
					return want, brokers, fmt.Errorf("broker %d: partition %d led by %d (error %d), the first answer said %d", b.NodeID, p.Partition, p.Leader, p.ErrorCode, want[p.Partition])
				}
				got++
			}
		}
		if got != len(want) {
			return want, brokers, fmt.Errorf("broker %d knows %d partitions of %s, not %d", b.NodeID, got, topic, len(want))
		}
	}
	return want, brokers, nil
}

// String is the upstream's name.
func (u *Upstream) String() string { return fmt.Sprint(u.Name) }
