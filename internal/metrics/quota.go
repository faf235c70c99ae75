package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// quotaCollector reads the quota engine's live buckets at scrape time.
// Buckets are named by strings clients choose (their client-id), so the
// per-bucket series are bounded twice: the engine caps and expires its
// buckets (quota.max_buckets, an hour idle), and only the maxBuckets busiest
// are exported (quota.metrics_max_buckets); the per-key totals cover all.
type quotaCollector struct {
	eng        *quota.Engine
	now        func() time.Time
	maxBuckets int

	rate, instanceRate, limit, util           *prometheus.Desc
	throttled, throttleSec                    *prometheus.Desc
	shadowRecords, shadowThrottled, shadowSec *prometheus.Desc
	buckets, unexported, routes               *prometheus.Desc
	evictions, expired                        *prometheus.Desc
}

// bucketLabels name a bucket: Kafka's tags user and client_id, and
// client_id_prefix for a client-id prefix group (user and client_id are then
// ""), so that the group "bar-" and a client-id spelled "bar-" are two series;
// a per-topic quota's bucket also has its topic, or its topic prefix in
// topic_prefix (both "" for a client quota's bucket).
var bucketLabels = []string{"quota", "user", "client_id", "client_id_prefix", "topic", "topic_prefix"}

// RegisterQuotas adds the quota metrics of eng, with per-bucket series for
// at most maxBuckets buckets (the busiest; at least 1).
func (m *Metrics) RegisterQuotas(eng *quota.Engine, maxBuckets int) {
	m.RegisterQuotasAt(eng, maxBuckets, time.Now)
}

// RegisterQuotasAt is RegisterQuotas reading the buckets at now() on each
// scrape: for an engine driven by an explicit clock.
func (m *Metrics) RegisterQuotasAt(eng *quota.Engine, maxBuckets int, now func() time.Time) {
	m.Registry.MustRegister(&quotaCollector{
		eng:        eng,
		now:        now,
		maxBuckets: max(maxBuckets, 1),
		rate: prometheus.NewDesc("tollgate_quota_rate",
			"Current rate of a quota bucket, per second: bytes for byte rates, partitions for controller_mutation_rate.", bucketLabels, nil),
		instanceRate: prometheus.NewDesc("tollgate_quota_instance_rate",
			"This instance's own part of tollgate_quota_rate in a Tollgate cluster (its connections' traffic, smoothed over exchange intervals), where tollgate_quota_rate is the whole cluster's; equal to tollgate_quota_rate outside one.", bucketLabels, nil),
		limit: prometheus.NewDesc("tollgate_quota_limit",
			"The quota that bounds a bucket (absent when no quota applies).", bucketLabels, nil),
		util: prometheus.NewDesc("tollgate_quota_utilization",
			"Rate divided by quota: 1 means at the quota, above 1 means throttled.", bucketLabels, nil),
		throttled: prometheus.NewDesc("tollgate_quota_throttled_total",
			"Responses throttled by this bucket.", bucketLabels, nil),
		throttleSec: prometheus.NewDesc("tollgate_quota_throttle_seconds_total",
			"Total throttle time imposed by this bucket.", bucketLabels, nil),
		shadowRecords: prometheus.NewDesc("tollgate_quota_shadow_records_total",
			"Records (produce requests, fetch responses, partition mutations) counted into a bucket while its quota is in shadow mode.", bucketLabels, nil),
		shadowThrottled: prometheus.NewDesc("tollgate_quota_shadow_throttled_total",
			"Records a shadow quota would have throttled (or refused); nothing was applied.", bucketLabels, nil),
		shadowSec: prometheus.NewDesc("tollgate_quota_shadow_throttle_seconds_total",
			"Throttle time a shadow quota would have imposed; nothing was applied.", bucketLabels, nil),
		buckets: prometheus.NewDesc("tollgate_quota_buckets",
			"Live quota buckets (idle buckets expire after an hour).", []string{"quota"}, nil),
		unexported: prometheus.NewDesc("tollgate_quota_buckets_unexported",
			"Live quota buckets left out of the per-bucket series by quota.metrics_max_buckets (the least busy).", []string{"quota"}, nil),
		routes: prometheus.NewDesc("tollgate_quota_routes",
			"Cached (user, client-id) to bucket resolutions (bounded by quota.max_routes).", []string{"quota"}, nil),
		evictions: prometheus.NewDesc("tollgate_quota_evictions_total",
			"Quota state evicted to stay within quota.max_buckets and quota.max_routes: kind bucket, throttled_bucket (a throttled client let off: raise quota.max_buckets) or route.", []string{"quota", "kind"}, nil),
		expired: prometheus.NewDesc("tollgate_quota_expired_total",
			"Quota state dropped after an hour idle, as Kafka expires its sensors: kind bucket or route.", []string{"quota", "kind"}, nil),
	})
}

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rate, c.instanceRate, c.limit, c.util, c.throttled, c.throttleSec,
		c.shadowRecords, c.shadowThrottled, c.shadowSec,
		c.buckets, c.unexported, c.routes, c.evictions, c.expired} {
		ch <- d
	}
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	top, live := c.eng.Busiest(c.now(), c.maxBuckets)
	exported := map[model.Key]int{}
	for _, u := range top {
		exported[u.Key]++
		lv := []string{u.Key.String(), u.User, u.ClientID, "", u.Topic, ""}
		if u.ClientIDPrefix {
			lv[2], lv[3] = "", u.ClientID
		}
		if u.TopicPrefix {
			lv[4], lv[5] = "", u.Topic
		}
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, u.Rate, lv...)
		ch <- prometheus.MustNewConstMetric(c.instanceRate, prometheus.GaugeValue, u.InstanceRate, lv...)
		if u.Level != model.LevelNone {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, u.Quota, lv...)
			ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, u.Utilization, lv...)
		}
		ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.CounterValue, float64(u.Throttles), lv...)
		ch <- prometheus.MustNewConstMetric(c.throttleSec, prometheus.CounterValue, u.ThrottleTotal.Seconds(), lv...)
		if u.Shadow {
			ch <- prometheus.MustNewConstMetric(c.shadowRecords, prometheus.CounterValue, float64(u.Shadowed.Records), lv...)
			ch <- prometheus.MustNewConstMetric(c.shadowThrottled, prometheus.CounterValue, float64(u.Shadowed.Throttled), lv...)
			ch <- prometheus.MustNewConstMetric(c.shadowSec, prometheus.CounterValue, u.Shadowed.Total.Seconds(), lv...)
		}
	}
	gauge := func(d *prometheus.Desc, v int, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), lv...)
	}
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	for _, s := range c.eng.Stats() {
		k := s.Key.String()
		gauge(c.buckets, live[s.Key], k)
		gauge(c.unexported, live[s.Key]-exported[s.Key], k)
		gauge(c.routes, s.Routes, k)
		counter(c.evictions, s.EvictedBuckets-s.EvictedThrottledBuckets, k, "bucket")
		counter(c.evictions, s.EvictedThrottledBuckets, k, "throttled_bucket")
		counter(c.evictions, s.EvictedRoutes, k, "route")
		counter(c.expired, s.ExpiredBuckets, k, "bucket")
		counter(c.expired, s.ExpiredRoutes, k, "route")
	}
}
