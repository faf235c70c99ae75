package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/admission"
)

// admissionCollector reads connection-admission statistics at scrape time.
type admissionCollector struct {
	lim *admission.Limiter

	blocked, blockedTotal, active, accepted, refused, acceptRate, limit, ipEvents *prometheus.Desc
}

// RegisterAdmission adds the connection-admission metrics of lim.
func (m *Metrics) RegisterAdmission(lim *admission.Limiter) {
	l := []string{"listener"}
	m.Registry.MustRegister(&admissionCollector{
		lim: lim,
		blocked: prometheus.NewDesc("tollgate_acceptor_blocked_percent",
			"Kafka's AcceptorBlockedPercent: the fraction (0-1) of time the listener's acceptor was blocked by a connection limit, one-minute rate.", l, nil),
		blockedTotal: prometheus.NewDesc("tollgate_acceptor_blocked_seconds_total",
			"Total time the listener's acceptor was blocked by a connection rate or count limit.", l, nil),
		active: prometheus.NewDesc("tollgate_listener_connections",
			"Connections counted by admission on the listener.", l, nil),
		accepted: prometheus.NewDesc("tollgate_connections_accepted_total",
			"Connections admitted, per listener.", l, nil),
		refused: prometheus.NewDesc("tollgate_connections_throttled_total",
			"Connections delayed, parked or rejected by a connection quota, per listener, outcome (throttled, blocked, parked, rejected) and the Kafka setting behind it.",
			[]string{"listener", "outcome", "limit"}, nil),
		acceptRate: prometheus.NewDesc("tollgate_connection_accept_rate",
			"Connection creation rate per second as the quota sees it, per listener.", l, nil),
		limit: prometheus.NewDesc("tollgate_listener_max_connections",
			"listener.name.<l>.max.connections in force (2147483647 = unlimited).", l, nil),
		ipEvents: prometheus.NewDesc("tollgate_ip_connections_refused_total",
			"Connections parked or rejected per client IP, for the most refused IPs only (bounded top-K, counts may be high by at most the tracked overcount).",
			[]string{"ip", "outcome"}, nil),
	})
}

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.blocked, c.blockedTotal, c.active, c.accepted, c.refused, c.acceptRate, c.limit, c.ipEvents} {
		ch <- d
	}
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.lim.Stats(time.Now())
	for _, l := range st.Listeners {
		n := l.Name
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, l.Blocked.OneMinuteRate, n)
		ch <- prometheus.MustNewConstMetric(c.blockedTotal, prometheus.CounterValue, l.Blocked.Total.Seconds(), n)
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(l.Active), n)
		ch <- prometheus.MustNewConstMetric(c.accepted, prometheus.CounterValue, float64(l.Accepted), n)
		ch <- prometheus.MustNewConstMetric(c.acceptRate, prometheus.GaugeValue, l.ConnectionAcceptRate, n)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(l.MaxConnections), n)
		for _, r := range []struct {
			outcome, limit string
			v              uint64
		}{
			{"throttled", "max.connection.creation.rate", l.ThrottledByGatewayRate},
			{"throttled", "listener.max.connection.creation.rate", l.ThrottledByListenerRate},
			{"blocked", "max.connections", l.BlockedByGatewayCount},
			{"blocked", "listener.max.connections", l.BlockedByListenerCount},
			{"parked", "connection_creation_rate", l.ParkedByIPRate},
			{"rejected", "max.connections.per.ip", l.RejectedByIPCount},
		} {
			ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(r.v), n, r.outcome, r.limit)
		}
	}
	for _, ip := range st.TopIPs {
		a := ip.Addr.String()
		ch <- prometheus.MustNewConstMetric(c.ipEvents, prometheus.CounterValue, float64(ip.Parked), a, "parked")
		ch <- prometheus.MustNewConstMetric(c.ipEvents, prometheus.CounterValue, float64(ip.Rejected), a, "rejected")
	}
}
