package telemetry

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testOptions() Options {
	o := Config{PushInterval: 10 * time.Second}.Options()
	return o
}

// get asks for the subscription as a client whose instance id is id.
func get(m *Manager, user string, id [16]byte, now time.Time) *kmsg.GetTelemetrySubscriptionsResponse {
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	return m.GetSubscriptions(req, Client{User: user}, now)
}

// pushReq is the push a client that got s makes with metrics (raw).
func pushReq(s *kmsg.GetTelemetrySubscriptionsResponse, metrics []byte, codec int8) *kmsg.PushTelemetryRequest {
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID = s.ClientInstanceID
	req.SubscriptionID = s.SubscriptionID
	req.CompressionType = codec
	req.Metrics = metrics
	return req
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: got %s, want %s", what, errName(got), errName(w))
	}
}

// A new client (zero instance id) gets an id of its own and the whole
// subscription, as Kafka's ClientMetricsManager gives it.
func TestGetSubscriptionsNewClient(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	wantCode(t, "get", s.ErrorCode, nil)
	if reserved(s.ClientInstanceID) {
		t.Fatalf("assigned a reserved id %x", s.ClientInstanceID)
	}
	if s2 := get(m, "alice", [16]byte{}, t0); s2.ClientInstanceID == s.ClientInstanceID {
		t.Fatal("two new clients got one id")
	}
	if !slices.Equal(s.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) {
		t.Errorf("compression %v, want Kafka's zstd, lz4, gzip, snappy", s.AcceptedCompressionTypes)
	}
	if s.PushIntervalMillis != 10000 || s.TelemetryMaxBytes != DefaultMaxBytes || !s.DeltaTemporality {
		t.Errorf("interval %d, max bytes %d, delta %v", s.PushIntervalMillis, s.TelemetryMaxBytes, s.DeltaTemporality)
	}
	want := slices.Sorted(slices.Values(DefaultMetrics))
	if !slices.Equal(s.RequestedMetrics, want) {
		t.Errorf("requested %v, want %v", s.RequestedMetrics, want)
	}
	// A checksum of the metrics and interval, mixed with the instance id.
	crc := crc32.Checksum([]byte(strings.Join(want, "\x00")+"\x00"+"10000"), crc32.MakeTable(crc32.Castagnoli))
	for i := 0; i < 16; i += 4 {
		crc ^= binary.BigEndian.Uint32(s.ClientInstanceID[i:])
	}
	if s.SubscriptionID != int32(crc) {
		t.Errorf("subscription id %d, want %d", s.SubscriptionID, int32(crc))
	}
}

// Asking again within the push interval is THROTTLING_QUOTA_EXCEEDED; a
// push interval after the last request it is answered.
func TestGetSubscriptionsTooSoon(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	id := s.ClientInstanceID
	wantCode(t, "again at once", get(m, "alice", id, t0.Add(time.Second)).ErrorCode, kerr.ThrottlingQuotaExceeded)
	wantCode(t, "an interval on", get(m, "alice", id, t0.Add(10*time.Second)).ErrorCode, nil)
	// A push counts as a request too.
	wantCode(t, "push", m.Push(pushReq(s, nil, 0), Client{User: "alice", ClientID: "c"}, t0.Add(11*time.Second)).ErrorCode, nil)
	wantCode(t, "get after push", get(m, "alice", id, t0.Add(15*time.Second)).ErrorCode, kerr.ThrottlingQuotaExceeded)
}

// Pushes: the first after a GetTelemetrySubscriptions whenever it comes
// (clients jitter it), later ones an interval apart, a terminating one at
// any time, nothing after it.
func TestPushInterval(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	raw := marshal(t, librdkafkaPush())
	at := func(d time.Duration, terminating bool) int16 {
		req := pushReq(s, raw, CompressionNone)
		req.Terminating = terminating
		return m.Push(req, Client{User: "alice", ClientID: "app"}, t0.Add(d)).ErrorCode
	}
	wantCode(t, "first push, half an interval on", at(5*time.Second, false), nil)
	wantCode(t, "second push at once", at(6*time.Second, false), kerr.ThrottlingQuotaExceeded)
	wantCode(t, "an interval after the first", at(15*time.Second, false), nil)
	wantCode(t, "terminating, at once", at(16*time.Second, true), nil)
	wantCode(t, "after terminating", at(30*time.Second, false), kerr.InvalidRequest)
	// As Kafka: the refused push's flag is the instance's now.
	wantCode(t, "and again", at(40*time.Second, false), nil)
}

