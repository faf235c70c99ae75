package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// QuotaSettings are Kafka's quota.* broker settings. They take effect at
// start; changing them needs a restart (as in Kafka, where they are
// static).
type QuotaSettings struct {
	// WindowNum is quota.window.num (default 11).
	WindowNum int `yaml:"window_num"`
	// WindowSize is quota.window.size.seconds (default 1s).
	WindowSize time.Duration `yaml:"window_size"`
	// MaxThrottle caps a byte-rate throttle (default 30s; Kafka has no
	// cap). Negative: no cap.
	MaxThrottle time.Duration `yaml:"max_throttle"`
	// ControllerWindowNum and ControllerWindowSize are
	// controller.quota.window.num / .size.seconds (defaults 11, 1s).
	ControllerWindowNum  int           `yaml:"controller_window_num"`
	ControllerWindowSize time.Duration `yaml:"controller_window_size"`
	// ByteRateAlgorithm is how producer_byte_rate and consumer_byte_rate
	// measure a client: "token_bucket" (default) or "sampled" (Kafka's
	// arithmetic exactly). See docs/quotas.md.
	ByteRateAlgorithm string `yaml:"byte_rate_algorithm"`
	// MaxBuckets and MaxRoutes bound the quota state of each quota type:
	// buckets (one per client Kafka keeps a sensor for) and cached
	// (user, client-id) resolutions (defaults 100 000 and 200 000). A
	// client choosing a new client-id per request cannot grow either; at
	// the cap the least recently used unthrottled entries are evicted.
	// See docs/quotas.md.
	MaxBuckets int `yaml:"max_buckets"`
	MaxRoutes  int `yaml:"max_routes"`
	// MetricsMaxBuckets bounds the buckets exported with per-bucket series
	// on /metrics, the busiest first (default 1000).
	MetricsMaxBuckets int `yaml:"metrics_max_buckets"`
}

// DefaultByteRateAlgorithm is quota.byte_rate_algorithm's default.
const DefaultByteRateAlgorithm = "token_bucket"

// DefaultMetricsMaxBuckets is quota.metrics_max_buckets's default.
const DefaultMetricsMaxBuckets = 1000

// Validate checks the settings that have no meaning below zero; the rest is
// checked by engineConfig (the algorithm name) and quota.NewEngine.
func (s QuotaSettings) Validate() error {
	var errs []error
	for _, c := range []struct {
		key string
		v   int
		def int
	}{
		{"quota.max_buckets", s.MaxBuckets, quota.DefaultMaxBuckets},
		{"quota.max_routes", s.MaxRoutes, quota.DefaultMaxRoutes},
		{"quota.metrics_max_buckets", s.MetricsMaxBuckets, DefaultMetricsMaxBuckets},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d, want at least 1 (absent or 0: the default, %d)", c.key, c.v, c.def))
		}
	}
	return errors.Join(errs...)
}

// metricsMaxBuckets is quota.metrics_max_buckets with its default.
func (s QuotaSettings) metricsMaxBuckets() int {
	if s.MetricsMaxBuckets == 0 {
		return DefaultMetricsMaxBuckets
	}
	return s.MetricsMaxBuckets
}

func (s QuotaSettings) engineConfig() (quota.EngineConfig, error) {
	if err := s.Validate(); err != nil {
		return quota.EngineConfig{}, err
	}
	name := s.ByteRateAlgorithm
	if name == "" {
		name = DefaultByteRateAlgorithm
	}
	alg, err := quota.ParseByteRateAlgorithm(name)
	if err != nil {
		return quota.EngineConfig{}, fmt.Errorf("quota.byte_rate_algorithm: %q is neither token_bucket nor sampled", name)
	}
	return quota.EngineConfig{
		ByteRate:             alg,
		WindowNum:            s.WindowNum,
		WindowSize:           s.WindowSize,
		MaxThrottle:          s.MaxThrottle,
		ControllerWindowNum:  s.ControllerWindowNum,
		ControllerWindowSize: s.ControllerWindowSize,
		MaxBuckets:           s.MaxBuckets,
		MaxRoutes:            s.MaxRoutes,
		// One bucket, many connections: hold them all to one deadline.
		SharedDeadline: true,
	}, nil
}

// QuotaEntry is one entity's quotas in the config file (model.FileEntry,
// shared with `tollgate quotas apply`, which reads the same shape).
type QuotaEntry = model.FileEntry

// buildQuotas turns the config entries into a quota set, validating them as
// Kafka's AlterClientQuotas does (model.Entries); ip entities are
// admission's (admissionSettings).
func buildQuotas(entries []QuotaEntry) (model.Quotas, error) {
	var q model.Quotas
	var errs []error
	var set model.Entries
	for i, e := range entries {
		en, bad := set.Add(e)
		for _, err := range bad {
			errs = append(errs, fmt.Errorf("quotas[%d]: %w", i, err))
		}
		ent, ok := en.Entity()
		if len(bad) > 0 || !ok {
			continue
		}
		for _, k := range model.Keys() {
			if v, ok := en.Values[k.String()]; ok {
				if err := q.Set(ent, k, v); err != nil {
					errs = append(errs, fmt.Errorf("quotas[%d]: %w", i, err))
				}
			}
		}
		if o := en.Options(); o != (model.Options{}) {
			// Entries set each option once: merge those of the entity's
			// other entries.
			if was := q.Options(ent); was.Shadow || was.HasBurst {
				o.Shadow = o.Shadow || was.Shadow
				if !o.HasBurst {
					o.Burst, o.HasBurst = was.Burst, was.HasBurst
				}
			}
			if err := q.SetOptions(ent, o); err != nil {
				errs = append(errs, fmt.Errorf("quotas[%d]: %w", i, err))
			}
		}
	}
	return q, errors.Join(errs...)
}

// logModeChanges logs each file entity whose quotas changed mode (shadow or
// enforced) in a reload. A change through the Kafka API is audited; the
// config file is its own record, and this line says when it took effect.
func (a *App) logModeChanges(before, after []QuotaEntry) {
	modes := func(es []QuotaEntry) map[model.Entity]bool {
		m := map[model.Entity]bool{}
		for _, e := range es {
			en, errs := e.Parse()
			if ent, ok := en.Entity(); ok && len(errs) == 0 {
				m[ent] = m[ent] || e.Shadow
			}
		}
		return m
	}
	was, is := modes(before), modes(after)
	for ent, shadow := range is {
		if was[ent] != shadow { // a new entity is logged when it comes in shadow
			a.log.Info("quota mode changed", "entity", ent.String(), "mode", modeName(shadow), "file", a.path)
		}
	}
	for ent, shadow := range was {
		if _, ok := is[ent]; !ok && shadow {
			a.log.Info("quota mode changed", "entity", ent.String(), "mode", "removed", "file", a.path)
		}
	}
}

func modeName(shadow bool) string {
	if shadow {
		return "shadow"
	}
	return "enforced"
}
