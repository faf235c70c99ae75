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
