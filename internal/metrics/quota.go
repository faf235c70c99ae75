package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/quota"
)

// quotaCollector reads the quota engine's live buckets at scrape time.
// Buckets expire after an hour idle (as Kafka's sensors), so the label
// cardinality stays bounded by the active (user, client-id) pairs.
type quotaCollector struct {
	eng *quota.Engine
	now func() time.Time

	rate, limit, util, throttled, throttleSec, buckets *prometheus.Desc
}

var bucketLabels = []string{"quota", "user", "client_id"}

// RegisterQuotas adds the per-bucket quota metrics of eng.
func (m *Metrics) RegisterQuotas(eng *quota.Engine) {
	m.Registry.MustRegister(&quotaCollector{
		eng: eng,
		now: time.Now,
		rate: prometheus.NewDesc("tollgate_quota_rate",
			"Current rate of a quota bucket, per second: bytes for byte rates, partitions for controller_mutation_rate.", bucketLabels, nil),
		limit: prometheus.NewDesc("tollgate_quota_limit",
			"The quota that bounds a bucket (absent when no quota applies).", bucketLabels, nil),
		util: prometheus.NewDesc("tollgate_quota_utilization",
			"Rate divided by quota: 1 means at the quota, above 1 means throttled.", bucketLabels, nil),
		throttled: prometheus.NewDesc("tollgate_quota_throttled_total",
			"Responses throttled by this bucket.", bucketLabels, nil),
		throttleSec: prometheus.NewDesc("tollgate_quota_throttle_seconds_total",
			"Total throttle time imposed by this bucket.", bucketLabels, nil),
		buckets: prometheus.NewDesc("tollgate_quota_buckets",
			"Live quota buckets (idle buckets expire after an hour).", []string{"quota"}, nil),
	})
}

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rate, c.limit, c.util, c.throttled, c.throttleSec, c.buckets} {
		ch <- d
	}
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[quota.Key]int{}
	for _, k := range quota.Keys() {
		counts[k] = 0
	}
	for _, u := range c.eng.Usage(c.now()) {
		counts[u.Key]++
		lv := []string{u.Key.String(), u.User, u.ClientID}
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, u.Rate, lv...)
		if u.Level != quota.LevelNone {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, u.Quota, lv...)
			ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, u.Utilization, lv...)
		}
		ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.CounterValue, float64(u.Throttles), lv...)
		ch <- prometheus.MustNewConstMetric(c.throttleSec, prometheus.CounterValue, u.ThrottleTotal.Seconds(), lv...)
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.buckets, prometheus.GaugeValue, float64(n), k.String())
	}
}
