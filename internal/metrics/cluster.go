package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/cluster"
)

// clusterCollector reads a Tollgate cluster's state at each scrape.
type clusterCollector struct {
	status func() (cluster.Status, bool)

	instances, connected, logReady, logNext *prometheus.Desc
	reports, bytes, entries                 *prometheus.Desc
	refused, signed                         *prometheus.Desc
}

// RegisterCluster adds the Tollgate cluster metrics, read from status at
// each scrape (ok false: not in a cluster, no series).
func (m *Metrics) RegisterCluster(status func() (cluster.Status, bool)) {
	m.clusterEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_cluster_membership_events_total",
		Help: "Membership changes this instance saw: event join, leave (reason left: shut down cleanly; timeout: silent for cluster.session_timeout), restart (a new process with a known id), conflict (another process reports with this instance's id).",
	}, []string{"event", "reason"})
	for _, lv := range [][2]string{{"join", ""}, {"leave", "left"}, {"leave", "timeout"}, {"restart", ""}, {"conflict", ""}} {
		m.clusterEvents.WithLabelValues(lv[0], lv[1]) // every series from 0
	}
	m.Registry.MustRegister(m.clusterEvents, &clusterCollector{
		status: status,
		instances: prometheus.NewDesc("tollgate_cluster_instances",
			"Live instances of the Tollgate cluster as this one sees them, itself included.", nil, nil),
		connected: prometheus.NewDesc("tollgate_cluster_connected",
			"1 while this instance hears its own usage reports come back through the exchange topic; 0 when cut off (its quotas fall back, docs/cluster.md).", nil, nil),
		logReady: prometheus.NewDesc("tollgate_cluster_config_log_ready",
			"1 once the shared configuration topic has been read since start; alterations are refused until then.", nil, nil),
		logNext: prometheus.NewDesc("tollgate_cluster_config_log_offset",
			"The next offset of the shared configuration topic this instance will apply.", nil, nil),
		reports: prometheus.NewDesc("tollgate_cluster_reports_total",
			"Usage reports (parts) of the exchange: result published, failed (not taken by the upstream), received, or rejected (malformed, or another process with this instance's id).", []string{"result"}, nil),
		bytes: prometheus.NewDesc("tollgate_cluster_exchange_bytes_total",
			"Bytes of usage reports this instance published (direction out) and read (in).", []string{"direction"}, nil),
		entries: prometheus.NewDesc("tollgate_cluster_exchange_entries_total",
			"Bucket entries this instance published: one per bucket with traffic per exchange interval.", nil, nil),
		refused: prometheus.NewDesc("tollgate_cluster_refused_total",
			"Records of the configuration topic (topic config) and report parts of the exchange topic (topic exchange) not applied because their signature check failed, by reason: unsigned, unknown_key, bad_signature, expired_key, stale, malformed, no_secret (docs/cluster.md). Anything above 0 means someone other than this Tollgate cluster writes its topics, or its instances hold different secrets.", []string{"topic", "reason"}, nil),
		signed: prometheus.NewDesc("tollgate_cluster_signed",
			"1 when this instance signs and checks the Tollgate cluster's records and reports (cluster.secret_file), 0 when it trusts whatever its topics hold.", nil, nil),
	})
}

// ClusterEvent counts one membership event (the exchange's OnEvent); a
// no-op before RegisterCluster.
func (m *Metrics) ClusterEvent(ev cluster.Event) {
	if m.clusterEvents != nil {
		m.clusterEvents.WithLabelValues(ev.Kind, ev.Reason).Inc()
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.instances, c.connected, c.logReady, c.logNext, c.reports, c.bytes, c.entries, c.refused, c.signed} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s, ok := c.status()
	if !ok {
		return
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(s.Live))
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, b(s.Connected))
	ch <- prometheus.MustNewConstMetric(c.logReady, prometheus.GaugeValue, b(s.ConfigLog.Ready))
	ch <- prometheus.MustNewConstMetric(c.logNext, prometheus.GaugeValue, float64(s.ConfigLog.Next))
	x := s.Exchange
	for res, v := range map[string]uint64{"published": x.Published, "failed": x.PublishFailed, "received": x.Received, "rejected": x.Rejected} {
		ch <- prometheus.MustNewConstMetric(c.reports, prometheus.CounterValue, float64(v), res)
	}
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(x.PublishedBytes), "out")
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(x.ReceivedBytes), "in")
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.CounterValue, float64(x.Entries))
	for _, r := range cluster.RefusedReasons {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.ConfigLog.Refused[r]), "config", r)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(x.Refused[r]), "exchange", r)
	}
	ch <- prometheus.MustNewConstMetric(c.signed, prometheus.GaugeValue, b(s.ConfigLog.Signed))
}
