package app

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
)

// AuditConfig says where audit events go.
type AuditConfig struct {
	// File is the JSON-lines audit log (default <data_dir>/audit.log; "-"
	// disables it). Each event is appended and fsync'd before the
	// response that reports the change is sent.
	File string `yaml:"file"`
	// Stdout also writes each event to standard output.
	Stdout bool `yaml:"stdout"`
	// Topic also produces each event to this topic on the upstream
	// cluster (acks=all, synchronous).
	Topic string `yaml:"topic"`
	// Required refuses an alteration whose event cannot be written to
	// every sink (fail closed).
	Required bool `yaml:"required"`
	// AggregateInterval sums denials (failed logins, refused
	// alterations): per action, principal, source address and listener,
	// the first of an interval is written and the rest are counted into
	// one event at its end (default 1m; negative: every denial is written).
	AggregateInterval time.Duration `yaml:"aggregate_interval"`
	// MaxFileSize rotates the audit file before an event would take it
	// past this many bytes (default 104857600; negative: never).
	MaxFileSize int64 `yaml:"max_file_size"`
	// MaxFiles is how many rotated files are kept (default 10).
	MaxFiles int `yaml:"max_files"`
}

// Audit defaults.
const (
	DefaultAuditAggregateInterval = time.Minute
	DefaultAuditMaxFileSize       = 100 << 20
	DefaultAuditMaxFiles          = 10
)

// Validate checks the audit section offline.
func (c AuditConfig) Validate() error {
	if c.MaxFiles < 0 {
		return fmt.Errorf("audit.max_files %d must not be negative", c.MaxFiles)
	}
	return nil
}

func (c AuditConfig) aggregateInterval() time.Duration {
	switch {
	case c.AggregateInterval == 0:
		return DefaultAuditAggregateInterval
	case c.AggregateInterval < 0:
		return 0
	}
	return c.AggregateInterval
}

func (c AuditConfig) rotation() audit.FileOption {
	size, files := c.MaxFileSize, c.MaxFiles
	if size == 0 {
		size = DefaultAuditMaxFileSize
	}
	if files == 0 {
		files = DefaultAuditMaxFiles
	}
	return audit.WithRotation(size, files)
}

// AuthorizationConfig says who may use the control plane. It is re-read on
// reload (reload.go).
type AuthorizationConfig struct {
	// QuotaAdmins are the principals allowed to alter quotas and
	// Tollgate's broker configs ("alice" or "User:alice").
	QuotaAdmins []string `yaml:"quota_admins"`
	// AllowAnonymousDescribe lets unauthenticated (ANONYMOUS) clients
	// describe quotas and configs; authenticated principals always may.
	AllowAnonymousDescribe bool `yaml:"allow_anonymous_describe"`
}

func (c AuthorizationConfig) admins() control.Admins {
	return control.Admins{Principals: c.QuotaAdmins, AllowAnonymousDescribe: c.AllowAnonymousDescribe}
}

func (c *Config) dataDir() string {
	if c.DataDir != "" {
		return c.DataDir
	}
	return "tollgate-data"
}

