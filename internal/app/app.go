// Package app is Tollgate's composition root: it turns a Config into
// running components (embedded cluster, the filter chain, the control
// plane, the gateway, the HTTP port), wires their hooks and owns their
// lifecycle. Nothing below it imports it: only cmd/tollgate, the test
// harness (internal/testkit), the tests and the benchmark commands do
// (TestImportRule).
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/devcluster"
	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/kafkaapi"
	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// App is a running Tollgate.
type App struct {
	cfg         Config
	path        string
	log         *slog.Logger
	opts        Options
	store       *store.Store
	audit       *audit.Logger
	ctl         *control.ClientQuotas
	brokers     *control.BrokerConfigs
	creds       *control.Credentials
	tenants     *control.Tenants // tenants.go
	ipQuotas    control.IPQuotas
	engine      *quota.Engine
	admit       *admission.Limiter
	mu          sync.Mutex
	admSettings admission.Settings
	quotaFilter *enforce.Filter
	stop        chan struct{}
	done        chan struct{}
	dev         *devcluster.Cluster
	gw          *proxy.Gateway
	metrics     *metrics.Metrics
	httpLn      net.Listener
	httpTCP     net.Listener // httpLn under its TLS layer, for a handover
	httpSrv     *http.Server
	usage       *usageRun          // nil when usage.enabled is false (usage.go)
	cluster     *clusterRun        // nil without cluster.id (cluster.go)
	telemetry   *telemetry.Manager // nil when telemetry.enabled is false
	// apiKeys is where API keys are looked up: the store, then the
	// credentials file (the Kafka listeners' source, security.go).
	apiKeys auth.APIKeys
	// upTLS is the upstream client TLS configuration (security.go).
	upTLS *tls.Config
	// admins are the quota admins, shared by the control plane and the
	// admin port and replaced on reload (reload.go).
	admins *control.LiveAdmins
	// fileCreds holds credentials_file's users and keys (empty without
	// one); its contents are replaced on reload.
	fileCreds *auth.MemoryStore
	reloadMu  sync.Mutex // one reload at a time
	// logins is the failed-login limit per source address (nil: none);
	// loginRefused counts its refusals.
	logins       *auth.LoginLimiter
	loginRefused func()
	// handover is one handover at a time; handedOver is set once a new
	// process serves in this one's place (handover.go).
	handover   sync.Mutex
	handedOver bool
}

// now is the clock of the failed-login limit (Options.Now, or time.Now).
func (a *App) now() time.Time {
	if a.opts.Now != nil {
		return a.opts.Now()
	}
	return time.Now()
}

// Options are test and embedding hooks; the zero value is production.
type Options struct {
	Logger *slog.Logger
	// DevClusterOpts are extra kfake options for the embedded cluster.
	DevClusterOpts []kfake.Opt
	// ProxyOpts are extra gateway options (in-memory networks).
	ProxyOpts []proxy.Option
	// Filters are appended to the filter chain (tests).
	Filters []proxy.Filter
	// ConfigPath is the file cfg came from; when set, its quotas are
	// re-applied whenever it changes (checked every WatchInterval) and on
	// Reload.
	ConfigPath string
	// WatchInterval is how often ConfigPath is checked (default 1s).
	WatchInterval time.Duration
	// Now is the quota and usage clock (default time.Now).
	Now func() time.Time
	// AcceptorExe is the binary started as the acceptor helper when
	// socket.acceptor_process is on (tollgate serve passes its own; the
	// binary must call accept.RunAcceptorHelper first thing). Empty: none.
	AcceptorExe string
	// UpstreamDial replaces the dialer of every upstream connection
	// (gateway sessions, metadata, the audit topic sink).
	UpstreamDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Version is the build's version, for a Tollgate cluster's instance
	// list (cmd/tollgate passes its own).
	Version string
	// Inherited, when this process was started by a handover
	// (accept.Inherit), are its predecessor's listening sockets: the
	// listeners and the admin port take them over, and data_dir is opened
	// only once the predecessor has released it.
	Inherited *accept.Inherited
}

