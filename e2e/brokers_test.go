package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// A broker added to or removed from the upstream cluster is reflected in
// the metadata the gateway serves, with a gateway address, and its port
// opens and closes without a restart.
func TestBrokerAddedAndRemoved(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, env, nil)
	dev := env.App.DevCluster()

	brokers := func() map[int32]string {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		var resp *kmsg.MetadataResponse
		var err error
		for try := 0; try < 20; try++ { // a connection to a removed broker fails; clients retry
			if resp, err = req.RequestWith(ctx, cl); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]string{}
		for _, b := range resp.Brokers {
			out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		return out
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if got := brokers(); len(got) != 3 {
		t.Fatalf("metadata lists %d brokers, want 3: %v", len(got), got)
	}
	id, upPort, err := dev.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	eventually("the new broker in metadata", func() bool {
		addr = brokers()[id]
		return addr != ""
	})
	if !env.GatewayAddrs()[addr] {
		t.Fatalf("new broker %d advertised as %s, not a gateway address", id, addr)
	}
	if _, p, _ := net.SplitHostPort(addr); p == strconv.Itoa(upPort) {
		t.Fatalf("new broker advertised with its upstream port %d", upPort)
	}
	// The new port really reaches node id: ask it directly.
	direct, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	// (kfake's fresh listener occasionally refuses a connection in its
	// first milliseconds; the gateway then closes the client connection
	// with upstream_unreachable and the client retries, as here.)
	eventually("an answer through the new broker port", func() bool {
		_, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, direct)
		return err == nil
	})

	if err := dev.RemoveNode(id); err != nil {
		t.Fatal(err)
	}
	eventually("the removed broker gone from metadata", func() bool {
		_, ok := brokers()[id]
		return !ok
	})
	eventually("the removed broker's gateway port closed", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	// The rest of the cluster keeps working.
	p := newClient(t, env, nil, kgo.DefaultProduceTopic("after-removal"), kgo.AllowAutoTopicCreation())
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after removal: %v", err)
	}
}

// An upstream broker that dies closes only the connections that reach it;
// clients recover through fresh metadata and the gateway keeps running.
// The death is the gateway's dialer's (testkit.FaultDialer cuts every
// connection to the broker's address and refuses new ones until revived),
// so it is the same on kfake and on the real cluster, whose broker lives on.
func TestUpstreamBrokerDies(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, upstreamBrokerDies)
}

func upstreamBrokerDies(t *testing.T, up *testkit.Upstream) {
	faults := &testkit.FaultDialer{}
	env := up.Start(t, app.Options{ProxyOpts: []proxy.Option{proxy.WithDialFunc(faults.DialContext)}})
	ctx := ctxT(t, 60*time.Second)
	topic := up.Topic(t, "resilient")
	freshTopics(t, up, topic)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	leaders := env.SpreadLeaders(t, topic, 3)
	// A second client holds a connection to every broker.
	other := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		if err := other.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	node := leaders[1]
	victim := upstreamAddrOf(t, ctx, env, node)
	if n := faults.Kill(victim); n == 0 {
		t.Fatalf("no gateway connection reached node %d (%s)", node, victim)
	}
	if !env.Logs.WaitFor(fmt.Sprintf("node=%d reason=upstream_closed", node), 5*time.Second) {
		t.Fatalf("no client connection to node %d was closed", node)
	}
	// Connections to the other brokers keep working meanwhile.
	for _, p := range []int32{0, 2} {
		if err := other.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("during")}).FirstErr(); err != nil {
			t.Fatalf("partition %d (a live broker) failed while node %d was down: %v", p, node, err)
		}
	}
	for _, p := range []int32{0, 2} {
		if strings.Contains(env.Logs.String(), fmt.Sprintf("node=%d reason=upstream_closed", leaders[p])) {
			t.Fatalf("connections to live broker %d were closed", leaders[p])
		}
	}
	// The broker comes back; the client recovers through fresh metadata.
	faults.Revive(victim)
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce to node %d after it came back: %v", node, err)
	}
}

// upstreamAddrOf is the address the gateway dials for upstream broker id.
func upstreamAddrOf(t *testing.T, ctx context.Context, env *testkit.Env, id int32) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	t.Fatalf("no upstream broker %d", id)
	return ""
}
