package e2e

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/diskguard"
	"github.com/tollgate/tollgate/internal/testkit"
)

// throttles records the throttles the brokers' answers carried
// (KIP-219), as franz-go hears them.
type throttles struct {
	mu  sync.Mutex
	max time.Duration
	n   int
}

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.max = max(h.max, d)
}

func (h *throttles) get() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.max
}

// Disk-full protection (issue 25 point 2). Against the real Kafka, whose
// brokers report their volumes (DescribeLogDirs, KIP-827): with
// storage.min_free_ratio above what any disk here has free, the cluster is
// low on disk within a check interval — every Produce is held and its
// answer carries storage.hold as its throttle, the records still
// acknowledged — and a reload that lifts the bound lets Produce flow at
// once. kfake reports no volume sizes: nothing to judge, so nothing is
// held, and the check does not fail.
func TestStorageProtection(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, storageProtection)
}

func storageProtection(t *testing.T, up *testkit.Upstream) {
	const hold = 2 * time.Second
	on := diskguard.Config{MinFreeRatio: 0.99999, CheckInterval: time.Second, Hold: hold}
	file := func(c diskguard.Config) []byte {
		s := "listeners:\n  - name: PLAINTEXT\n    bootstrap: 127.0.0.1:0\n"
		if c.On() {
			s += fmt.Sprintf("storage:\n  min_free_ratio: %v\n  check_interval: %s\n  hold: %s\n", c.MinFreeRatio, c.CheckInterval, c.Hold)
		}
		return []byte(s)
	}
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeFileAtomic(t, path, file(on))
	env := up.Start(t, app.Options{ConfigPath: path, WatchInterval: time.Hour}, func(c *app.Config) { c.Storage = on })
	ctx := ctxT(t, 90*time.Second)
	topic := up.Topic(t, "disk")
	if _, err := kadm.NewClient(newClient(t, env, nil)).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	env.WaitTopic(t, topic, 1)
	var th throttles
	prod := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.WithHooks(&th))

	if !up.Real() {
		// kfake: no sizes, so no judgement, and no failure.
		time.Sleep(2 * time.Second)
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if n, m := th.get(); n != 0 || scrapeMetricOr(t, env, "tollgate_storage_low", -1) != 0 || scrapeMetricOr(t, env, "tollgate_storage_probe_failures_total", -1) != 0 {
			t.Errorf("kfake: %d throttles (max %v), low %v, failures %v", n, m, scrapeMetricOr(t, env, "tollgate_storage_low", -1),
				scrapeMetricOr(t, env, "tollgate_storage_probe_failures_total", -1))
		}
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for scrapeMetricOr(t, env, "tollgate_storage_low", 0) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not low on disk after 15 s: failures %v", scrapeMetricOr(t, env, "tollgate_storage_probe_failures_total", -1))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range up.Kafka.Nodes() {
		for _, m := range []string{"tollgate_storage_total_bytes", "tollgate_storage_usable_bytes"} {
			if len(metricLines(t, env, fmt.Sprintf(`%s{broker="%d",`, m, n.ID))) == 0 {
				t.Errorf("no %s for broker %d", m, n.ID)
			}
		}
	}
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("a Produce while low on disk: %v (held and throttled, never refused)", err)
		}
	}
	if n, m := th.get(); n == 0 || m < hold {
		t.Fatalf("while low on disk: %d throttles, the largest %v; want storage.hold %v", n, m, hold)
	}

	// The bound lifted by a reload: Produce flows at once.
	writeFileAtomic(t, path, file(diskguard.Config{}))
	if err := env.App.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := scrapeMetricOr(t, env, "tollgate_storage_low", -1); v != 0 {
		t.Fatalf("tollgate_storage_low %v after the reload", v)
	}
	time.Sleep(hold) // the last answer's throttle
	before, _ := th.get()
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := th.get(); after != before {
		t.Errorf("%d throttles after the bound was lifted", after-before)
	}
}
