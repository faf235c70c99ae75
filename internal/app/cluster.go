package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/cluster"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/tollgate/tollgate/internal/usage"
)

// ClusterConfig is the cluster section: instances whose configs carry the
// same id and front the same upstream form one Tollgate cluster
// (docs/cluster.md). Without an id nothing of it applies.
type ClusterConfig struct {
	// ID names the Tollgate cluster; it names its topics too.
	ID string `yaml:"id"`
	// InstanceID names this instance; default: the id kept in
	// data_dir/instance-id (made on first start).
	InstanceID string `yaml:"instance_id"`
	// ConfigTopic is the compacted topic of the shared control plane;
	// default _tollgate-<id>-config.
	ConfigTopic string `yaml:"config_topic"`
	// ExchangeTopic carries usage reports and membership; default
	// _tollgate-<id>-exchange.
	ExchangeTopic string `yaml:"exchange_topic"`
	// ReplicationFactor of the topics Tollgate creates; default 3 (fewer
	// when the upstream has fewer brokers, with a warning).
	ReplicationFactor int16 `yaml:"replication_factor"`
	// MinInsyncReplicas of the configuration topic; default 2 (at most
	// the replication factor).
	MinInsyncReplicas int `yaml:"min_insync_replicas"`
	// ExchangeInterval between two usage reports of an instance; default
	// 500ms.
	ExchangeInterval time.Duration `yaml:"exchange_interval"`
	// SessionTimeout: an instance not heard from this long has left;
	// default 4 exchange intervals.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// SecretFile holds the secret the instances share (at least 32
	// bytes): every record of the configuration topic and every report of
	// the exchange topic is signed with it, and SCRAM keys and API-key
	// hashes are stored encrypted. Unset: nothing is signed (a warning).
	SecretFile string `yaml:"secret_file"`
	// PreviousSecretFile holds the secret before a rotation: accepted,
	// never used to sign, for SecretGrace after the instance starts.
	PreviousSecretFile string `yaml:"previous_secret_file"`
	// AcceptUnsigned accepts unsigned records and reports for
	// SecretGrace after the instance starts: a running Tollgate cluster
	// that turns signing on.
	AcceptUnsigned bool `yaml:"accept_unsigned"`
	// SecretGrace is how long the previous secret (and unsigned input,
	// with AcceptUnsigned) is accepted; default 24h.
	SecretGrace time.Duration `yaml:"secret_grace"`
	// MaxClockSkew: a signed configuration record the broker appended
	// more than this from its signed time is refused as a copy (on a
	// topic with message.timestamp.type=LogAppendTime); default 5m.
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
}

func (c ClusterConfig) secretGrace() time.Duration {
	if c.SecretGrace > 0 {
		return c.SecretGrace
	}
	return 24 * time.Hour
}

// keyring reads the secret files; nil without cluster.secret_file.
func (c ClusterConfig) keyring(now time.Time) (*cluster.Keyring, error) {
	if c.SecretFile == "" {
		return nil, nil
	}
	secret, err := cluster.ReadSecret(c.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.secret_file: %w", err)
	}
	kc := cluster.KeyringConfig{Secret: secret, AcceptUnsigned: c.AcceptUnsigned, GraceUntil: now.Add(c.secretGrace())}
	if c.PreviousSecretFile != "" {
		if kc.Previous, err = cluster.ReadSecret(c.PreviousSecretFile); err != nil {
			return nil, fmt.Errorf("cluster.previous_secret_file: %w", err)
		}
	}
	return cluster.NewKeyring(kc)
}

// On reports whether this instance is part of a Tollgate cluster.
func (c ClusterConfig) On() bool { return c.ID != "" }

func validName(what, s string, maxLen int) error {
	if len(s) > maxLen {
		return fmt.Errorf("%s is longer than %d characters", what, maxLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%s %q has the character %q: use [A-Za-z0-9._-]", what, s, c)
		}
	}
	return nil
}