// Each of Kafka's refusals, in Kafka's order, and what the client may do
// next.
func TestPushErrors(t *testing.T) {
	raw := marshal(t, librdkafkaPush())
	for _, tc := range []struct {
		name string
		edit func(*kmsg.PushTelemetryRequest)
		want *kerr.Error
	}{
		{"zero instance id", func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{} }, kerr.InvalidRequest},
		{"instance id one", func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{15: 1} }, kerr.InvalidRequest},
		{"another subscription", func(r *kmsg.PushTelemetryRequest) { r.SubscriptionID++ }, kerr.UnknownSubscriptionID},
		{"unknown compression", func(r *kmsg.PushTelemetryRequest) { r.CompressionType = 5 }, kerr.UnsupportedCompressionType},
		{"negative compression", func(r *kmsg.PushTelemetryRequest) { r.CompressionType = -1 }, kerr.UnsupportedCompressionType},
		{"too large", func(r *kmsg.PushTelemetryRequest) { r.Metrics = make([]byte, DefaultMaxBytes+1) }, kerr.TelemetryTooLarge},
		{"too large decompressed", func(r *kmsg.PushTelemetryRequest) {
			r.Metrics, r.CompressionType = compress(t, CompressionZstd, make([]byte, DefaultMaxBytes+1)), CompressionZstd
		}, kerr.TelemetryTooLarge},
		{"not MetricsData", func(r *kmsg.PushTelemetryRequest) { r.Metrics = []byte{0xff, 0xff} }, kerr.InvalidRecord},
		{"not what it says", func(r *kmsg.PushTelemetryRequest) { r.CompressionType = CompressionGzip }, kerr.InvalidRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(testOptions())
			s := get(m, "alice", [16]byte{}, t0)
			req := pushReq(s, raw, CompressionNone)
			tc.edit(req)
			wantCode(t, "push", m.Push(req, Client{User: "alice", ClientID: "app"}, t0.Add(time.Second)).ErrorCode, tc.want)
			if got := m.Series(t0.Add(time.Second)); len(got) != 0 {
				t.Fatalf("a refused push made series %+v", got)
			}
			// After an unknown subscription or compression the client
			// may ask again at once; otherwise not before an interval.
			again := get(m, "alice", s.ClientInstanceID, t0.Add(2*time.Second)).ErrorCode
			if tc.want == kerr.UnknownSubscriptionID || tc.want == kerr.UnsupportedCompressionType {
				wantCode(t, "get again", again, nil)
			} else if tc.want != kerr.InvalidRequest {
				wantCode(t, "get again", again, kerr.ThrottlingQuotaExceeded)
			}
		})
	}
}

// A changed subscription changes the subscription id: a push with the old
// one is UNKNOWN_SUBSCRIPTION_ID, and the client's next request gets the
// new subscription. An unchanged one gives the same id after a restart.
func TestSubscriptionChange(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	restarted := New(testOptions())
	req := pushReq(s, marshal(t, librdkafkaPush()), CompressionNone)
	wantCode(t, "push to a restarted Tollgate", restarted.Push(req, Client{User: "alice", ClientID: "app"}, t0).ErrorCode, nil)

	m.SetSubscription(Subscription{Metrics: []string{"*"}, PushInterval: 2 * time.Second})
	wantCode(t, "push with the old id", m.Push(pushReq(s, nil, 0), Client{User: "alice", ClientID: "app"}, t0.Add(time.Second)).ErrorCode, kerr.UnknownSubscriptionID)
	s2 := get(m, "alice", s.ClientInstanceID, t0.Add(1500*time.Millisecond))
	wantCode(t, "get", s2.ErrorCode, nil)
	if s2.SubscriptionID == s.SubscriptionID || s2.PushIntervalMillis != 2000 || !slices.Equal(s2.RequestedMetrics, []string{""}) {
		t.Fatalf("new subscription %d (was %d), interval %d, metrics %q", s2.SubscriptionID, s.SubscriptionID, s2.PushIntervalMillis, s2.RequestedMetrics)
	}
	wantCode(t, "push with the new id", m.Push(pushReq(s2, nil, 0), Client{User: "alice", ClientID: "app"}, t0.Add(2*time.Second)).ErrorCode, nil)
	m.SetSubscription(m.Subscription()) // unchanged: nothing happens
	wantCode(t, "an interval on", m.Push(pushReq(s2, nil, 0), Client{User: "alice", ClientID: "app"}, t0.Add(4*time.Second)).ErrorCode, nil)
}

