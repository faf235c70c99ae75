package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/httpapi"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// The clients' own view (KIP-714): real clients push their metrics
// through the gateway, which answers GetTelemetrySubscriptions and
// PushTelemetry itself and shows what each client reported next to its
// own view of the same user and client-id.

// telemetryEnvOn is a gateway in front of up asking clients to push every
// second, whose producer_byte_rate quota of 256 KiB/s on (ANONYMOUS, cid)
// throttles the tests' producers, with a one-second burst so that
// throttling starts at once.
func telemetryEnvOn(t *testing.T, up *testkit.Upstream, cid string) *testkit.Env {
	t.Helper()
	user, rate, burst := "ANONYMOUS", float64(256<<10), 1.0
	return up.Start(t, app.Options{}, func(c *app.Config) {
		c.Telemetry.PushInterval = time.Second
		c.Authorization.AllowAnonymousDescribe = true // the JSON API, read without a key
		c.Quotas = []app.QuotaEntry{{User: &user, ClientID: &cid, ProducerByteRate: &rate, BurstSeconds: &burst}}
	})
}

// telemetryAPI is GET /api/v1/telemetry.
type telemetryAPI struct {
	Subscription struct {
		PushIntervalMs int64 `json:"push_interval_ms"`
	} `json:"subscription"`
	Series          int                       `json:"series"`
	ClientInstances int                       `json:"client_instances"`
	Evictions       map[string]uint64         `json:"evictions"`
	Clients         []httpapi.TelemetryClient `json:"clients"`
}

