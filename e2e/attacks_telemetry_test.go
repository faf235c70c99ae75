package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The clients' telemetry (KIP-714) is tenant input: instance ids,
// subscription ids, compression, the bytes and the client-ids the series
// are named by. A tenant flooding it gets each request answered as Kafka
// answers it and holds at most the caps; it cannot push into or terminate
// another tenant's instance, and its bombs are never inflated.
func attackTelemetryFlood(t *testing.T) {
	const (
		maxInstances = 50
		maxSeries    = 10
		flood        = 2000
	)
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{
			{CIDR: "127.0.0.3/32", Principal: "mallory"},
			{CIDR: "127.0.0.4/32", Principal: "victim"},
		}
		c.Telemetry.PushInterval = 100 * time.Millisecond // the shortest Kafka allows
		c.Telemetry.MaxClientInstances = maxInstances
		c.Telemetry.MaxSeries = maxSeries
		c.Authorization.AllowAnonymousDescribe = true
	})
	ctx := ctxT(t, 2*time.Minute)
	victim := dialRawVia(t, ctx, dialerFrom("127.0.0.4"), env.Bootstrap)
	mallory := dialRawVia(t, ctx, dialerFrom("127.0.0.3"), env.Bootstrap)
	asClient := func(rc *rawConn, cid string) { rc.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(cid)) }
	get := func(rc *rawConn, id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		req.ClientInstanceID = id
		return rc.do(t, req).(*kmsg.GetTelemetrySubscriptionsResponse)
	}
	push := func(rc *rawConn, id [16]byte, sub int32, codec int8, metrics []byte, terminating bool) int16 {
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Metrics, req.Terminating = id, sub, codec, metrics, terminating
		return rc.do(t, req).(*kmsg.PushTelemetryResponse).ErrorCode
	}
	want := func(what string, got int16, w *kerr.Error) {
		t.Helper()
		wc := int16(0)
		if w != nil {
			wc = w.Code
		}
		if got != wc {
			t.Fatalf("%s: error %d (%v), want %d", what, got, kerr.ErrorForCode(got), wc)
		}
	}

	// The victim's client pushes its throttle: 500 ms.
	asClient(victim, "victim-app")
	vs := get(victim, [16]byte{})
	want("victim's subscription", vs.ErrorCode, nil)
	want("victim's push", push(victim, vs.ClientInstanceID, vs.SubscriptionID, 0, throttleMetrics(t, 500), false), nil)

	// Mallory names the victim's instance (and subscription) id, pushes
	// 1 ms and terminates it: an instance of mallory's own.
	asClient(mallory, "victim-app")
	want("mallory's push on the victim's instance id", push(mallory, vs.ClientInstanceID, vs.SubscriptionID, 0, throttleMetrics(t, 1), true), nil)
	time.Sleep(150 * time.Millisecond) // past the victim's push interval
	want("the victim's next push", push(victim, vs.ClientInstanceID, vs.SubscriptionID, 0, throttleMetrics(t, 500), false), nil)
	api := getTelemetry(t, env)
	for _, c := range api.Clients {
		if c.User == "victim" && c.Reported["produce_throttle_time_max_ms"] != 500 {
			t.Fatalf("the victim's series shows %v", c.Reported)
		}
	}

	// Refusals, each as Kafka answers it; the bombs are never inflated.
	bomb := func() []byte {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(make([]byte, 64<<20), nil) // 64 MiB of zeros in a few KiB
	}()
	for _, tc := range []struct {
		name    string
		id      func(*kmsg.GetTelemetrySubscriptionsResponse) [16]byte
		sub     func(*kmsg.GetTelemetrySubscriptionsResponse) int32
		codec   int8
		metrics []byte
		want    *kerr.Error
	}{
		{"a zstd bomb (64 MiB of zeros)", nil, nil, 4, bomb, kerr.TelemetryTooLarge},
		{"past telemetry.max_bytes", nil, nil, 0, make([]byte, 64<<10+1), kerr.TelemetryTooLarge},
		{"not MetricsData", nil, nil, 0, []byte("\xff\xff\xff\xff"), kerr.InvalidRecord},
		{"an unknown compression", nil, nil, 9, []byte("x"), kerr.UnsupportedCompressionType},
		{"a forged subscription id", nil, func(s *kmsg.GetTelemetrySubscriptionsResponse) int32 { return s.SubscriptionID + 1 }, 0, nil, kerr.UnknownSubscriptionID},
		{"the reserved instance id zero", func(*kmsg.GetTelemetrySubscriptionsResponse) [16]byte { return [16]byte{} }, nil, 0, nil, kerr.InvalidRequest},
	} {
		asClient(mallory, "bombs")
		s := get(mallory, [16]byte{})
		id, sub := s.ClientInstanceID, s.SubscriptionID
		if tc.id != nil {
			id = tc.id(s)
		}
		if tc.sub != nil {
			sub = tc.sub(s)
		}
		want(tc.name, push(mallory, id, sub, tc.codec, tc.metrics, false), tc.want)
	}

	// The flood: new instances under new client-ids, every one answered.
	start := time.Now()
	for i := range flood {
		asClient(mallory, fmt.Sprintf("flood-%d", i))
		s := get(mallory, [16]byte{})
		want("flood subscription", s.ErrorCode, nil)
		want("flood push", push(mallory, s.ClientInstanceID, s.SubscriptionID, 0, throttleMetrics(t, float64(i)), false), nil)
	}
	took := time.Since(start)

	// Client-ids no Prometheus label can hold (not UTF-8): read as Kafka
	// reads them, and the scrape still answers (scrapeAll checks).
	for _, cid := range []string{"\xff\xfe", "\xff"} {
		asClient(mallory, cid)
		s := get(mallory, [16]byte{})
		want("a client-id that is not UTF-8", push(mallory, s.ClientInstanceID, s.SubscriptionID, 0, throttleMetrics(t, 7), false), nil)
	}
	if lines := metricLines(t, env, "tollgate_client_telemetry_instances{client_id=\"\uFFFD\",user=\"mallory\"}"); len(lines) != 1 || !strings.HasSuffix(lines[0], " 2") {
		t.Errorf("the two clients whose ids are not UTF-8: %q", lines)
	}

	// What Tollgate holds: the caps, the rest counted as evictions.
	if n := scrapeMetric(t, env, "tollgate_client_telemetry_client_instances"); n > maxInstances {
		t.Errorf("%v client instances held, cap %d", n, maxInstances)
	}
	if n := scrapeMetric(t, env, "tollgate_client_telemetry_series"); n != maxSeries {
		t.Errorf("%v series held, cap %d", n, maxSeries)
	}
	if n := scrapeMetric(t, env, `tollgate_client_telemetry_evictions_total{kind="series"}`); n < flood-maxSeries {
		t.Errorf("%v series evicted", n)
	}
	if n := scrapeMetric(t, env, `tollgate_client_telemetry_evictions_total{kind="client_instance"}`); n < flood-maxInstances {
		t.Errorf("%v instances evicted", n)
	}
	if lines := metricLines(t, env, "tollgate_client_throttle_time_max_seconds{"); len(lines) > maxSeries {
		t.Errorf("%d series of tollgate_client_throttle_time_max_seconds exposed, cap %d", len(lines), maxSeries)
	}
	if api := getTelemetry(t, env); len(api.Clients) > maxSeries || api.ClientInstances > maxInstances {
		t.Errorf("the API lists %d series, %d instances", len(api.Clients), api.ClientInstances)
	}

	// The victim lost its place in the caps, never an answer: its next
	// push (its instance forgotten, served as a new one's, with the same
	// subscription id) is accepted and its series is back.
	time.Sleep(150 * time.Millisecond)
	want("the victim's push after the flood", push(victim, vs.ClientInstanceID, vs.SubscriptionID, 0, throttleMetrics(t, 500), false), nil)
	found := false
	for _, c := range getTelemetry(t, env).Clients {
		if c.User == "victim" && c.ClientID == "victim-app" {
			found = c.Reported["produce_throttle_time_max_ms"] == 500
		}
		if c.User == "mallory" && c.ClientID == "victim-app" {
			t.Errorf("mallory's series under the victim's client-id survived the flood: %+v", c)
		}
	}
	if !found {
		t.Error("the victim's series is not back after its push")
	}
	t.Logf("%d instances and client-ids in %v: %v client instances and %v series held, %v and %v evicted",
		flood, took.Round(time.Millisecond),
		scrapeMetric(t, env, "tollgate_client_telemetry_client_instances"), scrapeMetric(t, env, "tollgate_client_telemetry_series"),
		scrapeMetric(t, env, `tollgate_client_telemetry_evictions_total{kind="client_instance"}`),
		scrapeMetric(t, env, `tollgate_client_telemetry_evictions_total{kind="series"}`))
}

// throttleMetrics is a push of a produce throttle maximum of ms.
func throttleMetrics(t *testing.T, ms float64) []byte {
	t.Helper()
	b, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
			Name: "org.apache.kafka.producer.produce.throttle.time.max",
			Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
				DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: ms}}}}},
		}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// metricLines are the /metrics lines starting with prefix.
func metricLines(t *testing.T, env *testkit.Env, prefix string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(scrapeAll(t, env), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// dialerFrom dials from the local address ip.
func dialerFrom(ip string) *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
}

// scrapeAll is the whole /metrics page.
func scrapeAll(t *testing.T, env *testkit.Env) string {
	t.Helper()
	resp, err := http.Get("http://" + env.App.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s: %s", resp.Status, b)
	}
	return string(b)
}