// NewLogger builds the logger a LogConfig asks for.
func NewLogger(c LogConfig, w *os.File) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	ho := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// Start runs everything the config asks for.
func Start(ctx context.Context, cfg Config, o Options) (*App, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, opts: o, path: o.ConfigPath, log: o.Logger, metrics: metrics.New(), stop: make(chan struct{}), done: make(chan struct{}),
		admins: control.NewLiveAdmins(cfg.Authorization.admins()), fileCreds: auth.NewMemoryStore()}
	if a.log == nil {
		a.log = NewLogger(cfg.Log, os.Stderr)
	}
	ec, err := cfg.Quota.engineConfig()
	if err != nil {
		return nil, err
	}
	eng, err := quota.NewEngine(ec)
	if err != nil {
		return nil, err
	}
	if _, err := buildQuotas(cfg.Quotas); err != nil {
		return nil, err
	}
	a.engine = eng
	a.quotaFilter = enforce.New(eng, a.log)
	if o.Now != nil {
		a.quotaFilter.Now = o.Now
	}
	a.metrics.RegisterQuotas(eng, cfg.Quota.metricsMaxBuckets())
	a.metrics.RegisterTenants(eng, time.Now)
	if cfg.Telemetry.On() {
		a.telemetry = telemetry.New(cfg.Telemetry.Options())
		a.metrics.RegisterTelemetry(a.telemetry, a.clock())
	}
	as, err := admissionSettings(&cfg, nil, nil)
	if err != nil {
		return nil, err
	}
	lim, err := admission.New(as, time.Now())
	if err != nil {
		return nil, err
	}
	a.admit = lim
	a.admSettings = as
	a.metrics.RegisterAdmission(lim)
	a.logins = auth.NewLoginLimiter(cfg.Authentication.limit())
	a.loginRefused = a.metrics.RegisterLoginLimiter(a.logins.Tracked, a.logins.Evicted)
	upstream := cfg.Upstream.Bootstrap
	if len(upstream) == 0 {
		dev, err := devcluster.Start(cfg.DevCluster, o.DevClusterOpts...)
		if err != nil {
			return nil, err
		}
		a.dev = dev
		upstream = dev.Addrs()
		a.log.Info("embedded development cluster started", "brokers", len(upstream), "addrs", upstream)
	}
	if o.Inherited != nil {
		// Everything before needs nothing of data_dir, which the
		// predecessor holds until now.
		if err := o.Inherited.TakeDataDir(ctx); err != nil {
			a.closeAll()
			return nil, err
		}
	}
	if err := a.openControl(upstream); err != nil {
		a.closeAll()
		return nil, err
	}
	if err := a.refreshQuotas(); err != nil {
		a.closeAll()
		return nil, err
	}
	if err := a.openUsage(upstream); err != nil {
		a.closeAll()
		return nil, err
	}
	if err := a.startCluster(upstream); err != nil {
		a.closeAll()
		return nil, err
	}
	pcfg := proxy.Config{
		Listeners:          cfg.Listeners,
		Upstream:           upstream,
		MaxRequestSize:     cfg.Socket.RequestMaxBytes,
		MaxInFlight:        cfg.Socket.MaxInFlight,
		MaxResponseSize:    cfg.Socket.ResponseMaxBytes,
		SASLMaxReceiveSize: cfg.Socket.SASLMaxReceiveSize,
		IdleTimeout:        cfg.Socket.ConnectionsMaxIdle,
		HandshakeTimeout:   cfg.Socket.HandshakeTimeout,
		RequestTimeout:     cfg.Upstream.RequestTimeout,
		DialTimeout:        cfg.Upstream.DialTimeout,
		MetadataRefresh:    cfg.Upstream.MetadataRefresh,
	}
	chain := kafkaapi.Chain(kafkaapi.Deps{
		Log:           a.log,
		ClientQuotas:  a.ctl,
		Credentials:   a.creds,
		BrokerConfigs: a.brokers,
		Quota:         a.quotaFilter,
		Reserved:      a.reservedTopics(),
		Topics:        gatewayTopics{a},
		Telemetry:     a.telemetry,
		Now:           a.clock(),
	})
	chain = append(append(chain, a.usageFilters()...), o.Filters...)
	popts := append([]proxy.Option{proxy.WithLogger(a.log), proxy.WithHooks(&observer{a}), proxy.WithChain(chain), proxy.WithAdmission(lim)}, o.ProxyOpts...)
	popts = append(popts, a.usageHooks()...)
	if o.UpstreamDial != nil {
		popts = append(popts, proxy.WithDialFunc(o.UpstreamDial))
	}
	secOpts, err := a.securityOptions()
	if err != nil {
		a.closeAll()
		return nil, err
	}
	popts = append(popts, secOpts...)
	if o.AcceptorExe != "" && cfg.Socket.UseAcceptorProcess() {
		popts = append(popts, proxy.WithAcceptorProcess(o.AcceptorExe))
	}
	if o.Inherited != nil {
		popts = append(popts, proxy.WithInherited(o.Inherited))
	}
	gw, err := proxy.New(pcfg, popts...)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	a.metrics.RegisterAcceptorProcess(gw.AcceptorProcessRunning, gw.AcceptorStalls)
	// Before Start: the first CreateTopics may arrive as soon as the
	// listeners accept.
	a.quotaFilter.Topics = gw
	a.quotaFilter.Names = gw // per-topic quotas: topics named by id
	a.startUsage(gw)
	a.gw = gw // before Start too: a credential change may close its sessions from the first one on
	if err := gw.Start(ctx); err != nil {
		a.gw = nil
		a.closeAll()
		return nil, err
	}
	if a.path != "" {
		go a.watch(o.WatchInterval)
	} else {
		close(a.done)
	}
	if cfg.HTTP.Address != "" {
		if err := a.startHTTP(); err != nil {
			a.Stop(context.Background())
			return nil, err
		}
		if a.cluster != nil {
			a.cluster.x.SetAddr(a.HTTPAddr())
		}
	}
	for name, addr := range gw.BootstrapAddrs() {
		a.log.Info("tollgate ready", "listener", name, "bootstrap", addr)
	}
	return a, nil
}

