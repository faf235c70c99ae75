package metrics_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// sample reads one series from the registry: the value of the metric
// name whose labels include labels ("k", "v" pairs); ok is false when no
// such series is exposed.
func sample(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Untyped != nil:
				return m.Untyped.GetValue(), true
			}
		}
	}
	return 0, false
}

func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	v, ok := sample(t, reg, name, labels...)
	if !ok {
		t.Fatalf("%s%v is not exposed", name, labels)
	}
	return v
}

func expect(t *testing.T, reg prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	if got := value(t, reg, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func conn(listener string) *principal.ConnInfo {
	return &principal.ConnInfo{ID: 1, Listener: listener, Principal: principal.AnonymousPrincipal}
}

// The connection collectors follow the observer hooks, per listener and
// close reason.
func TestConnectionHooks(t *testing.T) {
	m := metrics.New()
	reg := m.Registry
	if n, err := testutil.GatherAndCount(reg, "tollgate_connections_active", "tollgate_connections_opened_total",
		"tollgate_connections_closed_total", "tollgate_upstream_connections_opened_total"); err != nil || n != 0 {
		t.Fatalf("%d connection series before any connection (%v)", n, err)
	}
	expect(t, reg, 0, "tollgate_authentication_failures_total")

	m.Opened(conn("PLAINTEXT"))
	m.Opened(conn("PLAINTEXT"))
	m.Opened(conn("SASL"))
	expect(t, reg, 2, "tollgate_connections_active", "listener", "PLAINTEXT")
	expect(t, reg, 1, "tollgate_connections_active", "listener", "SASL")
	expect(t, reg, 2, "tollgate_connections_opened_total", "listener", "PLAINTEXT")

	m.UpstreamOpened(conn("PLAINTEXT"))
	expect(t, reg, 1, "tollgate_upstream_connections_opened_total", "listener", "PLAINTEXT")
	if _, ok := sample(t, reg, "tollgate_upstream_connections_opened_total", "listener", "SASL"); ok {
		t.Error("an upstream connection counted on a listener that opened none")
	}

	m.AuthFailed(conn("SASL"), "SCRAM-SHA-256", errors.New("bad password"))
	m.AuthFailed(conn("SASL"), "PLAIN", errors.New("unknown user"))
	expect(t, reg, 2, "tollgate_authentication_failures_total")

	m.Closed(conn("PLAINTEXT"), proxy.ReasonClientClosed, nil)
	m.Closed(conn("SASL"), proxy.ReasonAuthFailed, errors.New("bad password"))
	expect(t, reg, 1, "tollgate_connections_active", "listener", "PLAINTEXT")
	expect(t, reg, 0, "tollgate_connections_active", "listener", "SASL")
	expect(t, reg, 1, "tollgate_connections_closed_total", "listener", "PLAINTEXT", "reason", string(proxy.ReasonClientClosed))
	expect(t, reg, 1, "tollgate_connections_closed_total", "listener", "SASL", "reason", string(proxy.ReasonAuthFailed))
	if n, _ := testutil.GatherAndCount(reg, "tollgate_connections_closed_total"); n != 2 {
		t.Errorf("%d close series, want one per (listener, reason) seen", n)
	}
	expect(t, reg, 2, "tollgate_connections_opened_total", "listener", "PLAINTEXT") // opened never goes down

	// Refusals are the admission collector's (TestAdmissionCollector):
	// the hook itself changes nothing.
	before, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Refused("PLAINTEXT", admission.ReasonIPCount.String())
	if after, _ := testutil.GatherAndCount(reg); after != before {
		t.Errorf("Refused changed the series: %d → %d", before, after)
	}

	// The Go and process collectors are registered too.
	if n, _ := testutil.GatherAndCount(reg, "go_goroutines"); n != 1 {
		t.Error("go_goroutines is not exposed")
	}
}

func TestAcceptorProcess(t *testing.T) {
	m := metrics.New()
	running := false
	stalls := uint64(0)
	m.RegisterAcceptorProcess(func() bool { return running }, func() uint64 { return stalls })
	expect(t, m.Registry, 0, "tollgate_acceptor_helper_stalls_total")
	stalls = 1
	expect(t, m.Registry, 1, "tollgate_acceptor_helper_stalls_total")
	expect(t, m.Registry, 0, "tollgate_acceptor_process_up")
	running = true
	expect(t, m.Registry, 1, "tollgate_acceptor_process_up")
}

// The quota collector reads a real engine's live buckets at scrape time.
func TestQuotaCollector(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var q model.Quotas
	if err := q.Set(model.ClientEntity(model.Exact("app")), model.ProducerByteRate, 1000); err != nil {
		t.Fatal(err)
	}
	eng.SetQuotas(q)
	m := metrics.New()
	m.RegisterQuotas(eng, 1000)
	reg := m.Registry
	for _, k := range model.Keys() {
		expect(t, reg, 0, "tollgate_quota_buckets", "quota", k.String())
	}
	if n, _ := testutil.GatherAndCount(reg, "tollgate_quota_rate"); n != 0 {
		t.Fatalf("%d buckets before any traffic", n)
	}

	// The collector's clock is the wall clock: record at it. 1 MB against
	// 1000 B/s is throttled for the cap, 30 s.
	now := time.Now()
	if th := eng.Client("alice", "app").RecordProduce(1<<20, now); th != quota.DefaultMaxThrottle {
		t.Fatalf("throttle %v, want the cap %v", th, quota.DefaultMaxThrottle)
	}
	eng.Client("alice", "other").RecordProduce(10, now) // no quota for this client-id
	lv := []string{"quota", "producer_byte_rate", "user", "", "client_id", "app"}
	if r := value(t, reg, "tollgate_quota_rate", lv...); r <= 0 {
		t.Errorf("rate %v after 1 MB", r)
	}
	expect(t, reg, 1000, "tollgate_quota_limit", lv...)
	if u := value(t, reg, "tollgate_quota_utilization", lv...); u <= 1 {
		t.Errorf("utilization %v of a throttled bucket, want above 1", u)
	}
	expect(t, reg, 1, "tollgate_quota_throttled_total", lv...)
	expect(t, reg, quota.DefaultMaxThrottle.Seconds(), "tollgate_quota_throttle_seconds_total", lv...)
	expect(t, reg, 2, "tollgate_quota_buckets", "quota", "producer_byte_rate")
	expect(t, reg, 0, "tollgate_quota_buckets", "quota", "consumer_byte_rate")

	// A bucket no quota bounds has a rate and no limit.
	other := []string{"quota", "producer_byte_rate", "user", "", "client_id", "other"}
	if r := value(t, reg, "tollgate_quota_rate", other...); r <= 0 {
		t.Errorf("rate %v after 10 bytes", r)
	}
	if _, ok := sample(t, reg, "tollgate_quota_limit", other...); ok {
		t.Error("a limit exposed for a bucket without a quota")
	}
	if _, ok := sample(t, reg, "tollgate_quota_utilization", other...); ok {
		t.Error("a utilization exposed for a bucket without a quota")
	}
	expect(t, reg, 0, "tollgate_quota_throttled_total", other...)

	// A second throttle adds up.
	eng.Client("alice", "app").RecordProduce(1<<20, now)
	expect(t, reg, 2, "tollgate_quota_throttled_total", lv...)
	expect(t, reg, 2*quota.DefaultMaxThrottle.Seconds(), "tollgate_quota_throttle_seconds_total", lv...)
}

// The admission collector reads a real limiter's statistics at scrape
// time: accepts, active connections, and every refusal by outcome and
// the Kafka setting behind it.
func TestAdmissionCollector(t *testing.T) {
	s := admission.DefaultSettings()
	s.Listeners = []admission.ListenerSettings{{Name: "PLAINTEXT"}, {Name: "LIMITED", MaxConnections: 1}, {Name: "RATED", MaxConnectionCreationRate: 1}}
	one, rated := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	s.MaxConnectionsPerIPOverrides = map[netip.Addr]int{one: 1}
	s.IPConnectionRates = map[netip.Prefix]int{netip.PrefixFrom(rated, 32): 1}
	now := time.Now() // the collector reads the limiter at the wall clock
	lim, err := admission.New(s, now)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	m.RegisterAdmission(lim)
	reg := m.Registry
	pl := []string{"listener", "PLAINTEXT"}
	expect(t, reg, 0, "tollgate_connections_accepted_total", pl...)
	expect(t, reg, 0, "tollgate_listener_connections", pl...)
	expect(t, reg, admission.Unlimited, "tollgate_listener_max_connections", pl...)
	expect(t, reg, 1, "tollgate_listener_max_connections", "listener", "LIMITED")

	var id uint64
	try := func(listener string, ip netip.Addr) (admission.Decision, *admission.Conn) {
		t.Helper()
		tk, err := lim.Admit(listener, now)
		if err != nil {
			t.Fatal(err)
		}
		id++
		c := &admission.Conn{ID: id}
		d := lim.AdmitIP(&tk, ip, c, now)
		if d.Verdict == admission.Wait {
			lim.Cancel(&tk, now)
		}
		return d, c
	}

	// Accepted, then refused by max.connections.per.ip (override 1).
	d, first := try("PLAINTEXT", one)
	if d.Verdict != admission.Accept {
		t.Fatalf("first connection: %v", d.Verdict)
	}
	if d, _ := try("PLAINTEXT", one); d.Verdict != admission.Reject {
		t.Fatalf("second connection from %s: %v, want reject", one, d.Verdict)
	}
	expect(t, reg, 1, "tollgate_connections_accepted_total", pl...)
	expect(t, reg, 1, "tollgate_listener_connections", pl...)
	if r := value(t, reg, "tollgate_connection_accept_rate", pl...); r <= 0 {
		t.Errorf("accept rate %v after two connections", r)
	}
	expect(t, reg, 1, "tollgate_connections_throttled_total", "listener", "PLAINTEXT", "outcome", "rejected", "limit", "max.connections.per.ip")
	expect(t, reg, 1, "tollgate_ip_connections_refused_total", "ip", "10.0.0.1", "outcome", "rejected")
	expect(t, reg, 0, "tollgate_ip_connections_refused_total", "ip", "10.0.0.1", "outcome", "parked")
	lim.Release(first)
	expect(t, reg, 0, "tollgate_listener_connections", pl...)

	// Parked by the ip's connection_creation_rate (1/s).
	parked, accepted := 0, 0
	for i := 0; i < 30 && parked == 0; i++ {
		switch d, _ := try("PLAINTEXT", rated); d.Verdict {
		case admission.Park:
			parked++
		case admission.Accept:
			accepted++
		default:
			t.Fatalf("connection from %s: %v", rated, d.Verdict)
		}
	}
	if parked == 0 {
		t.Fatal("30 connections in one instant were never parked at 1/s")
	}
	expect(t, reg, 1, "tollgate_connections_throttled_total", "listener", "PLAINTEXT", "outcome", "parked", "limit", "connection_creation_rate")
	expect(t, reg, 1, "tollgate_ip_connections_refused_total", "ip", "10.0.0.2", "outcome", "parked")
	expect(t, reg, float64(1+accepted), "tollgate_connections_accepted_total", pl...)

	// Blocked by the listener's max.connections (1).
	if d, _ := try("LIMITED", one); d.Verdict != admission.Accept {
		t.Fatalf("LIMITED: %v", d.Verdict)
	}
	if d, _ := try("LIMITED", rated); d.Verdict != admission.Wait || d.Reason != admission.ReasonListenerCount {
		t.Fatalf("LIMITED full: %v %v, want wait on the listener count", d.Verdict, d.Reason)
	}
	expect(t, reg, 1, "tollgate_connections_throttled_total", "listener", "LIMITED", "outcome", "blocked", "limit", "listener.max.connections")
	expect(t, reg, 1, "tollgate_listener_connections", "listener", "LIMITED")

	// Throttled by the listener's max.connection.creation.rate (1/s).
	throttled := 0
	for i := 0; i < 30 && throttled == 0; i++ {
		tk, err := lim.Admit("RATED", now)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Throttle() > 0 {
			throttled++
		}
		lim.Cancel(&tk, now)
	}
	if throttled == 0 {
		t.Fatal("30 connections in one instant were never throttled at 1/s")
	}
	expect(t, reg, 1, "tollgate_connections_throttled_total", "listener", "RATED", "outcome", "throttled", "limit", "listener.max.connection.creation.rate")
	expect(t, reg, 0, "tollgate_connections_throttled_total", "listener", "RATED", "outcome", "throttled", "limit", "max.connection.creation.rate")

	// Time the acceptor spent blocked.
	lim.MarkBlocked("PLAINTEXT", 1500*time.Millisecond, now)
	expect(t, reg, 1.5, "tollgate_acceptor_blocked_seconds_total", pl...)
	if _, ok := sample(t, reg, "tollgate_acceptor_blocked_percent", pl...); !ok {
		t.Error("tollgate_acceptor_blocked_percent is not exposed")
	}
}

// Every tollgate_* family a fully registered Metrics exposes passes
// Prometheus' metric lint (names, units, help).
func TestLint(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := admission.New(admission.DefaultSettings(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	m.RegisterQuotas(eng, 1000)
	m.RegisterAdmission(lim)
	m.RegisterAcceptorProcess(func() bool { return true }, func() uint64 { return 0 })
	m.Opened(conn("PLAINTEXT"))
	m.Closed(conn("PLAINTEXT"), proxy.ReasonShutdown, nil)
	m.UpstreamOpened(conn("PLAINTEXT"))
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "tollgate_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}
