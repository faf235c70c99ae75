package metrics_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/telemetry/telemetrytest"
)

// The clients' own metrics are exported per (user, client-id) in seconds,
// each in its family with its api label, with the series' instance count
// and last push, and the manager's counts.
func TestTelemetryMetrics(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	tm := telemetry.New(telemetry.Config{}.Options())
	telemetrytest.PushGauges(t, tm, "alice", "app", now, map[string]float64{
		"org.apache.kafka.producer.produce.throttle.time.avg": 250,
		"org.apache.kafka.producer.produce.throttle.time.max": 1200,
		"org.apache.kafka.producer.node.request.latency.avg":  4,
		"org.apache.kafka.producer.record.queue.time.max":     1500,
	})
	telemetrytest.PushGauges(t, tm, "bob", "java-consumer", now, map[string]float64{
		"org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.max": 700,
		"org.apache.kafka.consumer.fetch.manager.fetch.latency.avg":       510,
	})
	m := metrics.New()
	m.RegisterTelemetry(tm, func() time.Time { return now })
	reg := m.Registry
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tollgate_client_throttle_time_avg_seconds", []string{"user", "alice", "client_id", "app", "api", "produce"}, 0.25},
		{"tollgate_client_throttle_time_max_seconds", []string{"user", "alice", "client_id", "app", "api", "produce"}, 1.2},
		{"tollgate_client_node_request_latency_avg_seconds", []string{"user", "alice", "client_id", "app"}, 0.004},
		{"tollgate_client_record_queue_time_max_seconds", []string{"user", "alice", "client_id", "app"}, 1.5},
		{"tollgate_client_throttle_time_max_seconds", []string{"user", "bob", "client_id", "java-consumer", "api", "fetch"}, 0.7},
		{"tollgate_client_request_latency_avg_seconds", []string{"user", "bob", "client_id", "java-consumer", "api", "fetch"}, 0.51},
		{"tollgate_client_telemetry_instances", []string{"user", "alice", "client_id", "app"}, 1},
		{"tollgate_client_telemetry_last_push_timestamp_seconds", []string{"user", "bob"}, float64(now.Unix())},
		{"tollgate_client_telemetry_series", nil, 2},
		{"tollgate_client_telemetry_client_instances", nil, 2},
		{"tollgate_client_telemetry_requests_total", []string{"api", "GetTelemetrySubscriptions", "error", "NONE"}, 2},
		{"tollgate_client_telemetry_requests_total", []string{"api", "PushTelemetry", "error", "NONE"}, 2},
		{"tollgate_client_telemetry_evictions_total", []string{"kind", "series"}, 0},
		{"tollgate_client_telemetry_evictions_total", []string{"kind", "client_instance"}, 0},
		{"tollgate_client_telemetry_expired_total", nil, 0},
	} {
		if got := value(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// What was not pushed is not exported.
	for _, absent := range [][]string{
		{"tollgate_client_throttle_time_avg_seconds", "user", "alice", "api", "fetch"},
		{"tollgate_client_throttle_time_avg_seconds", "user", "bob"},
		{"tollgate_client_request_latency_max_seconds"},
	} {
		if v, ok := sample(t, reg, absent[0], absent[1:]...); ok {
			t.Errorf("%v exported (%v)", absent, v)
		}
	}
}

// Cardinality is bounded by telemetry.max_series: a client cycling
// client-ids leaves at most that many series, the rest counted as
// evictions.
func TestTelemetryMetricsBounded(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	o := telemetry.Config{MaxSeries: 5}.Options()
	tm := telemetry.New(o)
	for i := range 200 {
		telemetrytest.PushGauges(t, tm, "mallory", string(rune('a'+i%26))+string(rune('a'+i/26)), now.Add(time.Duration(i)*time.Millisecond),
			map[string]float64{"org.apache.kafka.producer.produce.throttle.time.avg": 1})
	}
	m := metrics.New()
	m.RegisterTelemetry(tm, func() time.Time { return now.Add(time.Second) })
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "tollgate_client_throttle_time_avg_seconds" && len(f.GetMetric()) != 5 {
			t.Errorf("%d series exported, want 5", len(f.GetMetric()))
		}
	}
	if got := value(t, m.Registry, "tollgate_client_telemetry_evictions_total", "kind", "series"); got != 195 {
		t.Errorf("evictions %v, want 195", got)
	}
}

// Client-ids are tenant bytes: ones that are not UTF-8 (no Prometheus
// label value can hold them) are read as Kafka reads them, invalid bytes
// replaced by U+FFFD, and two that differ only there are one series: the
// scrape never fails.
func TestTelemetryMetricsInvalidUTF8(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	tm := telemetry.New(telemetry.Config{}.Options())
	for _, cid := range []string{"bad\xff", "bad\xfe\xfd"} {
		telemetrytest.PushGauges(t, tm, "mallory\xc3", cid, now, map[string]float64{"org.apache.kafka.producer.produce.throttle.time.max": 5})
	}
	m := metrics.New()
	m.RegisterTelemetry(tm, func() time.Time { return now })
	if _, err := m.Registry.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	if got := value(t, m.Registry, "tollgate_client_telemetry_instances", "user", "mallory\uFFFD", "client_id", "bad\uFFFD"); got != 2 {
		t.Errorf("instances %v, want both clients in one series", got)
	}
}
