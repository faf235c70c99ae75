package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/telemetry"
)

// telemetryCollector reads the clients' own metrics (KIP-714) at scrape
// time. Its per-series families are labelled by user and client-id,
// strings clients choose, so they are bounded by telemetry.max_series (the
// least recently pushed series evicted first, counted in
// tollgate_client_telemetry_evictions_total).
type telemetryCollector struct {
	m   *telemetry.Manager
	now func() time.Time

	throttleAvg, throttleMax       *prometheus.Desc
	latencyAvg, latencyMax         *prometheus.Desc
	nodeLatencyAvg, nodeLatencyMax *prometheus.Desc
	queueAvg, queueMax             *prometheus.Desc
	instances, lastPush            *prometheus.Desc
	series, clientInstances        *prometheus.Desc
	evictions, expired, requests   *prometheus.Desc

	// families is where each chosen metric goes, by telemetry.Metric.
	families [telemetry.NumMetrics]telemetryFamily
}

// telemetryFamily is the family a chosen metric is exported as, and its
// api label.
type telemetryFamily struct {
	desc *prometheus.Desc
	api  string // "" for families without the label
}

// RegisterTelemetry adds the clients' own metrics, read from m at now().
func (m *Metrics) RegisterTelemetry(tm *telemetry.Manager, now func() time.Time) {
	labels := []string{"user", "client_id"}
	withAPI := []string{"user", "client_id", "api"}
	c := &telemetryCollector{
		m:   tm,
		now: now,
		throttleAvg: prometheus.NewDesc("tollgate_client_throttle_time_avg_seconds",
			"The clients' own average throttle time over their last push interval, as they pushed it (KIP-714): api produce (produce.throttle.time.avg) or fetch (fetch.manager.fetch.throttle.time.avg); the mean over the series' client instances.", withAPI, nil),
		throttleMax: prometheus.NewDesc("tollgate_client_throttle_time_max_seconds",
			"The clients' own largest throttle time over their last push interval (KIP-714), api produce or fetch; the largest of the series' client instances.", withAPI, nil),
		latencyAvg: prometheus.NewDesc("tollgate_client_request_latency_avg_seconds",
			"The clients' own average request latency over their last push interval (KIP-714): api produce (producer.request.latency.avg) or fetch (fetch.manager.fetch.latency.avg).", withAPI, nil),
		latencyMax: prometheus.NewDesc("tollgate_client_request_latency_max_seconds",
			"The clients' own largest request latency over their last push interval (KIP-714), api produce or fetch.", withAPI, nil),
		nodeLatencyAvg: prometheus.NewDesc("tollgate_client_node_request_latency_avg_seconds",
			"The clients' own average latency of every request to a broker (node.request.latency.avg, KIP-714), averaged over the brokers.", labels, nil),
		nodeLatencyMax: prometheus.NewDesc("tollgate_client_node_request_latency_max_seconds",
			"The clients' own largest latency of a request to a broker (node.request.latency.max, KIP-714).", labels, nil),
		queueAvg: prometheus.NewDesc("tollgate_client_record_queue_time_avg_seconds",
			"The producers' own average time a record waited in their buffer before it was sent (record.queue.time.avg, KIP-714): grows while they are throttled.", labels, nil),
		queueMax: prometheus.NewDesc("tollgate_client_record_queue_time_max_seconds",
			"The producers' own largest time a record waited in their buffer (record.queue.time.max, KIP-714).", labels, nil),
		instances: prometheus.NewDesc("tollgate_client_telemetry_instances",
			"Client instances whose last push the series holds (until they expire).", labels, nil),
		lastPush: prometheus.NewDesc("tollgate_client_telemetry_last_push_timestamp_seconds",
			"When the series' last push was accepted, in Unix seconds.", labels, nil),
		series: prometheus.NewDesc("tollgate_client_telemetry_series",
			"Live (user, client-id) series of the clients' own metrics (bounded by telemetry.max_series).", nil, nil),
		clientInstances: prometheus.NewDesc("tollgate_client_telemetry_client_instances",
			"KIP-714 client instances tracked (bounded by telemetry.max_client_instances).", nil, nil),
		evictions: prometheus.NewDesc("tollgate_client_telemetry_evictions_total",
			"Telemetry state evicted at its cap: kind series (the least recently pushed, at telemetry.max_series) or client_instance (the least recently seen, at telemetry.max_client_instances).", []string{"kind"}, nil),
		expired: prometheus.NewDesc("tollgate_client_telemetry_expired_total",
			"Client instances forgotten after sending nothing for the longer of a minute and three push intervals, as Kafka expires them.", nil, nil),
		requests: prometheus.NewDesc("tollgate_client_telemetry_requests_total",
			"GetTelemetrySubscriptions and PushTelemetry requests answered, per API and Kafka error (NONE when accepted).", []string{"api", "error"}, nil),
	}
	c.families = [telemetry.NumMetrics]telemetryFamily{
		telemetry.ProduceThrottleAvg: {c.throttleAvg, "produce"}, telemetry.ProduceThrottleMax: {c.throttleMax, "produce"},
		telemetry.FetchThrottleAvg: {c.throttleAvg, "fetch"}, telemetry.FetchThrottleMax: {c.throttleMax, "fetch"},
		telemetry.ProduceLatencyAvg: {c.latencyAvg, "produce"}, telemetry.ProduceLatencyMax: {c.latencyMax, "produce"},
		telemetry.FetchLatencyAvg: {c.latencyAvg, "fetch"}, telemetry.FetchLatencyMax: {c.latencyMax, "fetch"},
		telemetry.NodeLatencyAvg: {c.nodeLatencyAvg, ""}, telemetry.NodeLatencyMax: {c.nodeLatencyMax, ""},
		telemetry.QueueTimeAvg: {c.queueAvg, ""}, telemetry.QueueTimeMax: {c.queueMax, ""},
	}
	m.Registry.MustRegister(c)
}

func (c *telemetryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.throttleAvg, c.throttleMax, c.latencyAvg, c.latencyMax,
		c.nodeLatencyAvg, c.nodeLatencyMax, c.queueAvg, c.queueMax, c.instances, c.lastPush,
		c.series, c.clientInstances, c.evictions, c.expired, c.requests} {
		ch <- d
	}
}

func (c *telemetryCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	for _, s := range c.m.Series(now) {
		for mt := telemetry.Metric(0); mt < telemetry.NumMetrics; mt++ {
			ms, ok := s.Values.Get(mt)
			if !ok {
				continue
			}
			f := c.families[mt]
			if f.api != "" {
				gauge(f.desc, ms/1000, s.User, s.ClientID, f.api)
			} else {
				gauge(f.desc, ms/1000, s.User, s.ClientID)
			}
		}
		gauge(c.instances, float64(s.Instances), s.User, s.ClientID)
		gauge(c.lastPush, float64(s.LastPush.UnixNano())/1e9, s.User, s.ClientID)
	}
	st := c.m.Stats(now)
	gauge(c.series, float64(st.Series))
	gauge(c.clientInstances, float64(st.ClientInstances))
	counter(c.evictions, st.EvictedSeries, "series")
	counter(c.evictions, st.EvictedInstances, "client_instance")
	counter(c.expired, st.ExpiredInstances)
	for _, r := range st.Requests {
		counter(c.requests, r.N, kmsg.NameForKey(r.API), ErrorName(r.ErrorCode))
	}
}

// ErrorName is Kafka's name of an error code (Errors.name()): NONE for 0.
func ErrorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return "UNKNOWN_SERVER_ERROR"
}
