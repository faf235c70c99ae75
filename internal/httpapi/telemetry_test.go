package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/telemetry/telemetrytest"
)

// /api/v1/telemetry: each series' reported metrics next to the buckets
// Tollgate charges the same user and client-id to, with their throttles.
func TestTelemetryEndpoint(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var q model.Quotas
	q.Set(model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 1000)
	q.Set(model.ClientEntity(model.Prefix("etl-")), model.ConsumerByteRate, 5000)
	eng := engineWith(t, quota.EngineConfig{}, q)
	eng.Client("alice", "app").RecordProduce(20000, now) // twice the 10 s burst: throttled
	tm := telemetry.New(telemetry.Config{}.Options())
	telemetrytest.PushGauges(t, tm, "alice", "app", now, map[string]float64{
		"org.apache.kafka.producer.produce.throttle.time.avg": 812.5,
		"org.apache.kafka.producer.produce.throttle.time.max": 1480,
	})
	telemetrytest.PushGauges(t, tm, "bob", "etl-7", now.Add(time.Second), map[string]float64{
		"org.apache.kafka.consumer.fetch.manager.fetch.latency.avg": 20,
	})
	h := Handler(Sources{Engine: eng, Telemetry: tm, Now: func() time.Time { return now.Add(2 * time.Second) }, Access: readable})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", EndpointTelemetry, nil))
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
	var body struct {
		Subscription struct {
			PushIntervalMs int64    `json:"push_interval_ms"`
			Metrics        []string `json:"metrics"`
		} `json:"subscription"`
		Series    int               `json:"series"`
		MaxSeries int               `json:"max_series"`
		Evictions map[string]uint64 `json:"evictions"`
		Clients   []TelemetryClient `json:"clients"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Subscription.PushIntervalMs != 30000 || len(body.Subscription.Metrics) != len(telemetry.DefaultMetrics) ||
		body.Series != 2 || body.MaxSeries != telemetry.DefaultMaxSeries || body.Evictions["series"] != 0 {
		t.Fatalf("body %s", rec.Body.String())
	}
	if len(body.Clients) != 2 {
		t.Fatalf("clients %+v", body.Clients)
	}
	bob, alice := body.Clients[0], body.Clients[1] // most recently pushed first
	if alice.User != "alice" || alice.ClientID != "app" || alice.Instances != 1 ||
		alice.Reported["produce_throttle_time_avg_ms"] != 812.5 || alice.Reported["produce_throttle_time_max_ms"] != 1480 || len(alice.Reported) != 2 {
		t.Errorf("alice %+v", alice)
	}
	if len(alice.Tollgate) != 1 {
		t.Fatalf("alice's buckets %+v", alice.Tollgate)
	}
	if b := alice.Tollgate[0]; b.Quota != "producer_byte_rate" || *b.Limit != 1000 || b.Level != "user" || b.BucketUser != "alice" ||
		b.Throttled != 1 || b.ThrottleMs <= 0 || b.Rate <= 0 {
		t.Errorf("alice's produce bucket %+v", b)
	}
	if bob.ClientID != "etl-7" || bob.Reported["fetch_request_latency_avg_ms"] != 20 || bob.LastPush != now.Add(time.Second).UTC().Format(time.RFC3339Nano) {
		t.Errorf("bob %+v", bob)
	}
	if len(bob.Tollgate) != 1 || bob.Tollgate[0].Quota != "consumer_byte_rate" || bob.Tollgate[0].BucketPrefix != "etl-" || bob.Tollgate[0].Throttled != 0 {
		t.Errorf("bob's buckets %+v", bob.Tollgate)
	}

	// Off: a clear 503.
	off := Handler(Sources{Engine: eng, Access: readable})
	if code, body := getCompact(off, EndpointTelemetry); code != 503 || !strings.Contains(body, "telemetry.enabled: false") {
		t.Errorf("off: %d %s", code, body)
	}
}

// The endpoint needs the read right, as every /api/v1 read.
func TestTelemetryEndpointAccess(t *testing.T) {
	f := newPort(t, func(s *Sources) { s.Telemetry = telemetry.New(telemetry.Config{}.Options()) })
	cl := f.srv.Client()
	for _, tc := range []struct {
		key  string
		code int
	}{{"", 401}, {f.wrong, 401}, {f.reader, 200}, {f.admin, 200}} {
		if code, _, body := send(t, cl, f.srv.URL, "GET", EndpointTelemetry, tc.key, "", ""); code != tc.code {
			t.Errorf("key %q: %d, want %d: %s", tc.key, code, tc.code, body)
		}
	}
}