// Validate checks the section offline.
func (c ClusterConfig) Validate() error {
	if !c.On() {
		if c.InstanceID != "" || c.ConfigTopic != "" || c.ExchangeTopic != "" || c.SecretFile != "" {
			return errors.New("cluster: instance_id, the topics and secret_file need cluster.id")
		}
		return nil
	}
	var errs []error
	// Topic names are at most 249 characters; the id sits between
	// "_tollgate-" and "-exchange".
	if err := validName("cluster.id", c.ID, 200); err != nil {
		errs = append(errs, err)
	}
	if c.InstanceID != "" {
		if err := validName("cluster.instance_id", c.InstanceID, 128); err != nil {
			errs = append(errs, err)
		}
	}
	for what, t := range map[string]string{"cluster.config_topic": c.ConfigTopic, "cluster.exchange_topic": c.ExchangeTopic} {
		if t == "." || t == ".." {
			errs = append(errs, fmt.Errorf("%s %q is not a valid topic name", what, t))
		} else if err := validName(what, t, 249); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ConfigTopic != "" && c.ConfigTopic == c.ExchangeTopic {
		errs = append(errs, errors.New("cluster: config_topic and exchange_topic must differ"))
	}
	if c.ReplicationFactor < 0 {
		errs = append(errs, fmt.Errorf("cluster.replication_factor %d must be positive", c.ReplicationFactor))
	}
	if c.MinInsyncReplicas < 0 || (c.ReplicationFactor > 0 && c.MinInsyncReplicas > int(c.ReplicationFactor)) {
		errs = append(errs, fmt.Errorf("cluster.min_insync_replicas %d must be from 1 to the replication factor", c.MinInsyncReplicas))
	}
	if c.ExchangeInterval != 0 && (c.ExchangeInterval < 50*time.Millisecond || c.ExchangeInterval > 10*time.Second) {
		errs = append(errs, fmt.Errorf("cluster.exchange_interval %v must be from 50ms to 10s", c.ExchangeInterval))
	}
	if c.SecretFile == "" && (c.PreviousSecretFile != "" || c.AcceptUnsigned) {
		errs = append(errs, errors.New("cluster: previous_secret_file and accept_unsigned need cluster.secret_file"))
	}
	for what, f := range map[string]string{"cluster.secret_file": c.SecretFile, "cluster.previous_secret_file": c.PreviousSecretFile} {
		if f != "" {
			if _, err := cluster.ReadSecret(f); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
		}
	}
	if c.MaxClockSkew < 0 || (c.MaxClockSkew > 0 && c.MaxClockSkew < time.Second) {
		errs = append(errs, fmt.Errorf("cluster.max_clock_skew %v must be at least 1s", c.MaxClockSkew))
	}
	if c.SecretGrace < 0 {
		errs = append(errs, fmt.Errorf("cluster.secret_grace %v must be positive", c.SecretGrace))
	}
	if c.SessionTimeout != 0 && c.SessionTimeout < 2*c.interval() {
		errs = append(errs, fmt.Errorf("cluster.session_timeout %v must be at least two exchange intervals (%v)", c.SessionTimeout, 2*c.interval()))
	}
	return errors.Join(errs...)
}

func (c ClusterConfig) interval() time.Duration {
	if c.ExchangeInterval > 0 {
		return c.ExchangeInterval
	}
	return 500 * time.Millisecond
}

func (c ClusterConfig) sessionTimeout() time.Duration {
	if c.SessionTimeout > 0 {
		return c.SessionTimeout
	}
	return 4 * c.interval()
}

// Topics returns the configuration and exchange topics' names, defaults
// applied.
func (c ClusterConfig) Topics() (config, exchange string) { return c.configTopic(), c.exchangeTopic() }

func (c ClusterConfig) configTopic() string {
	if c.ConfigTopic != "" {
		return c.ConfigTopic
	}
	return "_tollgate-" + c.ID + "-config"
}

func (c ClusterConfig) exchangeTopic() string {
	if c.ExchangeTopic != "" {
		return c.ExchangeTopic
	}
	return "_tollgate-" + c.ID + "-exchange"
}

// clusterRun is a running Tollgate cluster membership.
type clusterRun struct {
	id, instance string
	log          *cluster.Log
	x            *cluster.Exchange
	transport    *cluster.KafkaTransport
	cancel       context.CancelFunc
	done         sync.WaitGroup
	stopOnce     sync.Once

	mu   sync.Mutex
	live int
}

// startCluster joins the Tollgate cluster: the store writes through the
// shared configuration log from now on (alterations are refused until it
// has been read), the engine counts the other instances' usage, and the
// exchange starts. Nothing here needs the upstream to be reachable yet.
func (a *App) startCluster(upstream []string) error {
	c := a.cfg.Cluster
	if !c.On() {
		return nil
	}
	instance := c.InstanceID
	if instance == "" {
		var err error
		if instance, err = usage.InstanceID(a.cfg.dataDir()); err != nil {
			return fmt.Errorf("data_dir: %w", err)
		}
	}
	keys, err := c.keyring(time.Now())
	if err != nil {
		return err
	}
	if keys == nil {
		a.log.Warn("cluster.secret_file is not set: the Tollgate cluster's records and reports are not signed, and anyone who can write its topics on the upstream is trusted (docs/cluster.md)")
	}
	logOpts, err := a.upstreamClientOpts(upstream, "tollgate-cluster-config")
	if err != nil {
		return err
	}
	lg, err := cluster.NewLog(cluster.LogConfig{Opts: logOpts, Topic: c.configTopic(), ReplicationFactor: c.ReplicationFactor,
		MinInsyncReplicas: c.MinInsyncReplicas, Cache: a.store, Timeout: a.cfg.Upstream.RequestTimeout, Logger: a.log.With("component", "cluster"),
		Keys: keys, Secret: store.SecretLogKey, MaxSkew: c.MaxClockSkew})
	if err != nil {
		return err
	}
	xOpts, err := a.upstreamClientOpts(upstream, "tollgate-cluster-exchange")
	if err != nil {
		lg.Close()
		return err
	}
	tr, err := cluster.NewKafkaTransport(cluster.KafkaTransportConfig{Opts: xOpts, Topic: c.exchangeTopic(),
		ReplicationFactor: c.ReplicationFactor, Interval: c.interval(), Logger: a.log})
	if err != nil {
		lg.Close()
		return err
	}
	now := time.Now()
	r := &clusterRun{id: c.ID, instance: instance, log: lg, transport: tr, live: 1}
	qs := a.cfg.Quota
	learn := time.Duration(max(qs.WindowNum, 11)) * max(qs.WindowSize, time.Second)
	r.x = cluster.NewExchange(cluster.ExchangeConfig{
		Self: cluster.Member{ID: instance, Incarnation: now.UnixMilli(), Version: a.opts.Version,
			Addr: a.HTTPAddr(), Digest: quotaDigest(a.cfg.Quotas)},
		Interval:       c.interval(),
		SessionTimeout: c.sessionTimeout(),
		LearnFor:       learn,
		Ledger:         a.engine,
		Transport:      tr,
		Logger:         a.log.With("component", "cluster"),
		OnEvent:        a.metrics.ClusterEvent,
		OnTick:         a.clusterTick,
		Keys:           keys,
	})
	a.engine.JoinCluster(c.interval(), now)
	a.store.SetLog(lg)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done.Add(3)
	go func() { defer r.done.Done(); lg.Run(ctx) }()
	go func() { defer r.done.Done(); r.x.Run(ctx) }()
	go func() { defer r.done.Done(); a.followStore(ctx) }()
	a.cluster = r
	a.metrics.RegisterCluster(a.clusterStatus)
	a.log.Info("joining Tollgate cluster", "cluster_id", c.ID, "instance_id", instance,
		"config_topic", c.configTopic(), "exchange_topic", c.exchangeTopic(), "exchange_interval", c.interval(), "signed", keys != nil)
	return nil
}

// stopCluster leaves the Tollgate cluster: a last report says so (the
// others take this instance's share back at once), and the store stops
// writing through the log.
func (a *App) stopCluster() {
	r := a.cluster
	if r == nil {
		return
	}
	// a.cluster stays: the admin port may still read it. Stopping twice
	// (Stop, then closeAll) stops once.
	r.stopOnce.Do(func() {
		r.cancel()
		r.log.Close()
		r.done.Wait()
		r.transport.Close()
		if a.store != nil {
			a.store.SetLog(nil)
		}
	})
}

// clusterTick follows the live count: the connection limits are split over
// the live instances (admission.Settings.Split), redone when it changes
// while this instance hears the exchange.
func (a *App) clusterTick(t quota.ClusterTick) {
	r := a.cluster
	if r == nil {
		return
	}
	if !t.Connected {
		// Cut off, the others have dropped out of this instance's view,
		// not out of the cluster: keep the split it had.
		return
	}
	live := max(t.Live, 1)
	r.mu.Lock()
	changed := live != r.live
	r.live = live
	r.mu.Unlock()
	if changed {
		a.mu.Lock()
		as := a.admSettings
		a.mu.Unlock()
		if err := a.admit.Update(as.Split(live), time.Now()); err != nil {
			a.log.Error("connection quotas not split over the live instances", "live", live, "err", err)
		}
	}
}

// clusterLive returns the live instances (1 outside a cluster).
func (a *App) clusterLive() int {
	r := a.cluster
	if r == nil {
		return 1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live
}

// clusterStatus returns the membership as this instance sees it; ok is
// false outside a cluster.
func (a *App) clusterStatus() (cluster.Status, bool) {
	r := a.cluster
	if r == nil {
		return cluster.Status{}, false
	}
	ms := r.x.Members()
	s := cluster.Status{ClusterID: r.id, InstanceID: r.instance, Connected: r.x.Connected(), Live: len(ms), Members: ms,
		ConfigLog: r.log.Status(), Exchange: r.x.Stats()}
	for _, m := range ms {
		if m.Digest != ms[0].Digest {
			s.DigestsDiffer = true
		}
	}
	return s, true
}

// quotaDigest fingerprints the config file's quota entries, so that
// instances whose files differ can be told apart.
func quotaDigest(entries []QuotaEntry) string {
	var lines []string
	for _, e := range fileEntities(entries) {
		for k, v := range e.Values {
			lines = append(lines, fmt.Sprintf("%s %s=%v", e.Entity, k, v))
		}
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ready is /readyz: the gateway knows its brokers and, in a Tollgate
// cluster, this instance has read the shared configuration topic (until
// then it enforces its cached state and refuses alterations).
func (a *App) ready() bool {
	if !a.gw.Ready() {
		return false
	}
	if r := a.cluster; r != nil && !r.log.Status().Ready {
		return false
	}
	return true
}

// Cluster returns the Tollgate cluster as this instance sees it; ok is
// false without cluster.id.
func (a *App) Cluster() (cluster.Status, bool) { return a.clusterStatus() }

// followStore applies what other instances change: every change the
// shared log brings into the store reloads the credentials (closing the
// sessions of withdrawn ones) and the quotas, broker configs and
// connection limits and the client-metrics subscriptions, as a change
// made here does.
func (a *App) followStore(ctx context.Context) {
	a.store.Follow(ctx, nil, func() {
		if err := a.creds.Load(); err != nil {
			a.log.Error("credentials from the shared configuration topic not applied", "err", err)
		}
		if err := a.refreshQuotas(); err != nil {
			a.log.Error("quotas from the shared configuration topic not applied", "err", err)
		}
		if err := a.refreshClientMetrics(); err != nil {
			a.log.Error("client-metrics subscriptions from the shared configuration topic not applied", "err", err)
		}
	})
}