// Instance ids are per principal: bob naming alice's instance id gets an
// instance of his own and disturbs nothing of hers — not her interval, not
// by terminating it.
func TestInstancesPerPrincipal(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	raw := marshal(t, librdkafkaPush())
	forged := pushReq(s, raw, CompressionNone)
	forged.Terminating = true
	wantCode(t, "bob's push", m.Push(forged, Client{User: "bob", ClientID: "bobs"}, t0.Add(time.Second)).ErrorCode, nil)
	wantCode(t, "alice's push", m.Push(pushReq(s, raw, CompressionNone), Client{User: "alice", ClientID: "app"}, t0.Add(2*time.Second)).ErrorCode, nil)
	got := m.Series(t0.Add(2 * time.Second))
	if len(got) != 2 || got[0].User != "alice" || got[1].User != "bob" {
		t.Fatalf("series %+v", got)
	}
}

// The series of a (user, client-id) combines the last push of each of its
// instances: the mean of averages, the largest maximum.
func TestSeriesCombineInstances(t *testing.T) {
	m := New(testOptions())
	push := func(avg float64, maxv int64, at time.Duration) {
		s := get(m, "alice", [16]byte{}, t0)
		md := metricsData(
			gauge{"org.apache.kafka.producer.produce.throttle.time.avg", []point{dbl(avg)}},
			gauge{"org.apache.kafka.producer.produce.throttle.time.max", []point{num(maxv)}},
		)
		wantCode(t, "push", m.Push(pushReq(s, marshal(t, md), CompressionNone), Client{User: "alice", ClientID: "app"}, t0.Add(at)).ErrorCode, nil)
	}
	push(100, 400, time.Second)
	push(300, 900, 2*time.Second)
	push(200, 100, 3*time.Second)
	got := m.Series(t0.Add(3 * time.Second))
	if len(got) != 1 {
		t.Fatalf("series %+v", got)
	}
	s := got[0]
	if s.Instances != 3 || !s.LastPush.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("instances %d, last push %v", s.Instances, s.LastPush)
	}
	checkValues(t, s.Values, map[Metric]float64{ProduceThrottleAvg: 200, ProduceThrottleMax: 900})
}

// An instance's later push replaces its sample; a push whose connection
// has another client-id moves it.
func TestSeriesLastPushWins(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	one := func(v float64) []byte {
		return marshal(t, metricsData(gauge{"org.apache.kafka.producer.produce.throttle.time.avg", []point{dbl(v)}}))
	}
	wantCode(t, "push", m.Push(pushReq(s, one(10), 0), Client{User: "alice", ClientID: "a"}, t0).ErrorCode, nil)
	wantCode(t, "push", m.Push(pushReq(s, one(20), 0), Client{User: "alice", ClientID: "a"}, t0.Add(10*time.Second)).ErrorCode, nil)
	got := m.Series(t0.Add(10 * time.Second))
	if len(got) != 1 || got[0].Values.V[ProduceThrottleAvg] != 20 || got[0].Instances != 1 {
		t.Fatalf("series %+v", got)
	}
	wantCode(t, "push", m.Push(pushReq(s, one(30), 0), Client{User: "alice", ClientID: "b"}, t0.Add(20*time.Second)).ErrorCode, nil)
	got = m.Series(t0.Add(20 * time.Second))
	if len(got) != 1 || got[0].ClientID != "b" || got[0].Values.V[ProduceThrottleAvg] != 30 {
		t.Fatalf("series %+v", got)
	}
}