func getTelemetry(t *testing.T, env *testkit.Env) telemetryAPI {
	t.Helper()
	resp, err := http.Get("http://" + env.App.HTTPAddr() + httpapi.EndpointTelemetry)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out telemetryAPI
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", httpapi.EndpointTelemetry, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// telemetryClient is the series of (user, cid), if any.
func telemetryClient(t *testing.T, env *testkit.Env, user, cid string) (httpapi.TelemetryClient, bool) {
	t.Helper()
	for _, c := range getTelemetry(t, env).Clients {
		if c.User == user && c.ClientID == cid {
			return c, true
		}
	}
	return httpapi.TelemetryClient{}, false
}

func producerBucket(c httpapi.TelemetryClient) (httpapi.TelemetryBucket, bool) {
	for _, b := range c.Tollgate {
		if b.Quota == "producer_byte_rate" {
			return b, true
		}
	}
	return httpapi.TelemetryBucket{}, false
}

// waitThrottleSeenByBoth waits (bounded by d, or until stop reports the
// client gone) until the client (ANONYMOUS, cid) has pushed a produce
// throttle time above zero and Tollgate's bucket for it has throttled, and
// checks that the two views agree: both in the JSON API and in /metrics,
// the client's largest throttle no more than all the throttle time
// Tollgate imposed on the bucket.
func waitThrottleSeenByBoth(t *testing.T, env *testkit.Env, cid string, d time.Duration, gone func() error) httpapi.TelemetryClient {
	t.Helper()
	deadline := time.Now().Add(d)
	var last httpapi.TelemetryClient
	for {
		c, ok := telemetryClient(t, env, "ANONYMOUS", cid)
		b, bok := producerBucket(c)
		if ok && c.Reported["produce_throttle_time_max_ms"] > 0 && bok && b.Throttled > 0 {
			last = c
			break
		}
		if err := gone(); err != nil {
			t.Fatalf("the client ended before its throttle was seen (%v); last seen %+v", err, c)
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v, no push with a produce throttle and a throttled bucket for %s; last seen %+v (found %v)\n"+
				"telemetry answers: %v", d, cid, c, ok, telemetryRequests(t, env))
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := producerBucket(last)
	avg, maxMs := last.Reported["produce_throttle_time_avg_ms"], last.Reported["produce_throttle_time_max_ms"]
	if avg > maxMs || maxMs > float64(b.ThrottleMs)+1 || maxMs > 30000 {
		t.Errorf("the client reports a throttle avg %v ms, max %v ms; Tollgate throttled its bucket %d times for %d ms in all (quota.max_throttle 30 s)",
			avg, maxMs, b.Throttled, b.ThrottleMs)
	}
	if *b.Limit != 256<<10 || b.BucketUser != "ANONYMOUS" || b.BucketClientID != cid || b.Level != "user+client-id" {
		t.Errorf("Tollgate's bucket %+v", b)
	}
	// Prometheus: the client's own throttle next to Tollgate's, both
	// labelled by the user and client-id.
	if v := scrapeMetricOr(t, env, fmt.Sprintf(`tollgate_client_throttle_time_max_seconds{api="produce",client_id=%q,user="ANONYMOUS"}`, cid), 0); v <= 0 {
		t.Errorf("tollgate_client_throttle_time_max_seconds for %s: %v", cid, v)
	}
	if v := scrapeMetricOr(t, env, fmt.Sprintf(`tollgate_client_telemetry_instances{client_id=%q,user="ANONYMOUS"}`, cid), 0); v < 1 {
		t.Errorf("tollgate_client_telemetry_instances for %s: %v", cid, v)
	}
	if v := scrapeMetricOr(t, env, fmt.Sprintf(`tollgate_quota_throttled_total{client_id=%q,client_id_prefix="",quota="producer_byte_rate",topic="",topic_prefix="",user="ANONYMOUS"}`, cid), 0); v <= 0 {
		t.Errorf("tollgate_quota_throttled_total for %s: %v", cid, v)
	}
	t.Logf("%s reported a produce throttle avg %.1f ms, max %.0f ms, node request latency max %v ms, queue time max %v ms (%d instance(s)); "+
		"Tollgate: %d throttles, %d ms in all, rate %.0f B/s of %.0f",
		cid, avg, maxMs, last.Reported["node_request_latency_max_ms"], last.Reported["record_queue_time_max_ms"], last.Instances,
		b.Throttled, b.ThrottleMs, b.Rate, *b.Limit)
	return last
}

// telemetryAllAccepted fails the test if Tollgate answered any of the
// clients' KIP-714 requests with an error: honest clients following the
// subscription are never refused, not even for pushing too soon.
func telemetryAllAccepted(t *testing.T, env *testkit.Env) {
	t.Helper()
	got := telemetryRequests(t, env)
	for _, l := range strings.Split(got, "; ") {
		if !strings.Contains(l, `error="NONE"`) {
			t.Errorf("a KIP-714 request was refused: %s", got)
			return
		}
	}
	if !strings.Contains(got, `api="PushTelemetry",error="NONE"`) {
		t.Errorf("no push accepted: %s", got)
	}
}

func telemetryRequests(t *testing.T, env *testkit.Env) string {
	resp, err := http.Get("http://" + env.App.HTTPAddr() + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tollgate_client_telemetry_requests_total{") {
			out = append(out, sc.Text())
		}
	}
	return strings.Join(out, "; ")
}

// franz-go pushes KIP-714 metrics by default: a throttled franz-go
// producer's own produce throttle time reaches Tollgate's API and
// /metrics next to the bucket's throttles, and every one of its requests,
// the terminating push its Close sends included, is accepted.
func TestTelemetryFranzGo(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, telemetryFranzGo)
}

func telemetryFranzGo(t *testing.T, up *testkit.Upstream) {
	cid := up.Topic(t, "tg-franz")
	env := telemetryEnvOn(t, up, cid)
	ctx := ctxT(t, 90*time.Second)
	prod := newClient(t, env, nil, kgo.ClientID(cid), kgo.DefaultProduceTopic(up.Topic(t, "telemetry-franz")), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(16<<10))
	trafficCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		val := make([]byte, 8<<10)
		for n := 0; trafficCtx.Err() == nil && n < 100_000; n++ {
			prod.Produce(trafficCtx, &kgo.Record{Value: val}, nil)
			for prod.BufferedProduceBytes() > 256<<10 && trafficCtx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
		}
		prod.AbortBufferedRecords(context.Background())
	}()
	waitThrottleSeenByBoth(t, env, cid, 60*time.Second, func() error { return ctx.Err() })
	stop()
	wg.Wait()
	before := scrapeMetricOr(t, env, `tollgate_client_telemetry_requests_total{api="PushTelemetry",error="NONE"}`, 0)
	prod.Close() // sends a terminating push (after any push in flight)
	if after := scrapeMetricOr(t, env, `tollgate_client_telemetry_requests_total{api="PushTelemetry",error="NONE"}`, 0); after < before+1 {
		t.Errorf("accepted pushes %v before Close, %v after: want the terminating push", before, after)
	}
	telemetryAllAccepted(t, env)
	if got := getTelemetry(t, env); got.Subscription.PushIntervalMs != 1000 {
		t.Errorf("subscription %+v", got.Subscription)
	}
}

