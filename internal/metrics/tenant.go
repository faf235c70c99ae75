package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/quota"
)

// tenantCollector exports each tenant's ceilings (quota.TenantUsage). The
// tenants are configured by operators, so their series are bounded by the
// configuration, not by what clients choose.
type tenantCollector struct {
	eng *quota.Engine
	now func() time.Time

	rate, limit, util, active, fair, throttled, throttleSec *prometheus.Desc
	shadowRecords, shadowThrottled, shadowSec               *prometheus.Desc
}

var tenantLabels = []string{"tenant", "quota"}

// RegisterTenants exports eng's tenants, read at now() on each scrape.
func (m *Metrics) RegisterTenants(eng *quota.Engine, now func() time.Time) {
	m.Registry.MustRegister(&tenantCollector{
		eng: eng,
		now: now,
		rate: prometheus.NewDesc("tollgate_tenant_rate",
			"A tenant's principals' rate together, per second (bytes, or partitions for controller_mutation_rate); in a Tollgate cluster, the whole cluster's.", tenantLabels, nil),
		limit: prometheus.NewDesc("tollgate_tenant_limit",
			"A tenant's ceiling.", tenantLabels, nil),
		util: prometheus.NewDesc("tollgate_tenant_utilization",
			"A tenant's rate divided by its ceiling.", tenantLabels, nil),
		active: prometheus.NewDesc("tollgate_tenant_active_principals",
			"A tenant's principals with a record in the last (N−1)·W.", tenantLabels, nil),
		fair: prometheus.NewDesc("tollgate_tenant_fair_share",
			"The ceiling divided by the active principals: what each is guaranteed while the ceiling binds (or its own quota if smaller).", tenantLabels, nil),
		throttled: prometheus.NewDesc("tollgate_tenant_throttled_total",
			"Responses a tenant's ceiling throttled (a principal above its fair share while the ceiling bound, or the ceiling itself).", tenantLabels, nil),
		throttleSec: prometheus.NewDesc("tollgate_tenant_throttle_seconds_total",
			"Total throttle time a tenant's ceiling imposed.", tenantLabels, nil),
		shadowRecords: prometheus.NewDesc("tollgate_tenant_shadow_records_total",
			"Records counted into a tenant's ceiling while the tenant is in shadow mode.", tenantLabels, nil),
		shadowThrottled: prometheus.NewDesc("tollgate_tenant_shadow_throttled_total",
			"Records a shadow tenant's ceiling would have throttled; nothing was applied.", tenantLabels, nil),
		shadowSec: prometheus.NewDesc("tollgate_tenant_shadow_throttle_seconds_total",
			"Throttle time a shadow tenant's ceiling would have imposed; nothing was applied.", tenantLabels, nil),
	})
}

func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rate, c.limit, c.util, c.active, c.fair, c.throttled, c.throttleSec,
		c.shadowRecords, c.shadowThrottled, c.shadowSec} {
		ch <- d
	}
}

func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.eng.TenantUsage(c.now()) {
		lv := []string{u.Tenant, u.Key.String()}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
		}
		gauge(c.rate, u.Rate)
		gauge(c.limit, u.Ceiling)
		gauge(c.util, u.Utilization)
		gauge(c.active, float64(u.Active))
		gauge(c.fair, u.FairShare)
		counter(c.throttled, float64(u.Throttles))
		counter(c.throttleSec, u.ThrottleTotal.Seconds())
		if u.Shadow {
			counter(c.shadowRecords, float64(u.Shadowed.Records))
			counter(c.shadowThrottled, float64(u.Shadowed.Throttled))
			counter(c.shadowSec, u.Shadowed.Total.Seconds())
		}
	}
}