// openControl opens the store and audit log and builds the control plane.
func (a *App) openControl(upstream []string) error {
	st, err := store.Open(a.cfg.dataDir())
	if err != nil {
		return fmt.Errorf("data_dir %s: %w", a.cfg.dataDir(), err)
	}
	a.store = st
	var outs []audit.Output
	file := a.cfg.Audit.File
	if file == "" {
		file = filepath.Join(a.cfg.dataDir(), "audit.log")
	}
	if file != "-" {
		fs, err := audit.OpenFileSink(file, a.cfg.Audit.rotation())
		if err != nil {
			return fmt.Errorf("audit.file: %w", err)
		}
		outs = append(outs, audit.Output{Sink: fs, Required: a.cfg.Audit.Required})
	}
	if a.cfg.Audit.Stdout {
		outs = append(outs, audit.Output{Sink: audit.NewWriterSink("stdout", os.Stdout), Required: a.cfg.Audit.Required})
	}
	if a.cfg.Audit.Topic != "" {
		ts, err := a.newTopicSink(upstream, a.cfg.Audit.Topic)
		if err != nil {
			return fmt.Errorf("audit.topic: %w", err)
		}
		outs = append(outs, audit.Output{Sink: ts, Required: a.cfg.Audit.Required})
	}
	a.audit = audit.NewLogger(audit.Config{Outputs: outs, OnError: func(sink string, err error) {
		a.log.Error("audit sink failed", "sink", sink, "err", err)
	}, AggregateInterval: a.cfg.Audit.aggregateInterval()})
	a.metrics.RegisterAudit(a.audit.Aggregated)
	a.ctl = &control.ClientQuotas{
		Store:    st,
		Audit:    a.audit,
		Authz:    a.admins, // replaced on reload, for every holder at once
		OnChange: a.applyQuotas,
	}
	a.ctl.SetFixed(fileEntities(a.cfg.Quotas))
	a.creds = &control.Credentials{Store: st, Audit: a.audit, Authz: a.ctl.Authz, OnChange: a.closeWithdrawn}
	if err := a.creds.Load(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	a.openTenants()
	a.brokers = &control.BrokerConfigs{
		Store:    st,
		Audit:    a.audit,
		Authz:    a.ctl.Authz,
		Defaults: brokerConfigDefaults(a.cfg.Listeners),
		Static: func() map[string]string {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.cfg.BrokerConfigs
		},
		Validate: func(eff map[string]string) error {
			a.mu.Lock()
			cfg := a.cfg
			ips := a.ipQuotas
			a.mu.Unlock()
			cfg.BrokerConfigs = nil
			_, err := admissionSettings(&cfg, eff, ips)
			return err
		},
		OnChange: func(map[string]string) {
			if err := a.refreshQuotas(); err != nil {
				a.log.Error("broker configs not applied", "err", err)
			}
		},
	}
	if a.telemetry != nil {
		a.clientMetrics = &control.ClientMetrics{Store: st, Audit: a.audit, Authz: a.ctl.Authz, OnChange: a.telemetry.SetClientSubscriptions}
		if err := a.refreshClientMetrics(); err != nil {
			return fmt.Errorf("client-metrics subscriptions: %w", err)
		}
	}
	return nil
}

// refreshClientMetrics gives the telemetry manager the stored
// client-metrics subscriptions.
func (a *App) refreshClientMetrics() error {
	if a.clientMetrics == nil {
		return nil
	}
	subs, err := a.clientMetrics.Subscriptions()
	if err != nil {
		return err
	}
	a.telemetry.SetClientSubscriptions(subs)
	return nil
}

// refreshQuotas recomputes the engine's and admission's input from the
// store and the file.
func (a *App) refreshQuotas() error {
	a.loadTenants()
	q, ips, err := a.ctl.Quotas()
	if err != nil {
		return err
	}
	a.applyQuotas(q, ips)
	return nil
}

func (a *App) applyQuotas(q model.Quotas, ips control.IPQuotas) {
	a.engine.SetQuotas(q)
	a.mu.Lock()
	a.ipQuotas = ips
	cfg := a.cfg
	a.mu.Unlock()
	var dynamic map[string]string
	if a.brokers != nil {
		var err error
		if dynamic, err = a.brokers.Dynamic(); err != nil {
			a.log.Error("cannot read broker configs", "err", err)
		}
	}
	as, err := admissionSettings(&cfg, dynamic, ips)
	if err != nil {
		a.log.Error("connection quotas not applied", "err", err)
		return
	}
	if a.admit != nil {
		// In a Tollgate cluster each instance enforces its part.
		if err := a.admit.Update(as.Split(a.clusterLive()), time.Now()); err != nil {
			a.log.Error("connection quotas not applied", "err", err)
			return
		}
	}
	a.mu.Lock()
	a.admSettings = as
	a.mu.Unlock()
}

// fileEntities turns the config file's quota entries into store entities
// (the file layer laid over the store), as the quota model parses them.
func fileEntities(entries []QuotaEntry) []store.EntityQuotas {
	var out []store.EntityQuotas
	for _, e := range entries {
		en, bad := e.Parse()
		if len(bad) > 0 {
			continue // buildQuotas reported it
		}
		ent, err := store.EntityOfParts(en.Parts)
		if err != nil {
			continue
		}
		out = append(out, store.EntityQuotas{Entity: ent, Values: en.Values})
	}
	return control.Overlay(nil, out)
}

// newTopicSink connects to the upstream cluster as the gateway's metadata
// client does: through Options.UpstreamDial if set, with upstream.tls and
// upstream.sasl — the audit topic is on the same cluster, behind the same
// listener security.
func (a *App) newTopicSink(upstream []string, topic string) (*audit.TopicSink, error) {
	opts, err := a.upstreamClientOpts(upstream, "tollgate-audit")
	if err != nil {
		return nil, err
	}
	return audit.NewTopicSink(topic, opts...)
}