// pushEveryChosen makes cl ask for its subscription and push one value
// of every metric Tollgate shows (telemetry.Chosen), compressed with zstd
// as Java clients and librdkafka built with zstd send it: what the metrics
// reference needs to see every family.
func pushEveryChosen(t *testing.T, ctx context.Context, cl *kgo.Client) {
	t.Helper()
	var ms []*metricspb.Metric
	for name := range telemetry.Chosen {
		ms = append(ms, &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
			DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: 12.5}}}}}})
	}
	raw, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: ms}}}}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	sub, err := kmsg.NewPtrGetTelemetrySubscriptionsRequest().RequestWith(ctx, cl)
	if err != nil || sub.ErrorCode != 0 {
		t.Fatalf("GetTelemetrySubscriptions: %v (error code %d)", err, sub.ErrorCode)
	}
	push := kmsg.NewPtrPushTelemetryRequest()
	push.ClientInstanceID, push.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
	push.CompressionType, push.Metrics = 4, enc.EncodeAll(raw, nil)
	resp, err := push.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("PushTelemetry: %v (error code %d)", err, resp.ErrorCode)
	}
}

// librdkafka (2.16, in the confluent-kafka Python client's wheel from
// PyPI) pushes its metrics through the gateway: a producer throttled by a
// producer_byte_rate quota reports its own produce throttle time, which
// shows in /api/v1/telemetry and /metrics for its principal and
// client-id, next to the throttles Tollgate's bucket imposed on it; none
// of its requests is refused. (librdkafka sends a terminating push at its
// close only when no push is in flight, so the test does not count on
// one.) Its zstd pushes, 440 bytes, declare a window far larger than
// telemetry.max_bytes: read, as Kafka's broker reads them.
func TestTelemetryConfluentPython(t *testing.T) {
	t.Parallel()
	py := os.Getenv("TOLLGATE_PYTHON")
	if py == "" {
		if os.Getenv("TOLLGATE_REQUIRE_CLIENTS") == "1" {
			t.Fatal("TOLLGATE_PYTHON is not set: it names a python with confluent-kafka installed")
		}
		t.Skip("TOLLGATE_PYTHON is not set (a python with confluent-kafka installed); scripts/test.sh sets it")
	}
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		telemetryLibrdkafka(t, up, "librdkafka 2.16", func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, py, append([]string{"-u", "testdata/telemetry/produce.py"}, args...)...)
		})
	})
}

