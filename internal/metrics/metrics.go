// Package metrics holds Tollgate's Prometheus collectors. They are fed
// through the small hook interfaces of the data path (proxy.Observer) and
// registered on a registry of their own, never the global one. Every
// metric is listed in docs/metrics.md; a test keeps the two in step.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
)

// Metrics is the set of collectors of one gateway.
type Metrics struct {
	Registry *prometheus.Registry

	connsActive *prometheus.GaugeVec
	connsOpened *prometheus.CounterVec
	connsClosed *prometheus.CounterVec
	upOpened    *prometheus.CounterVec
	authFailed  prometheus.Counter

	clusterEvents *prometheus.CounterVec // RegisterCluster
}

// New creates the collectors on a fresh registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		connsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_connections_active",
			Help: "Client connections currently open, per listener.",
		}, []string{"listener"}),
		connsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_connections_opened_total",
			Help: "Client connections accepted, per listener.",
		}, []string{"listener"}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_connections_closed_total",
			Help: "Client connections closed, per listener and close reason.",
		}, []string{"listener", "reason"}),
		upOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_upstream_connections_opened_total",
			Help: "Upstream connections opened for client connections, per client listener. A client connection opens one at its first forwarded request, so refused, unauthenticated and idle connections open none.",
		}, []string{"listener"}),
	}
	m.authFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_authentication_failures_total",
		Help: "Failed logins at Tollgate: SASL logins terminated on the Kafka listeners, and Bearer API keys or client certificates refused on the admin HTTP port.",
	})
	r.MustRegister(m.connsActive, m.connsOpened, m.connsClosed, m.upOpened, m.authFailed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RegisterAcceptorProcess exports whether the acceptor helper process runs,
// and how many times one was found stalled.
func (m *Metrics) RegisterAcceptorProcess(running func() bool, stalls func() uint64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_acceptor_helper_stalls_total",
		Help: "Acceptor helpers found alive but not accepting while connections waited in a port's backlog (3 s), and killed: the gateway then accepts itself.",
	}, func() float64 { return float64(stalls()) }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_acceptor_process_up",
		Help: "1 while the acceptor helper process accepts on the plain TCP listeners (socket.acceptor_process); 0 when it is off, could not start, or died (the gateway then accepts itself).",
	}, func() float64 {
		if running() {
			return 1
		}
		return 0
	}))
}

// RegisterRequestMemory exposes socket.queued_max_request_bytes: the bytes
// of request frames held, the budget, and the frames that waited for room.
func (m *Metrics) RegisterRequestMemory(state func() (inUse, budget int64, waits uint64)) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_request_memory_bytes",
		Help: "Bytes of request frames all connections hold now, counted against socket.queued_max_request_bytes.",
	}, func() float64 { u, _, _ := state(); return float64(u) }))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_request_memory_budget_bytes",
		Help: "socket.queued_max_request_bytes: the most bytes of request frames all connections may hold (0: no bound).",
	}, func() float64 { _, b, _ := state(); return float64(b) }))
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tollgate_request_memory_waits_total",
		Help: "Request frames whose connection waited, reading nothing, for room in socket.queued_max_request_bytes.",
	}, func() float64 { _, _, w := state(); return float64(w) }))
}

// Opened implements proxy.Observer.
func (m *Metrics) Opened(c *principal.ConnInfo) {
	m.connsActive.WithLabelValues(c.Listener).Inc()
	m.connsOpened.WithLabelValues(c.Listener).Inc()
}

// Closed implements proxy.Observer.
func (m *Metrics) Closed(c *principal.ConnInfo, r proxy.Reason, _ error) {
	m.connsActive.WithLabelValues(c.Listener).Dec()
	m.connsClosed.WithLabelValues(c.Listener, string(r)).Inc()
}

// Refused implements proxy.RefusalObserver (counted by the admission
// collector; nothing to do here).
func (m *Metrics) Refused(listener, reason string) {}

// UpstreamOpened implements proxy.UpstreamObserver.
func (m *Metrics) UpstreamOpened(c *principal.ConnInfo) { m.upOpened.WithLabelValues(c.Listener).Inc() }

// AuthFailed implements proxy.AuthObserver.
func (m *Metrics) AuthFailed(*principal.ConnInfo, string, error) { m.authFailed.Inc() }