// reservedTopics are the topics Tollgate keeps its own state in on the
// upstream cluster: requests through the gateway never reach them
// (kafkaapi's reserved-topics filter). audit.topic and usage.topic are
// restart-only settings, so the list is fixed for the process.
func (a *App) reservedTopics() []string {
	var out []string
	ts := []string{a.cfg.Audit.Topic, a.cfg.Usage.Topic}
	if c := a.cfg.Cluster; c.On() {
		// A Tollgate cluster's control plane and usage exchange: a tenant
		// writing them could grant itself any quota.
		ts = append(ts, c.configTopic(), c.exchangeTopic())
	}
	for _, t := range ts {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// gatewayTopics resolves the reserved topics' ids through the gateway's
// metadata client; the chain is built before the gateway, which is set
// before it accepts the first connection.
type gatewayTopics struct{ a *App }

func (g gatewayTopics) TopicIDs(ctx context.Context, topics []string) (map[string][16]byte, error) {
	gw := g.a.gw
	if gw == nil {
		return nil, errors.New("the gateway is not running")
	}
	return gw.TopicIDs(ctx, topics)
}

// ipRate is the connection_creation_rate that applies to ip: the exact
// entity, else the most specific range, else the default.
func (a *App) ipRate(ip netip.Addr) (int, string, bool) {
	a.mu.Lock()
	s := a.admSettings
	a.mu.Unlock()
	ip = ip.Unmap()
	best, bits := netip.Prefix{}, -1
	for p := range s.IPConnectionRates {
		if p.Contains(ip) && p.Bits() > bits {
			best, bits = p, p.Bits()
		}
	}
	if bits >= 0 {
		name := best.String()
		if best.Bits() == ip.BitLen() {
			name = best.Addr().String()
		}
		return s.IPConnectionRates[best], name, true
	}
	if s.DefaultIPConnectionRate < admission.Unlimited {
		return s.DefaultIPConnectionRate, "", true
	}
	return 0, "", false
}

// Engine returns the quota engine.
func (a *App) Engine() *quota.Engine { return a.engine }

// Gateway returns the running gateway.
func (a *App) Gateway() *proxy.Gateway { return a.gw }

// DevCluster returns the embedded cluster, or nil.
func (a *App) DevCluster() *devcluster.Cluster { return a.dev }

// HTTPAddr returns the admin port's address, or "".
func (a *App) HTTPAddr() string {
	if a.httpLn == nil {
		return ""
	}
	return a.httpLn.Addr().String()
}

// HTTPURL returns the admin port's base URL (http:// or https://), or "".
func (a *App) HTTPURL() string {
	if a.httpLn == nil {
		return ""
	}
	if a.cfg.HTTP.TLS != nil {
		return "https://" + a.HTTPAddr()
	}
	return "http://" + a.HTTPAddr()
}

// Bootstrap returns the first listener's bootstrap address.
func (a *App) Bootstrap() string { return a.gw.Bootstrap() }

// Stop shuts down gracefully within the configured timeout (or ctx).
func (a *App) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
	if a.gw != nil {
		if err := a.gw.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gateway shutdown: %w", err))
		}
	}
	if err := a.stopUsage(ctx); err != nil {
		errs = append(errs, err)
	}
	a.stopCluster()
	if a.httpSrv != nil {
		if err := a.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	a.closeAll()
	return errors.Join(errs...)
}

// closeAll closes the embedded cluster, the audit log and the store.
func (a *App) closeAll() {
	a.stopCluster()
	a.stopUsage(context.Background())
	a.closeDev()
	if a.audit != nil {
		a.audit.Close()
		a.audit = nil
	}
	if a.store != nil {
		a.store.Close()
		a.store = nil
	}
}

func (a *App) closeDev() {
	if a.dev != nil {
		a.dev.Close()
		a.dev = nil
	}
}

// Telemetry returns the clients' own metrics (KIP-714), or nil when
// telemetry.enabled is false.
func (a *App) Telemetry() *telemetry.Manager { return a.telemetry }

// Admission returns the connection admission limiter.
func (a *App) Admission() *admission.Limiter { return a.admit }
