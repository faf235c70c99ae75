package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/doctor"
)

type doctorOpts struct {
	config     string
	clockTopic string
	timeout    time.Duration
	json       bool
	strict     bool
}

func doctorFlags(o *doctorOpts, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "YAML config `file` to check (default: the built-in config, as serve)")
	fs.StringVar(&o.clockTopic, "clock-topic", doctor.DefaultClockTopic, "`topic` the clock check writes one record per broker to (created with LogAppendTime, 1h retention); empty: skip the clock check")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound on each connection attempt (default: upstream.dial_timeout, else 10s)")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.BoolVar(&o.strict, "strict", false, "exit 1 on warnings too")
	return fs
}

// doctorCmd is `tollgate doctor`: exit 0 when safe to start, 1 when a check
// failed (or, with --strict, warned), 2 on bad usage.
func doctorCmd(args []string, stdout, stderr io.Writer) int {
	var o doctorOpts
	fs := doctorFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: tollgate doctor [--config FILE] [--clock-topic T] [--timeout D] [--json] [--strict]")
		return 2
	}
	cfg := app.Default()
	if o.config != "" {
		var err error
		if cfg, err = app.Load(o.config); err != nil {
			fmt.Fprintln(stderr, "tollgate doctor: the config does not load:", err)
			return 1
		}
	}
	t, err := doctorTarget(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate doctor:", err)
		return 1
	}
	t.ClockTopic = o.clockTopic
	if o.timeout > 0 {
		t.DialTimeout = o.timeout
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results := doctor.Run(ctx, t)
	if o.json {
		err = doctor.WriteJSON(stdout, results)
	} else {
		err = doctor.WriteTable(stdout, results)
	}
	if err != nil {
		return 1
	}
	for _, r := range results {
		if r.Status == doctor.Fail || (o.strict && r.Status == doctor.Warn) {
			return 1
		}
	}
	return 0
}

// doctorTarget takes from the config what the checks need.
func doctorTarget(cfg app.Config) (doctor.Target, error) {
	t := doctor.Target{
		Upstream:    cfg.Upstream.Bootstrap,
		DevBrokers:  cfg.DevCluster.Brokers,
		DialTimeout: cfg.Upstream.DialTimeout,
		HTTPAddress: cfg.HTTP.Address,
		DataDir:     cfg.DataDir,
	}
	if t.DataDir == "" {
		t.DataDir = "tollgate-data" // app's default (docs/config.md)
	}
	if u := cfg.Upstream.TLS; u != nil {
		c, err := u.ClientConfig()
		if err != nil {
			return t, err
		}
		t.Client = append(t.Client, kgo.DialTLSConfig(c))
		t.TLS = append(t.TLS, doctor.TLSFiles{Name: "upstream", CertFile: u.CertFile, KeyFile: u.KeyFile, CAFile: u.CAFile})
	}
	if s := cfg.Upstream.SASL; s != nil {
		m, err := saslMechanism(s)
		if err != nil {
			return t, err
		}
		t.Client = append(t.Client, kgo.SASL(m))
	}
	if c := cfg.Cluster; c.On() {
		ct := &doctor.ClusterTopics{Signed: c.SecretFile != ""}
		ct.Config, ct.Exchange = c.Topics()
		if s := cfg.Upstream.SASL; s != nil && s.Username != "" {
			ct.Principal = "User:" + s.Username
		}
		t.Cluster = ct
	}
	t.Admission = admission.DefaultSettings()
	for _, l := range cfg.Listeners {
		t.Listeners = append(t.Listeners, doctor.Listener{Name: l.Name, Bootstrap: l.Bootstrap, AdvertisedHost: l.AdvertisedHost, BrokerPortBase: l.BrokerPortBase})
		t.Admission.Listeners = append(t.Admission.Listeners, admission.ListenerSettings{Name: l.Name, Exempt: l.Exempt})
		if l.TLS.CertFile == "" {
			continue
		}
		host := l.AdvertisedHost
		if host == "" {
			host, _, _ = net.SplitHostPort(l.Bootstrap)
		}
		var hosts []string
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			hosts = []string{host}
		}
		t.TLS = append(t.TLS, doctor.TLSFiles{Name: "listener " + l.Name, CertFile: l.TLS.CertFile, KeyFile: l.TLS.KeyFile, CAFile: l.TLS.ClientCAFile, Hosts: hosts})
	}
	for k, v := range cfg.BrokerConfigs {
		if err := t.Admission.Set(k, v); err != nil {
			return t, fmt.Errorf("broker_configs: %w", err) // Load validated them; kept for safety
		}
	}
	return t, nil
}

// saslMechanism is app's mapping of upstream.sasl (unexported there; the
// three names are Kafka's).
func saslMechanism(s *app.UpstreamSASL) (sasl.Mechanism, error) {
	switch strings.ToUpper(s.Mechanism) {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("upstream.sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
}
