package telemetry

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// Defaults and bounds of the telemetry settings.
const (
	// DefaultPushInterval is what Tollgate asks clients for. Kafka's
	// default (interval.ms) is 5 minutes, for brokers that forward
	// metrics to a collector; Tollgate shows them next to its own live
	// view of the client, so 30 s: fresh enough for a dashboard that
	// refreshes every second and a Prometheus scrape, and one small
	// request per client every 30 s.
	DefaultPushInterval = 30 * time.Second
	// MinPushInterval and MaxPushInterval are Kafka's bounds of
	// interval.ms.
	MinPushInterval = 100 * time.Millisecond
	MaxPushInterval = time.Hour
	// DefaultMaxBytes bounds a push, compressed and once decompressed.
	// Kafka's telemetry.max.bytes defaults to 1 MiB; Tollgate decodes
	// every push itself and asks only for the metrics it shows (a
	// librdkafka push of all its metrics is about 2 KB), so 64 KiB.
	DefaultMaxBytes = 64 << 10
	// DefaultMaxClientInstances is Kafka's cap on the client instances a
	// broker tracks (ClientMetricsManager's cache).
	DefaultMaxClientInstances = 16384
	// DefaultMaxSeries bounds the (user, client-id) series exported.
	DefaultMaxSeries = 1000
)

// DefaultMetrics are the metric name prefixes Tollgate subscribes clients
// to: those of the metrics it shows (Chosen), so that clients push nothing
// else.
var DefaultMetrics = []string{
	"org.apache.kafka.producer.produce.throttle.time",
	"org.apache.kafka.consumer.fetch.manager.fetch.throttle.time",
	"org.apache.kafka.producer.request.latency",
	"org.apache.kafka.consumer.fetch.manager.fetch.latency",
	"org.apache.kafka.producer.node.request.latency",
	"org.apache.kafka.consumer.node.request.latency",
	"org.apache.kafka.producer.record.queue.time",
}

// Config is the telemetry section of tollgate.yaml.
type Config struct {
	// Enabled answers GetTelemetrySubscriptions and PushTelemetry and
	// advertises them in ApiVersions (default true).
	Enabled *bool `yaml:"enabled"`
	// PushInterval is the push interval clients are given; a named
	// client-metrics subscription a client matches may shorten it.
	PushInterval time.Duration `yaml:"push_interval"`
	// Metrics are the metric name prefixes every client is asked to push,
	// with those of the named client-metrics subscriptions it matches; "*"
	// alone asks for all of them.
	Metrics []string `yaml:"metrics"`
	// MaxBytes bounds a push's metrics, compressed and decompressed.
	MaxBytes int `yaml:"max_bytes"`
	// MaxClientInstances bounds the client instances tracked at once.
	MaxClientInstances int `yaml:"max_client_instances"`
	// MaxSeries bounds the (user, client-id) series kept at once.
	MaxSeries int `yaml:"max_series"`
}

// On reports telemetry.enabled (default true).
func (c Config) On() bool { return c.Enabled == nil || *c.Enabled }

// Subscription is Tollgate's own subscription, which the settings give
// every client.
func (c Config) Subscription() Subscription {
	s := Subscription{PushInterval: cmp.Or(c.PushInterval, DefaultPushInterval), Metrics: c.Metrics}
	if len(s.Metrics) == 0 {
		s.Metrics = DefaultMetrics
	}
	return s
}

// Options are the Manager's settings the config gives.
func (c Config) Options() Options {
	return Options{Subscription: c.Subscription(), MaxBytes: cmp.Or(c.MaxBytes, DefaultMaxBytes),
		MaxClientInstances: cmp.Or(c.MaxClientInstances, DefaultMaxClientInstances), MaxSeries: cmp.Or(c.MaxSeries, DefaultMaxSeries)}
}

// Validate checks the telemetry section offline.
func (c Config) Validate() error {
	var errs []error
	if c.PushInterval != 0 && (c.PushInterval < MinPushInterval || c.PushInterval > MaxPushInterval) {
		errs = append(errs, fmt.Errorf("telemetry.push_interval %s: want from %s to %s", c.PushInterval, MinPushInterval, MaxPushInterval))
	}
	if c.PushInterval%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("telemetry.push_interval %s: want whole milliseconds", c.PushInterval))
	}
	for i, m := range c.Metrics {
		if m == "" {
			errs = append(errs, fmt.Errorf("telemetry.metrics[%d] is empty: list metric name prefixes, or \"*\" alone for all", i))
		}
		if m == "*" && len(c.Metrics) > 1 {
			errs = append(errs, errors.New(`telemetry.metrics: "*" asks for every metric and must be alone`))
		}
	}
	if c.MaxBytes < 0 || c.MaxBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("telemetry.max_bytes %d: want from 1 to 1073741824", c.MaxBytes))
	}
	if c.MaxClientInstances < 0 {
		errs = append(errs, fmt.Errorf("telemetry.max_client_instances %d: want at least 1", c.MaxClientInstances))
	}
	if c.MaxSeries < 0 {
		errs = append(errs, fmt.Errorf("telemetry.max_series %d: want at least 1", c.MaxSeries))
	}
	return errors.Join(errs...)
}