// telemetryLibrdkafka runs a librdkafka producer (command(ctx, bootstrap,
// client-id, topic)) whose first line names version.
func telemetryLibrdkafka(t *testing.T, up *testkit.Upstream, version string, command func(ctx context.Context, args ...string) *exec.Cmd) {
	cid := up.Topic(t, "tg-librdkafka")
	env := telemetryEnvOn(t, up, cid)
	ctx := ctxT(t, 2*time.Minute)
	cmd := command(ctx, env.Bootstrap, cid, up.Topic(t, "telemetry-librdkafka"))
	cmd.Env = append(cmd.Environ(), "MAX_MS=90000")
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer // both pipes
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	done := false
	gone := func() error {
		if done {
			return exitErr
		}
		select {
		case exitErr = <-exited:
			done = true
			if exitErr == nil {
				exitErr = fmt.Errorf("exited")
			}
			return exitErr
		default:
			return nil
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("client script output:\n%s", out.String())
		}
	}()
	c := waitThrottleSeenByBoth(t, env, cid, 90*time.Second, gone)
	// librdkafka reports what Tollgate subscribed it to: its latencies
	// and queue time too.
	for _, m := range []string{"produce_request_latency_max_ms", "node_request_latency_avg_ms", "record_queue_time_max_ms"} {
		if _, ok := c.Reported[m]; !ok {
			t.Errorf("librdkafka did not report %s: %v", m, c.Reported)
		}
	}
	stdin.Close() // flush and disconnect
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("client script: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the client script did not end")
	}
	telemetryAllAccepted(t, env)
	// And librdkafka saw no refusal either.
	for _, bad := range []string{"PushTelemetryRequest failed", "GetTelemetrySubscriptionsRequest failed"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("librdkafka logged %q", bad)
		}
	}
	if !strings.Contains(out.String(), "PushTelemetryRequest succeeded") {
		t.Errorf("librdkafka logged no successful push")
	}
	if !strings.Contains(out.String(), version) {
		t.Errorf("the script did not run %s:\n%s", version, out.String())
	}
}

