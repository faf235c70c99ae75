package kafkaapi

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// telemetryFilter is the chain's telemetry filter over m, at a stopped
// clock the test moves.
func telemetryFilter(t *testing.T, m *telemetry.Manager, now *time.Time) proxy.Filter {
	t.Helper()
	for _, f := range Chain(Deps{Telemetry: m, Now: func() time.Time { return *now }}) {
		if f.Name() == "telemetry" {
			return f
		}
	}
	t.Fatal("the chain has no telemetry filter")
	return nil
}

// throttlePush is what a throttled producer pushes: its produce throttle
// time, average and maximum, in ms.
func throttlePush(t *testing.T, avg float64, maxMs int64) []byte {
	t.Helper()
	b, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
			{Name: "org.apache.kafka.producer.produce.throttle.time.avg", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
				DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: avg}}}}}},
			{Name: "org.apache.kafka.producer.produce.throttle.time.max", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
				DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: maxMs}}}}}},
		}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A client's KIP-714 exchange through the filter, as kmsg frames it:
// GetTelemetrySubscriptions and PushTelemetry are answered by Tollgate
// (the nil upstream fails the test if anything is forwarded), and the
// push's metrics are kept for the connection's principal and client-id.
func TestTelemetryAnsweredLocally(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := telemetry.New(telemetry.Config{PushInterval: time.Second}.Options())
	f := telemetryFilter(t, m, &now)
	c := connAs(aliceUser)

	x := pass(t, f, c, kmsg.NewPtrGetTelemetrySubscriptionsRequest(), nil)
	sub := x.resp.(*kmsg.GetTelemetrySubscriptionsResponse)
	if sub.ErrorCode != 0 || sub.ClientInstanceID == [16]byte{} || sub.PushIntervalMillis != 1000 ||
		!slices.Equal(sub.RequestedMetrics, slices.Sorted(slices.Values(telemetry.DefaultMetrics))) || !slices.Equal(sub.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) {
		t.Fatalf("subscription %+v", sub)
	}

	push := func(metrics []byte, subID int32) *kmsg.PushTelemetryResponse {
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID, req.Metrics = sub.ClientInstanceID, subID, metrics
		return pass(t, f, c, req, nil).resp.(*kmsg.PushTelemetryResponse)
	}
	now = now.Add(600 * time.Millisecond) // the first push, jittered
	if r := push(throttlePush(t, 250, 900), sub.SubscriptionID); r.ErrorCode != 0 {
		t.Fatalf("push: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	now = now.Add(100 * time.Millisecond)
	if r := push(throttlePush(t, 1, 1), sub.SubscriptionID); r.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("a push too soon: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	now = now.Add(time.Second)
	if r := push(nil, sub.SubscriptionID+1); r.ErrorCode != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("another subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	series := m.Series(now)
	if len(series) != 1 || series[0].User != "alice" || series[0].ClientID != "test" {
		t.Fatalf("series %+v", series)
	}
	if v, _ := series[0].Values.Get(telemetry.ProduceThrottleMax); v != 900 {
		t.Fatalf("produce throttle max %v", v)
	}
}

// A body kmsg cannot read closes the connection, as for every API Tollgate
// answers.
func TestTelemetryMalformedCloses(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := telemetryFilter(t, telemetry.New(telemetry.Config{}.Options()), &now)
	req := kmsg.NewPtrPushTelemetryRequest()
	req.Metrics = []byte("metrics")
	r, err := proxytest.Request(req, 3)
	if err != nil {
		t.Fatal(err)
	}
	r.Payload = r.Payload[:len(r.Payload)-4] // the bytes field runs past the end
	if v := f.(proxy.RequestHook).OnRequest(connAs(principal.AnonymousPrincipal), r); v.Close != proxy.ReasonBadFrame {
		t.Fatalf("verdict %+v", v)
	}
}

// With telemetry on, ApiVersions advertises both APIs (kmsg's v0) on
// every listener, whatever the broker says: Kafka advertises them only
// with a metrics reporter configured. Off, the broker's answer stands.
func TestApiVersionsAdvertisesTelemetry(t *testing.T) {
	on := Chain(Deps{Telemetry: telemetry.New(telemetry.Config{}.Options())})[0]
	off := Chain(Deps{})[0]
	upstream := upstreamVersions(brokerVersions(), 0)
	has := func(keys []apiRange, k kmsg.Key) bool {
		return slices.ContainsFunc(keys, func(r apiRange) bool { return r.ApiKey == int16(k) && r.MinVersion == 0 && r.MaxVersion == 0 })
	}
	// Dialed connections: every ApiVersions goes to the broker (the
	// cache before a dial is another test's).
	dialed := func(c *proxytest.Conn) proxy.Conn { c.Upstream = true; return c }
	for name, conn := range map[string]func() proxy.Conn{
		"plaintext":   func() proxy.Conn { return dialed(plaintextConn()) },
		"terminating": func() proxy.Conn { return dialed(terminatingConn()) },
	} {
		for _, v := range []int16{0, 3, 4} {
			got := pass(t, on, conn(), apiVersionsReq(v), upstream).resp.(*kmsg.ApiVersionsResponse).ApiKeys
			if !has(got, kmsg.GetTelemetrySubscriptions) || !has(got, kmsg.PushTelemetry) {
				t.Errorf("%s v%d, telemetry on: %v", name, v, got)
			}
			got = pass(t, off, conn(), apiVersionsReq(v), upstream).resp.(*kmsg.ApiVersionsResponse).ApiKeys
			if has(got, kmsg.GetTelemetrySubscriptions) || has(got, kmsg.PushTelemetry) {
				t.Errorf("%s v%d, telemetry off: %v", name, v, got)
			}
		}
	}
	// The SASL ranges of a terminating listener are still there.
	got := pass(t, on, dialed(terminatingConn()), apiVersionsReq(3), upstream).resp.(*kmsg.ApiVersionsResponse).ApiKeys
	if !slices.ContainsFunc(got, func(r apiRange) bool { return r.ApiKey == 36 && r.MaxVersion == 2 }) {
		t.Errorf("terminating listener lost its SASL ranges: %v", got)
	}
}
