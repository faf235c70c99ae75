package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterAudit exports how many denials the audit log summed instead of
// writing them one by one (aggregated reports both counts: all summed, and
// those summed in an "others" event because the keys were at their cap).
func (m *Metrics) RegisterAudit(aggregated func() (summed, overflowed uint64)) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_audit_denials_aggregated_total",
			Help: "Denials (failed logins, refused alterations) counted into an aggregated audit event instead of being written one by one (audit.aggregate_interval).",
		}, func() float64 { s, _ := aggregated(); return float64(s) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_audit_denials_overflowed_total",
			Help: "Denials counted together in an audit event of their action without principal or source, because more principals and sources were denied in one interval than the audit log tracks.",
		}, func() float64 { _, o := aggregated(); return float64(o) }),
	)
}

// RegisterLoginLimiter exports the failed-login limit per source address
// (authentication.failed_logins_per_ip) and returns the function that
// counts a login it refused.
func (m *Metrics) RegisterLoginLimiter(tracked func() int, evicted func() uint64) (refused func()) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_authentication_rate_limited_total",
		Help: "SASL logins refused without a credential check because their source address failed too many logins (authentication.failed_logins_per_ip); each is also one of tollgate_authentication_failures_total.",
	})
	m.Registry.MustRegister(c,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tollgate_failed_login_addresses",
			Help: "Source addresses (IPv6: /64 prefixes) whose recent failed logins are remembered for the limit; bounded.",
		}, func() float64 { return float64(tracked()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tollgate_failed_login_addresses_evicted_total",
			Help: "Source addresses forgotten by the failed-login limit because it tracked as many as it may.",
		}, func() float64 { return float64(evicted()) }),
	)
	return c.Inc
}