// A reload changes the subscription live: a push under the old one is
// answered UNKNOWN_SUBSCRIPTION_ID, the client asks again at once and gets
// the new interval and metrics; a restart-only telemetry key is logged
// as such.
func TestTelemetryReload(t *testing.T) {
	t.Parallel()
	cfg := func(interval, metrics string, maxSeries int) []byte {
		return []byte(fmt.Sprintf("listeners:\n  - name: PLAINTEXT\n    bootstrap: 127.0.0.1:0\n"+
			"telemetry:\n  push_interval: %s\n  metrics: %s\n  max_series: %d\n", interval, metrics, maxSeries))
	}
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeFileAtomic(t, path, cfg("1s", "[org.apache.kafka.producer.]", 1000))
	env := testkit.Start(t, app.Options{ConfigPath: path, WatchInterval: time.Hour}, func(c *app.Config) {
		c.Telemetry.PushInterval = time.Second
		c.Telemetry.Metrics = []string{"org.apache.kafka.producer."}
	})
	rc := dialRawVia(t, ctxT(t, 30*time.Second), &net.Dialer{Timeout: 5 * time.Second}, env.Bootstrap)
	sub := rc.do(t, kmsg.NewPtrGetTelemetrySubscriptionsRequest()).(*kmsg.GetTelemetrySubscriptionsResponse)
	if sub.ErrorCode != 0 || sub.PushIntervalMillis != 1000 || !slices.Equal(sub.RequestedMetrics, []string{"org.apache.kafka.producer."}) {
		t.Fatalf("subscription %+v", sub)
	}

	writeFileAtomic(t, path, cfg("2500ms", `["*"]`, 5))
	if err := env.App.Reload(); err != nil {
		t.Fatal(err)
	}
	push := kmsg.NewPtrPushTelemetryRequest()
	push.ClientInstanceID, push.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
	if r := rc.do(t, push).(*kmsg.PushTelemetryResponse); r.ErrorCode != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("a push under the old subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	again := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	again.ClientInstanceID = sub.ClientInstanceID
	sub2 := rc.do(t, again).(*kmsg.GetTelemetrySubscriptionsResponse)
	if sub2.ErrorCode != 0 || sub2.PushIntervalMillis != 2500 || !slices.Equal(sub2.RequestedMetrics, []string{""}) ||
		sub2.SubscriptionID == sub.SubscriptionID || sub2.ClientInstanceID != sub.ClientInstanceID {
		t.Fatalf("after the reload: %+v", sub2)
	}
	push.SubscriptionID = sub2.SubscriptionID
	if r := rc.do(t, push).(*kmsg.PushTelemetryResponse); r.ErrorCode != 0 {
		t.Fatalf("a push under the new subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitLog(t, env, 5*time.Second, "take effect after a restart", "telemetry")
	if got := env.App.Telemetry().MaxSeries(); got != 1000 {
		t.Errorf("max_series %d after the reload, want the running 1000 (restart-only)", got)
	}
}

// The Java client (3.7+) pushes its metrics through the gateway (issue 21
// point 4): Kafka's own producer perf tool, throttled by a
// producer_byte_rate quota, shows in /api/v1/telemetry with the throttle
// and the latencies it measured, next to Tollgate's bucket. A
// client-metrics subscription made with kafka-client-metrics through
// Tollgate, matching Java clients by their software name (KIP-511), is
// matched to it; one matching another client-id is not.
func TestTelemetryJavaClient(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, telemetryJavaClient)
}

func telemetryJavaClient(t *testing.T, up *testkit.Upstream) {
	cid := up.Topic(t, "tg-java")
	user, rate, burst := "ANONYMOUS", float64(256<<10), 1.0
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Telemetry.PushInterval = time.Second
		c.Authorization.AllowAnonymousDescribe = true
		c.Authorization.QuotaAdmins = []string{"ANONYMOUS"} // kafka-client-metrics alters through the gateway
		c.Quotas = []app.QuotaEntry{{User: &user, ClientID: &cid, ProducerByteRate: &rate, BurstSeconds: &burst}}
	})
	java, other := cid+"-java-clients", cid+"-not-this-one"
	for i, r := range runTools(t, up, [][]string{
		{clientMetricsCommand, "--bootstrap-server", env.Bootstrap, "--alter", "--name", java, "--metrics", "org.apache.kafka.producer.buffer.", "--interval", "5000",
			"--match", "client_software_name=apache-kafka-java,client_id=" + cid},
		{clientMetricsCommand, "--bootstrap-server", env.Bootstrap, "--alter", "--name", other, "--metrics", "*", "--match", "client_id=" + cid + "-other"},
	}) {
		if r.exit != 0 || !strings.Contains(r.stdout, "Altered client metrics config") {
			t.Fatalf("kafka-client-metrics %d: exit %d\n%s%s", i, r.exit, r.stdout, r.stderr)
		}
	}
	topic := up.Topic(t, "telemetry-java")
	ctx := ctxT(t, 2*time.Minute)
	// Three partitions led by three brokers: the Java client sends a
	// push to a broker it is not throttled on (KIP-219: it sends nothing
	// to a throttled one), and with one broker it always is.
	if _, err := kadm.NewClient(newClient(t, env, nil)).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	env.SpreadLeaders(t, topic, 3)
	env.WaitTopic(t, topic, 3)
	// 8 MiB at 256 KiB/s: some 32 s of quota, pushes every second.
	cmd, err := kafka.Tool(javaVersion(up), t.TempDir(), "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", "8192", "--record-size", "1024", "--throughput", "-1",
		"--producer-props", "bootstrap.servers="+env.Bootstrap, "client.id="+cid, "acks=1", "linger.ms=5")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	// A throttled Java client sends nothing to a throttled broker
	// (KIP-219), its pushes included, and pushes once more as it closes
	// (a terminating push): the producer's end is waited out for 10 s.
	var ended time.Time
	c := waitThrottleSeenByBoth(t, env, cid, 80*time.Second, func() error {
		select {
		case err := <-done:
			done <- err
			if ended.IsZero() {
				ended = time.Now()
			}
			if time.Since(ended) < 10*time.Second {
				return nil
			}
			return fmt.Errorf("the producer ended (%v) 10 s ago:\n%s\ntelemetry answers: %s", err, tail(out.String(), 20), telemetryRequests(t, env))
		default:
			return nil
		}
	})
	for _, k := range []string{"produce_request_latency_max_ms", "node_request_latency_max_ms", "record_queue_time_max_ms"} {
		if c.Reported[k] <= 0 {
			t.Errorf("the Java producer reported no %s: %v", k, c.Reported)
		}
	}
	if !slices.Equal(c.Subscriptions, []string{java}) {
		t.Errorf("matched subscriptions %v, want [%s]", c.Subscriptions, java)
	}
	telemetryAllAccepted(t, env)
}
