package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/diskguard"
)

// storageCollector exports the disk-full protection's last reading.
type storageCollector struct {
	g                                *diskguard.Guard
	low, usable, total, failures, at *prometheus.Desc
}

// RegisterStorage adds the disk-full protection's metrics, read from g.
func (m *Metrics) RegisterStorage(g *diskguard.Guard) {
	dir := []string{"broker", "dir"}
	m.Registry.MustRegister(&storageCollector{g: g,
		low: prometheus.NewDesc("tollgate_storage_low",
			"1 while the cluster is low on disk (a broker's log directory below storage.min_free_bytes or storage.min_free_ratio, or a failed probe under on_probe_failure: hold): every Produce is held and throttled by storage.hold.", nil, nil),
		usable: prometheus.NewDesc("tollgate_storage_usable_bytes",
			"Usable bytes of each broker log directory's volume at the last check (DescribeLogDirs, Kafka 3.3+).", dir, nil),
		total: prometheus.NewDesc("tollgate_storage_total_bytes",
			"Total bytes of each broker log directory's volume at the last check.", dir, nil),
		failures: prometheus.NewDesc("tollgate_storage_probe_failures_total",
			"Checks of the brokers' log directories that failed (no answer, or not authorized).", nil, nil),
		at: prometheus.NewDesc("tollgate_storage_last_check_timestamp_seconds",
			"When the brokers' log directories were last checked, in Unix seconds (0: never; no bound is set).", nil, nil),
	})
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.low, c.usable, c.total, c.failures, c.at} {
		ch <- d
	}
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.State()
	low := 0.0
	if c.g.Hold() > 0 {
		low = 1
	}
	ch <- prometheus.MustNewConstMetric(c.low, prometheus.GaugeValue, low)
	for _, d := range st.Dirs {
		if d.Total < 0 {
			continue
		}
		b := strconv.Itoa(int(d.Broker))
		ch <- prometheus.MustNewConstMetric(c.usable, prometheus.GaugeValue, float64(d.Usable), b, d.Path)
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(d.Total), b, d.Path)
	}
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(c.g.ProbeFailures()))
	at := 0.0
	if !st.At.IsZero() {
		at = float64(st.At.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.at, prometheus.GaugeValue, at)
}
