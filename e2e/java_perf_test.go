package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// The Java client's throttle metrics under Tollgate's quotas (issue 21
// point 3): Kafka's own kafka-producer-perf-test and
// kafka-consumer-perf-test (ProducerPerformance, ConsumerPerformance)
// through the gateway, one client-id under a producer and a consumer
// quota, over partitions led by three brokers. The Java client reads the
// throttle from Tollgate's answers (KIP-219) as from a broker's: its
// produce-throttle-time and fetch-throttle-time are not zero, and Tollgate
// counts the throttles it gave that client-id. The rates the tools reach,
// through Tollgate and straight to Kafka under Kafka's own quota, are
// benchmarks (BENCHMARKS.md, bench/realquota), not asserted here.
func TestJavaPerfToolsThrottled(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, javaPerfToolsThrottled)
}

func javaPerfToolsThrottled(t *testing.T, up *testkit.Upstream) {
	const q = 256 << 10
	id := up.Topic(t, "perf")
	rate, burst := float64(q), 0.0
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = append(c.Quotas, app.QuotaEntry{ClientID: &id, ProducerByteRate: &rate, ConsumerByteRate: &rate, BurstSeconds: &burst})
	})
	ctx := ctxT(t, 3*time.Minute)
	topic := id
	if _, err := kadm.NewClient(newClient(t, env, nil)).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	env.SpreadLeaders(t, topic, 3)
	env.WaitTopic(t, topic, 3)

	// 1.5 MiB at 256 KiB/s: about 6 s of quota, sent as fast as it goes.
	const records, size = 1536, 1024
	prod := runJava(t, up, 2*time.Minute, "", "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(size), "--throughput", "-1",
		"--print-metrics", "--producer-props", "bootstrap.servers="+env.Bootstrap, "client.id="+id, "acks=1", "linger.ms=5")
	pm := kafka.PerfMetrics(prod.Stdout, id)
	t.Logf("producer: produce-throttle-time avg %.0f ms, max %.0f ms; outgoing-byte-rate %.0f B/s",
		pm["producer-metrics:produce-throttle-time-avg"], pm["producer-metrics:produce-throttle-time-max"], pm["producer-metrics:outgoing-byte-rate"])
	if pm["producer-metrics:produce-throttle-time-max"] <= 0 || pm["producer-metrics:produce-throttle-time-avg"] <= 0 {
		t.Errorf("the Java producer saw no throttle under producer_byte_rate=%d:\n%s", q, tail(prod.Stdout, 30))
	}

	props := filepath.Join(t.TempDir(), "consumer.properties")
	if err := os.WriteFile(props, []byte("client.id="+id+"\nauto.offset.reset=earliest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cons := runJava(t, up, 2*time.Minute, "", "org.apache.kafka.tools.ConsumerPerformance",
		"--bootstrap-server", env.Bootstrap, "--topic", topic, "--messages", strconv.Itoa(records), "--print-metrics",
		"--timeout", "60000", "--group", up.GroupID(t, "perf-g"), consumerConfigFlag(javaVersion(up)), props)
	cm := kafka.PerfMetrics(cons.Stdout, id)
	t.Logf("consumer: fetch-throttle-time avg %.0f ms, max %.0f ms", cm["consumer-fetch-manager-metrics:fetch-throttle-time-avg"], cm["consumer-fetch-manager-metrics:fetch-throttle-time-max"])
	if cm["consumer-fetch-manager-metrics:fetch-throttle-time-max"] <= 0 {
		t.Errorf("the Java consumer saw no throttle under consumer_byte_rate=%d:\n%s", q, tail(cons.Stdout, 30))
	}

	// Tollgate's own figures for the client-id's two buckets.
	// The client's average (over all its answers) and Tollgate's (over
	// the throttled ones, nearly all of them here) tell the same story:
	// within a factor of 4 either way, loose for a loaded machine.
	all := scrapeAll(t, env)
	for _, c := range []struct{ quota, javaAvg string }{
		{"producer_byte_rate", "producer-metrics:produce-throttle-time-avg"},
		{"consumer_byte_rate", "consumer-fetch-manager-metrics:fetch-throttle-time-avg"},
	} {
		n := sampleWith(all, "tollgate_quota_throttled_total", `quota="`+c.quota+`"`, `client_id="`+id+`"`)
		s := sampleWith(all, "tollgate_quota_throttle_seconds_total", `quota="`+c.quota+`"`, `client_id="`+id+`"`)
		t.Logf("Tollgate %s: %0.f throttled responses, %.2f s in all", c.quota, n, s)
		if n <= 0 || s <= 0 {
			t.Errorf("Tollgate counted no throttle of %s for the client-id", c.quota)
			continue
		}
		java := pm[c.javaAvg] + cm[c.javaAvg]
		if own := 1000 * s / n; java < own/4 || java > own*4 {
			t.Errorf("%s: the Java client's average throttle %.0f ms and Tollgate's %.0f ms disagree", c.quota, java, own)
		}
	}
	// Kafka's client records the throttle of every answer; the longest one
	// Tollgate gives is bounded by its quota window (11 × 1 s).
	if mx := pm["producer-metrics:produce-throttle-time-max"]; mx > 11000 {
		t.Errorf("the producer saw a throttle of %.0f ms, longer than the quota window", mx)
	}
}

// consumerConfigFlag is ConsumerPerformance's flag for a properties file.
func consumerConfigFlag(version string) string {
	if strings.HasPrefix(version, "3.") {
		return "--consumer.config"
	}
	return "--command-config"
}

// sampleWith sums the samples of name in a scrape whose labels hold every
// one of labels.
func sampleWith(scrape, name string, labels ...string) float64 {
	var sum float64
lines:
	for _, l := range strings.Split(scrape, "\n") {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		for _, want := range labels {
			if !strings.Contains(l, want) {
				continue lines
			}
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