// Client instances are capped, the least recently seen evicted first, and
// expire after the longer of a minute and three push intervals; their
// series go with them.
func TestInstancesBounded(t *testing.T) {
	o := testOptions()
	o.MaxClientInstances = 3
	m := New(o)
	raw := marshal(t, librdkafkaPush())
	var first *kmsg.GetTelemetrySubscriptionsResponse
	for i := range 100 {
		s := get(m, "mallory", [16]byte{}, t0.Add(time.Duration(i)*time.Millisecond))
		wantCode(t, "get", s.ErrorCode, nil)
		if i == 0 {
			first = s
		}
		wantCode(t, "push", m.Push(pushReq(s, raw, 0), Client{User: "mallory", ClientID: "m"}, t0.Add(time.Duration(i)*time.Millisecond)).ErrorCode, nil)
	}
	st := m.Stats(t0.Add(time.Second))
	if st.ClientInstances != 3 || st.EvictedInstances != 97 || st.Series != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got := m.Series(t0.Add(time.Second)); got[0].Instances != 3 {
		t.Fatalf("series %+v", got)
	}
	// The evicted first client pushes again: served as Kafka serves a
	// client the broker forgot (its subscription id still matches).
	wantCode(t, "forgotten client", m.Push(pushReq(first, raw, 0), Client{User: "mallory", ClientID: "m"}, t0.Add(2*time.Second)).ErrorCode, nil)
	// Idle for the expiry (a minute: three intervals are 30 s): gone.
	st = m.Stats(t0.Add(2*time.Second + time.Minute))
	if st.ClientInstances != 0 || st.Series != 0 || st.ExpiredInstances != 3 {
		t.Fatalf("after the expiry: %+v", st)
	}
}

// Series are capped, the least recently pushed evicted first: a client
// cycling client-ids holds at most MaxSeries of them, and a series that
// keeps pushing is never the one evicted.
func TestSeriesBounded(t *testing.T) {
	o := testOptions()
	o.MaxSeries = 3
	o.Subscription.PushInterval = time.Second
	m := New(o)
	raw := marshal(t, librdkafkaPush())
	alice := get(m, "alice", [16]byte{}, t0)
	for i := range 50 {
		at := t0.Add(time.Duration(i) * time.Second)
		s := get(m, "mallory", [16]byte{}, at)
		wantCode(t, "push", m.Push(pushReq(s, raw, 0), Client{User: "mallory", ClientID: fmt.Sprint("cid-", i)}, at).ErrorCode, nil)
		if i%2 == 0 { // alice keeps pushing, every 2 s
			wantCode(t, "alice", m.Push(pushReq(alice, raw, 0), Client{User: "alice", ClientID: "app"}, at).ErrorCode, nil)
		}
	}
	now := t0.Add(50 * time.Second)
	st := m.Stats(now)
	// 51 series made (alice's and 50 of mallory's), 3 left: alice's was
	// never evicted, or it would have been made again.
	if st.Series != 3 || st.EvictedSeries != 48 {
		t.Fatalf("stats %+v", st)
	}
	var got []string
	for _, s := range m.Series(now) {
		got = append(got, s.User+"/"+s.ClientID)
	}
	if want := []string{"mallory/cid-49", "alice/app", "mallory/cid-48"}; !slices.Equal(got, want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	if st.ClientInstances != 51 {
		t.Fatalf("instances %d", st.ClientInstances)
	}
}

// Stats count every answer by API and error code.
func TestStatsCountAnswers(t *testing.T) {
	m := New(testOptions())
	s := get(m, "alice", [16]byte{}, t0)
	get(m, "alice", s.ClientInstanceID, t0)
	m.Push(pushReq(s, nil, 0), Client{User: "alice", ClientID: "a"}, t0)
	m.Push(pushReq(s, nil, 0), Client{User: "alice", ClientID: "a"}, t0)
	want := []RequestCount{
		{API: 71, ErrorCode: 0, N: 1},
		{API: 71, ErrorCode: kerr.ThrottlingQuotaExceeded.Code, N: 1},
		{API: 72, ErrorCode: 0, N: 1},
		{API: 72, ErrorCode: kerr.ThrottlingQuotaExceeded.Code, N: 1},
	}
	if got := m.Stats(t0).Requests; !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{PushInterval: time.Millisecond}, "telemetry.push_interval 1ms: want from 100ms to 1h0m0s"},
		{Config{PushInterval: 2 * time.Hour}, "telemetry.push_interval 2h0m0s"},
		{Config{PushInterval: 1500 * time.Microsecond}, "whole milliseconds"},
		{Config{Metrics: []string{""}}, "telemetry.metrics[0] is empty"},
		{Config{Metrics: []string{"*", "org"}}, `"*" asks for every metric and must be alone`},
		{Config{MaxBytes: -1}, "telemetry.max_bytes -1"},
		{Config{MaxClientInstances: -1}, "telemetry.max_client_instances -1"},
		{Config{MaxSeries: -1}, "telemetry.max_series -1"},
	} {
		if err := tc.c.Validate(); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
		}
	}
	if err := (Config{PushInterval: time.Second, Metrics: []string{"*"}}).Validate(); err != nil {
		t.Error(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
