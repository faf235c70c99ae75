package cluster

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/store"
)

// The shared log against a real Kafka protocol peer: kfake, over sockets,
// with franz-go producing and consuming as in production.

func kcluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// node is one instance's store on the shared log.
type node struct {
	st     *store.Store
	lg     *Log
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t *testing.T, seeds []string, dir string, opts ...kgo.Opt) *node {
	t.Helper()
	return startNodeWith(t, seeds, dir, nil, opts...)
}

// startNodeWith starts a node whose log config edit changes (nil: none).
func startNodeWith(t *testing.T, seeds []string, dir string, edit func(*LogConfig), opts ...kgo.Opt) *node {
	t.Helper()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := LogConfig{Opts: append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...), Topic: "_tollgate-t-config", Cache: st,
		Timeout: 5 * time.Second, Logger: quiet()}
	if edit != nil {
		edit(&cfg)
	}
	lg, err := NewLog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{st: st, lg: lg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		lg.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !lg.Status().Ready {
		if time.Now().After(deadline) {
			t.Fatalf("log not ready: %+v", lg.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	st.SetLog(lg)
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	n.cancel()
	n.lg.Close()
	<-n.done
	n.st.Close()
}

var alice = store.MustEntity(store.Named(store.TypeUser, "alice"))

func quotaOf(t *testing.T, st *store.Store, key string) (float64, bool) {
	t.Helper()
	v, err := st.ClientQuota(alice)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := v[key]
	return f, ok
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLogSharesState: a change through one instance is in its own store
// when the call returns (read-your-writes) and reaches the other's; the
// topic is created compacted with the replication the brokers allow.
func TestLogSharesState(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	a := startNode(t, c.ListenAddrs(), t.TempDir())
	b := startNode(t, c.ListenAddrs(), t.TempDir())
	if err := a.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "producer_byte_rate", Value: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	if v, ok := quotaOf(t, a.st, "producer_byte_rate"); !ok || v != 1000 {
		t.Fatalf("not read back on return: %v %v", v, ok)
	}
	eventually(t, "b applies a's change", func() bool { v, _ := quotaOf(t, b.st, "producer_byte_rate"); return v == 1000 })
	if err := b.st.PutAPIKeyFunc(store.APIKey{ID: "k1", Identity: "User:svc", Hash: []byte{1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a sees b's API key", func() bool { _, ok, _ := a.st.APIKey("k1"); return ok })

	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	defer cl.Close()
	rc, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), "_tollgate-t-config")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := rc.On("_tollgate-t-config", nil)
	got := map[string]string{}
	for _, kv := range cfg.Configs {
		if kv.Value != nil {
			got[kv.Key] = *kv.Value
		}
	}
	if got["cleanup.policy"] != "compact" || got["min.insync.replicas"] != "1" {
		t.Fatalf("topic configs: %v", got)
	}
}

// TestLogConcurrentAlterationsConverge: two instances altering the same
// key at once end with the same value, the topic's last.
func TestLogConcurrentAlterationsConverge(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	a := startNode(t, c.ListenAddrs(), t.TempDir())
	b := startNode(t, c.ListenAddrs(), t.TempDir())
	var wg sync.WaitGroup
	for i, n := range []*node{a, b} {
		wg.Go(func() {
			for j := range 20 {
				v := float64(1000*(i+1) + j)
				if err := n.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "producer_byte_rate", Value: v}}}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// Both catch up to the end of the topic and agree.
	for _, n := range []*node{a, b} {
		if err := n.lg.CatchUp(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	va, _ := quotaOf(t, a.st, "producer_byte_rate")
	vb, _ := quotaOf(t, b.st, "producer_byte_rate")
	if va != vb || (va != 1019 && va != 2019) {
		t.Fatalf("diverged or lost the last write: a=%v b=%v", va, vb)
	}
}

// TestLogSeedAndRestart: the first instance brings the state it had alone;
// an instance started later (or restarted on its old data_dir) reads the
// whole topic, including a deletion made while it was down.
func TestLogSeedAndRestart(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	dirA := t.TempDir()
	st, err := store.Open(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "consumer_byte_rate", Value: 7}}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	a := startNode(t, c.ListenAddrs(), dirA)
	dirB := t.TempDir()
	b := startNode(t, c.ListenAddrs(), dirB)
	if v, ok := quotaOf(t, b.st, "consumer_byte_rate"); !ok || v != 7 {
		t.Fatalf("b did not get a's seed: %v %v", v, ok)
	}
	b.stop()
	if err := a.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "consumer_byte_rate", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}
	b = startNode(t, c.ListenAddrs(), dirB)
	if _, ok := quotaOf(t, b.st, "consumer_byte_rate"); ok {
		t.Fatal("b kept a quota deleted while it was down")
	}
}

// TestLogUnreachable: with the upstream gone, an alteration fails with an
// error that says so and changes nothing; the store keeps serving the last
// state; once the upstream is back, alterations work again.
func TestLogUnreachable(t *testing.T) {
	t.Parallel()
	c := kcluster(t)
	// A proxy between the instance and the cluster that the test can cut.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	cut := false
	var conns []net.Conn
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if cut {
				mu.Unlock()
				cc.Close()
				continue
			}
			bc, err := net.Dial("tcp", c.ListenAddrs()[0])
			if err != nil {
				mu.Unlock()
				cc.Close()
				continue
			}
			conns = append(conns, cc, bc)
			mu.Unlock()
			go func() { io.Copy(bc, cc); bc.Close() }()
			go func() { io.Copy(cc, bc); cc.Close() }()
		}
	}()
	// Every broker address the client learns goes through the proxy.
	dial := kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, ln.Addr().String())
	})
	a := startNode(t, []string{ln.Addr().String()}, t.TempDir(), dial)
	if err := a.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "producer_byte_rate", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	cut = true
	for _, cc := range conns {
		cc.Close()
	}
	mu.Unlock()
	err = a.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "producer_byte_rate", Value: 2}}}})
	if err == nil {
		t.Fatal("alteration acknowledged with the upstream unreachable")
	}
	t.Logf("refused: %v", err)
	if v, _ := quotaOf(t, a.st, "producer_byte_rate"); v != 1 {
		t.Fatalf("half applied: %v", v)
	}
	mu.Lock()
	cut = false
	mu.Unlock()
	eventually(t, "alterations work again", func() bool {
		return a.st.AlterClientQuotas([]store.EntityChange{{Entity: alice, Ops: []store.Op{{Key: "producer_byte_rate", Value: 3}}}}) == nil
	})
	if v, _ := quotaOf(t, a.st, "producer_byte_rate"); v != 3 {
		t.Fatalf("after reconnecting: %v", v)
	}
}
