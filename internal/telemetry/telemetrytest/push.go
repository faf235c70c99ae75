// Package telemetrytest pushes clients' metrics into a telemetry.Manager
// as a KIP-714 client does, for the tests of the packages that show them.
package telemetrytest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/internal/telemetry"
)

// PushGauges makes user's client (connection client-id cid) ask for its
// subscription and push the gauges (name → value in ms) at now, as OTLP
// protobuf; it fails t unless the push is accepted.
func PushGauges(t testing.TB, m *telemetry.Manager, user, cid string, now time.Time, gauges map[string]float64) {
	t.Helper()
	PushGaugesAs(t, m, telemetry.Client{User: user, ClientID: cid}, now, gauges)
}

// PushGaugesAs is PushGauges for client c: its software and address too,
// as the subscriptions that match clients read them.
func PushGaugesAs(t testing.TB, m *telemetry.Manager, c telemetry.Client, now time.Time, gauges map[string]float64) {
	t.Helper()
	sub := m.GetSubscriptions(kmsg.NewPtrGetTelemetrySubscriptionsRequest(), c, now)
	if sub.ErrorCode != 0 {
		t.Fatalf("get subscriptions: error %d", sub.ErrorCode)
	}
	var ms []*metricspb.Metric
	for name, v := range gauges {
		ms = append(ms, &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
			DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}}}}})
	}
	raw, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: ms}}}}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.Metrics = sub.ClientInstanceID, sub.SubscriptionID, raw
	if resp := m.Push(req, c, now); resp.ErrorCode != 0 {
		t.Fatalf("push: error %d", resp.ErrorCode)
	}
}
