package telemetry

import (
	"hash/crc32"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// getAs asks for the subscription as client c whose instance id is id.
func getAs(m *Manager, c Client, id [16]byte, now time.Time) *kmsg.GetTelemetrySubscriptionsResponse {
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	return m.GetSubscriptions(req, c, now)
}

// sub parses a subscription, failing t if it is refused.
func sub(t *testing.T, name string, configs map[string]string) ClientSubscription {
	t.Helper()
	s, err := ParseClientSubscription(name, configs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantSubscriptionID checks s's id is the checksum of its metrics and
// interval mixed with its instance id.
func wantSubscriptionID(t *testing.T, s *kmsg.GetTelemetrySubscriptionsResponse) {
	t.Helper()
	crc := crc32.Checksum([]byte(strings.Join(s.RequestedMetrics, "\x00")+"\x00"+strconv.Itoa(int(s.PushIntervalMillis))),
		crc32.MakeTable(crc32.Castagnoli))
	if want := subscriptionID(crc, s.ClientInstanceID); s.SubscriptionID != want {
		t.Fatalf("subscription id %d, want %d", s.SubscriptionID, want)
	}
}

var (
	// javaClient is a Java producer, instance id 0x00..0x0f.
	javaClient = Client{User: "alice", ClientID: "orders-1", SoftwareName: "apache-kafka-java", SoftwareVersion: "3.9.0",
		Addr: netip.MustParseAddrPort("10.1.2.3:53124")}
	javaID = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// An instance is asked for Tollgate's own subscription with those of the
// named subscriptions its client matches: the union of the metrics ("*"
// among them: every metric, asked for as ""), sorted and without
// duplicates, at the shortest interval.
func TestClientSubscriptionsCombined(t *testing.T) {
	base := slices.Sorted(slices.Values(DefaultMetrics))
	with := func(extra string) []string { return slices.Sorted(slices.Values(append(slices.Clone(base), extra))) }
	for _, tc := range []struct {
		name     string
		base     []string // Tollgate's own metrics; nil: DefaultMetrics
		subs     []map[string]string
		metrics  []string
		interval int32
		names    []string
	}{
		{"none", nil, nil, base, 10000, nil},
		{"one for every client, longer interval", nil, []map[string]string{
			{"metrics": "org.apache.kafka.producer.record.error", "interval.ms": "60000"},
		}, with("org.apache.kafka.producer.record.error"), 10000, []string{"s0"}},
		{"shorter interval", nil, []map[string]string{{"interval.ms": "2000"}}, base, 2000, []string{"s0"}},
		{"Kafka's default interval", nil, []map[string]string{{"metrics": "a."}}, with("a."), 10000, []string{"s0"}},
		{"not matching", nil, []map[string]string{
			{"metrics": "x.", "interval.ms": "100", "match": "client_id=other"},
		}, base, 10000, nil},
		{"matching on every attribute", nil, []map[string]string{{"metrics": "x.", "interval.ms": "500", "match": "client_id=orders-.*," +
			"client_instance_id=AAECAwQFBgcICQoLDA0ODw,client_software_name=apache-kafka-java,client_software_version=3\\..*," +
			"client_source_address=10\\.1\\.2\\.3,client_source_port=53124"}}, with("x."), 500, []string{"s0"}},
		{"one attribute off", nil, []map[string]string{{"metrics": "x.", "match": "client_id=orders-.*,client_source_port=9092"}},
			base, 10000, nil},
		{"overlapping, the shortest interval", []string{"b", "a"}, []map[string]string{
			{"metrics": "c,a", "interval.ms": "8000"},
			{"metrics": "a,d", "interval.ms": "3000", "match": "client_software_name=apache-kafka-java"},
			{"metrics": "e", "interval.ms": "100", "match": "client_software_name=librdkafka"},
		}, []string{"a", "b", "c", "d"}, 3000, []string{"s0", "s1"}},
		{"* in a subscription", nil, []map[string]string{{"metrics": "x.,*", "interval.ms": "5000"}, {"metrics": "y."}},
			[]string{""}, 5000, []string{"s0", "s1"}},
		{"* in Tollgate's own", []string{"*"}, []map[string]string{{"metrics": "x."}}, []string{""}, 10000, []string{"s0"}},
		{"no metrics at all", []string{}, nil, nil, 10000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			if tc.base != nil {
				o.Subscription.Metrics = tc.base
			}
			m := New(o)
			var subs []ClientSubscription
			for i, c := range tc.subs {
				subs = append(subs, sub(t, "s"+strconv.Itoa(i), c))
			}
			m.SetClientSubscriptions(subs)
			s := getAs(m, javaClient, javaID, t0)
			wantCode(t, "get", s.ErrorCode, nil)
			if !slices.Equal(s.RequestedMetrics, tc.metrics) || s.PushIntervalMillis != tc.interval {
				t.Fatalf("metrics %q, interval %d; want %q, %d", s.RequestedMetrics, s.PushIntervalMillis, tc.metrics, tc.interval)
			}
			wantSubscriptionID(t, s)
			req := pushReq(s, marshal(t, librdkafkaPush()), CompressionNone)
			wantCode(t, "push", m.Push(req, javaClient, t0.Add(time.Second)).ErrorCode, nil)
			got := m.Series(t0.Add(time.Second))
			if len(got) != 1 || !slices.Equal(got[0].Subscriptions, tc.names) {
				t.Fatalf("series %+v, want subscriptions %q", got, tc.names)
			}
		})
	}
}

// A subscription added after an instance was made: the instance's next
// push is UNKNOWN_SUBSCRIPTION_ID, and its next request gets the new
// subscription; removing it goes back.
func TestClientSubscriptionAddedRemoved(t *testing.T) {
	m := New(testOptions())
	raw := marshal(t, librdkafkaPush())
	s := getAs(m, javaClient, javaID, t0)
	wantCode(t, "push", m.Push(pushReq(s, raw, 0), javaClient, t0.Add(time.Second)).ErrorCode, nil)

	java := sub(t, "java", map[string]string{"metrics": "org.apache.kafka.producer.record.", "interval.ms": "4000",
		"match": "client_software_name=apache-kafka-java"})
	m.SetClientSubscriptions([]ClientSubscription{java})
	wantCode(t, "push with the old id", m.Push(pushReq(s, raw, 0), javaClient, t0.Add(11*time.Second)).ErrorCode, kerr.UnknownSubscriptionID)
	s2 := getAs(m, javaClient, javaID, t0.Add(12*time.Second))
	wantCode(t, "get at once", s2.ErrorCode, nil)
	wantSubscriptionID(t, s2)
	if s2.SubscriptionID == s.SubscriptionID || s2.PushIntervalMillis != 4000 ||
		!slices.Contains(s2.RequestedMetrics, "org.apache.kafka.producer.record.") {
		t.Fatalf("new subscription %d (was %d), interval %d, metrics %q", s2.SubscriptionID, s.SubscriptionID, s2.PushIntervalMillis, s2.RequestedMetrics)
	}
	wantCode(t, "push with the new id", m.Push(pushReq(s2, raw, 0), javaClient, t0.Add(13*time.Second)).ErrorCode, nil)
	wantCode(t, "an interval on", m.Push(pushReq(s2, raw, 0), javaClient, t0.Add(17*time.Second)).ErrorCode, nil)
	if got := m.Series(t0.Add(17 * time.Second)); !slices.Equal(got[0].Subscriptions, []string{"java"}) {
		t.Fatalf("series %+v", got)
	}

	// The same set again changes nothing.
	m.SetClientSubscriptions([]ClientSubscription{java})
	wantCode(t, "unchanged", m.Push(pushReq(s2, raw, 0), javaClient, t0.Add(21*time.Second)).ErrorCode, nil)

	m.SetClientSubscriptions(nil)
	wantCode(t, "push after the removal", m.Push(pushReq(s2, raw, 0), javaClient, t0.Add(25*time.Second)).ErrorCode, kerr.UnknownSubscriptionID)
	s3 := getAs(m, javaClient, javaID, t0.Add(25500*time.Millisecond))
	wantCode(t, "get after the removal", s3.ErrorCode, nil)
	if s3.SubscriptionID != s.SubscriptionID || s3.PushIntervalMillis != 10000 || !slices.Equal(s3.RequestedMetrics, s.RequestedMetrics) {
		t.Fatalf("after the removal: %d (first %d), interval %d, metrics %q", s3.SubscriptionID, s.SubscriptionID, s3.PushIntervalMillis, s3.RequestedMetrics)
	}
	wantCode(t, "push", m.Push(pushReq(s3, raw, 0), javaClient, t0.Add(26*time.Second)).ErrorCode, nil)
	if got := m.Series(t0.Add(26 * time.Second)); got[0].Subscriptions != nil {
		t.Fatalf("series %+v", got)
	}
}

// A subscription the client does not match re-makes its instance too, as
// Kafka's does, but its subscription id stays.
func TestClientSubscriptionNotMatching(t *testing.T) {
	m := New(testOptions())
	s := getAs(m, javaClient, javaID, t0)
	m.SetClientSubscriptions([]ClientSubscription{sub(t, "rdkafka", map[string]string{"metrics": "x.", "match": "client_software_name=librdkafka"})})
	wantCode(t, "push", m.Push(pushReq(s, nil, 0), javaClient, t0.Add(time.Second)).ErrorCode, nil)
	if s2 := getAs(m, javaClient, javaID, t0.Add(11*time.Second)); s2.SubscriptionID != s.SubscriptionID {
		t.Fatalf("subscription id %d, was %d", s2.SubscriptionID, s.SubscriptionID)
	}
}

// An instance a push makes (Tollgate restarted, or forgot it) is matched
// with the pushing client: the id it got before is accepted when it
// matches the same subscriptions.
func TestClientSubscriptionsPushMakes(t *testing.T) {
	subs := []ClientSubscription{sub(t, "java", map[string]string{"metrics": "x.", "interval.ms": "1000",
		"match": "client_software_name=apache-kafka-java"})}
	m := New(testOptions())
	m.SetClientSubscriptions(subs)
	s := getAs(m, javaClient, javaID, t0)

	restarted := New(testOptions())
	restarted.SetClientSubscriptions(subs)
	wantCode(t, "the same client", restarted.Push(pushReq(s, nil, 0), javaClient, t0.Add(time.Second)).ErrorCode, nil)
	other := javaClient
	other.User, other.SoftwareName = "bob", "librdkafka"
	wantCode(t, "another client with its id", restarted.Push(pushReq(s, nil, 0), other, t0.Add(time.Second)).ErrorCode, kerr.UnknownSubscriptionID)
}

// A series' subscriptions are those its instances matched when they
// pushed.
func TestSeriesSubscriptions(t *testing.T) {
	m := New(testOptions())
	m.SetClientSubscriptions([]ClientSubscription{
		sub(t, "all", map[string]string{"metrics": "a."}),
		sub(t, "java", map[string]string{"metrics": "j.", "match": "client_software_name=apache-kafka-java"}),
		sub(t, "rdkafka", map[string]string{"metrics": "r.", "match": "client_software_name=librdkafka"}),
		sub(t, "none", map[string]string{"metrics": "n.", "match": "client_id=nobody"}),
	})
	raw := marshal(t, librdkafkaPush())
	push := func(c Client) {
		s := getAs(m, c, [16]byte{}, t0)
		wantCode(t, "push", m.Push(pushReq(s, raw, 0), c, t0).ErrorCode, nil)
	}
	rdkafka := javaClient
	rdkafka.SoftwareName = "librdkafka"
	push(javaClient)
	push(rdkafka)
	got := m.Series(t0)
	if len(got) != 1 || got[0].Instances != 2 || !slices.Equal(got[0].Subscriptions, []string{"all", "java", "rdkafka"}) {
		t.Fatalf("series %+v", got)
	}
}

// SetClientSubscriptions keeps a copy, sorted by name, the last of two
// with one name; ClientSubscriptions gives a copy.
func TestClientSubscriptionsKept(t *testing.T) {
	m := New(testOptions())
	b1 := sub(t, "b", map[string]string{"metrics": "one"})
	b2 := sub(t, "b", map[string]string{"metrics": "two"})
	a := sub(t, "a", map[string]string{"interval.ms": "1000", "match": "client_id=x"})
	in := []ClientSubscription{b1, a, b2}
	m.SetClientSubscriptions(in)
	in[2].Metrics[0] = "changed"
	got := m.ClientSubscriptions()
	if len(got) != 2 || !got[0].equal(a) || got[1].Name != "b" || !slices.Equal(got[1].Metrics, []string{"two"}) {
		t.Fatalf("got %+v", got)
	}
	got[0].Match[0].Regex = "changed"
	if again := m.ClientSubscriptions(); !again[0].equal(a) {
		t.Fatalf("changed through a copy: %+v", again)
	}
	// Built rather than parsed: the defaults, compiled patterns; one
	// that does not compile matches nothing.
	m.SetClientSubscriptions([]ClientSubscription{
		{Name: "built", Metrics: []string{"x."}, Match: []MatchPattern{{Attr: AttrClientID, Regex: "orders-.*"}}},
		{Name: "broken", Metrics: []string{"y."}, Match: []MatchPattern{{Attr: AttrClientID, Regex: "("}}},
	})
	if got := m.ClientSubscriptions(); got[1].Interval != DefaultClientSubscriptionInterval {
		t.Fatalf("got %+v", got)
	}
	s := getAs(m, javaClient, javaID, t0)
	if want := append(slices.Sorted(slices.Values(DefaultMetrics)), "x."); !slices.Equal(s.RequestedMetrics, want) {
		t.Fatalf("metrics %q, want %q", s.RequestedMetrics, want)
	}
}
