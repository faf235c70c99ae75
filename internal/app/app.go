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
	cfg     Config
	path    string
	log     *slog.Logger
	opts    Options
	store   *store.Store
	audit   *audit.Logger
	ctl     *control.ClientQuotas
	brokers *control.BrokerConfigs
	// clientMetrics are the client-metrics subscriptions; nil when
	// telemetry.enabled is false.
	clientMetrics *control.ClientMetrics
	creds         *control.Credentials
	tenants       *control.Tenants // tenants.go
	ipQuotas      control.IPQuotas
	engine        *quota.Engine
	admit         *admission.Limiter
	mu            sync.Mutex
	admSettings   admission.Settings
	upstream      []string      // the upstream's bootstrap addresses (or the embedded cluster's)
	stop          chan struct{} // closed to stop the config watcher (reload.go)
	done          chan struct{} // closed once it has stopped
	watching      bool          // startWatch ran: done will be closed
	dev           *devcluster.Cluster
	gw            *proxy.Gateway
	metrics       *metrics.Metrics
	httpLn        net.Listener
	httpTCP       net.Listener // httpLn under its TLS layer, for a handover
	httpSrv       *http.Server
	usage         *usageRun          // nil when usage.enabled is false (usage.go)
	cluster       *clusterRun        // nil without cluster.id (cluster.go)
	storage       *storageRun        // the disk-full protection (storage.go)
	telemetry     *telemetry.Manager // nil when telemetry.enabled is false
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

// Start runs everything the config asks for. Its steps run in order; when
// one fails, Stop undoes what the steps before it started.
func Start(ctx context.Context, cfg Config, o Options) (*App, error) {
	a, err := newApp(cfg, o)
	if err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{
		a.startUpstream,
		a.takeDataDir,
		func(context.Context) error { return a.openControl(a.upstream) },
		func(context.Context) error { return a.refreshQuotas() },
		func(context.Context) error { return a.openUsage(a.upstream) },
		a.startStorage,
		a.listenHTTP, // before the cluster's exchange, which reports its address
		func(context.Context) error { return a.startCluster(a.upstream) },
		a.startGateway,
		a.startWatch,
		a.serveHTTP,
	} {
		if err := step(ctx); err != nil {
			a.Stop(context.Background())
			return nil, err
		}
	}
	for name, addr := range a.gw.BootstrapAddrs() {
		a.log.Info("tollgate ready", "listener", name, "bootstrap", addr)
	}
	return a, nil
}

// newApp builds what needs nothing outside the process: the quota engine,
// the connection admission, the metrics, the clients' telemetry.
func newApp(cfg Config, o Options) (*App, error) {
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
	return a, nil
}

// startUpstream starts the embedded cluster when no upstream is
// configured.
func (a *App) startUpstream(context.Context) error {
	a.upstream = a.cfg.Upstream.Bootstrap
	if len(a.upstream) > 0 {
		return nil
	}
	dev, err := devcluster.Start(a.cfg.DevCluster, a.opts.DevClusterOpts...)
	if err != nil {
		return err
	}
	a.dev = dev
	a.upstream = dev.Addrs()
	a.log.Info("embedded development cluster started", "brokers", len(a.upstream), "addrs", a.upstream)
	return nil
}

// takeDataDir waits, after a handover, for the predecessor to release
// data_dir: every step before needs nothing of it.
func (a *App) takeDataDir(ctx context.Context) error {
	if a.opts.Inherited == nil {
		return nil
	}
	return a.opts.Inherited.TakeDataDir(ctx)
}

// startGateway builds the filter chain and the gateway, and starts it.
func (a *App) startGateway(ctx context.Context) error {
	chain, err := a.chain()
	if err != nil {
		return err
	}
	popts, err := a.gatewayOptions(chain)
	if err != nil {
		return err
	}
	gw, err := proxy.New(a.proxyConfig(), popts...)
	if err != nil {
		return err
	}
	a.metrics.RegisterAcceptorProcess(gw.AcceptorProcessRunning, gw.AcceptorStalls)
	a.metrics.RegisterRequestMemory(gw.RequestMemory)
	a.startUsage() // before Start: the first requests may come as soon as the listeners accept
	// Before Start too: the chain's lookups go through it (gatewayTopics),
	// and a credential change may close its sessions from the first one on.
	a.gw = gw
	if err := gw.Start(ctx); err != nil {
		a.gw = nil
		return err
	}
	return nil
}

// chain is the filter chain: kafkaapi's, then Options.Filters.
func (a *App) chain() (proxy.Chain, error) {
	qf, err := enforce.New(enforce.Config{
		Engine:     a.engine,
		Topics:     gatewayTopics{a},
		Names:      gatewayTopics{a}, // per-topic quotas: topics named by id
		TopicUsage: a.topicUsage(),
		Storage:    a.storageHold(),
		Now:        a.opts.Now,
		Log:        a.log,
	})
	if err != nil {
		return nil, err
	}
	chain := kafkaapi.Chain(kafkaapi.Deps{
		Log:           a.log,
		ClientQuotas:  a.ctl,
		Credentials:   a.creds,
		BrokerConfigs: a.brokers,
		ClientMetrics: a.clientMetrics,
		Quota:         qf,
		ProducerIDs:   qf.ProducerIDs(),
		Reserved:      a.reservedTopics(),
		Topics:        gatewayTopics{a},
		Telemetry:     a.telemetry,
		Usage:         a.usageLedger(),
		Partitions:    gatewayTopics{a},
		Now:           a.clock(),
	})
	return append(chain, a.opts.Filters...), nil
}

func (a *App) proxyConfig() proxy.Config {
	cfg := &a.cfg
	return proxy.Config{
		Listeners:             cfg.Listeners,
		Upstream:              a.upstream,
		MaxRequestSize:        cfg.Socket.RequestMaxBytes,
		QueuedMaxRequestBytes: cfg.Socket.QueuedMaxRequestBytes,
		MaxInFlight:           cfg.Socket.MaxInFlight,
		MaxResponseSize:       cfg.Socket.ResponseMaxBytes,
		SASLMaxReceiveSize:    cfg.Socket.SASLMaxReceiveSize,
		IdleTimeout:           cfg.Socket.ConnectionsMaxIdle,
		HandshakeTimeout:      cfg.Socket.HandshakeTimeout,
		RequestTimeout:        cfg.Upstream.RequestTimeout,
		DialTimeout:           cfg.Upstream.DialTimeout,
		MetadataRefresh:       cfg.Upstream.MetadataRefresh,
	}
}

// gatewayOptions are the gateway's options: its chain, hooks, admission,
// security, and Options' own.
func (a *App) gatewayOptions(chain proxy.Chain) ([]proxy.Option, error) {
	o := a.opts
	popts := append([]proxy.Option{proxy.WithLogger(a.log), proxy.WithHooks(&observer{a}), proxy.WithChain(chain), proxy.WithAdmission(a.admit)}, o.ProxyOpts...)
	popts = append(popts, a.usageHooks()...)
	if o.UpstreamDial != nil {
		popts = append(popts, proxy.WithDialFunc(o.UpstreamDial))
	}
	secOpts, err := a.securityOptions()
	if err != nil {
		return nil, err
	}
	popts = append(popts, secOpts...)
	if o.AcceptorExe != "" && a.cfg.Socket.UseAcceptorProcess() {
		popts = append(popts, proxy.WithAcceptorProcess(o.AcceptorExe))
	}
	if o.Inherited != nil {
		popts = append(popts, proxy.WithInherited(o.Inherited))
	}
	return popts, nil
}

// startWatch follows the config file, if there is one.
func (a *App) startWatch(context.Context) error {
	if a.path != "" {
		go a.watch(a.opts.WatchInterval)
	} else {
		close(a.done)
	}
	a.watching = true
	return nil
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

// gatewayTopics answers the chain's lookups (the names of topic ids,
// the mutation requests' partition counts, per-topic quotas' topic names)
// through the gateway's metadata client: the chain is built before the
// gateway, which is set before it accepts the first connection.
type gatewayTopics struct{ a *App }

var errNoGateway = errors.New("the gateway is not running")

func (g gatewayTopics) TopicNamesOf(ctx context.Context, ids [][16]byte) (map[[16]byte]string, error) {
	gw := g.a.gw
	if gw == nil {
		return nil, errNoGateway
	}
	return gw.TopicNamesOf(ctx, ids)
}

func (g gatewayTopics) TopicPartitions(ctx context.Context, topics []string) (map[string]int32, error) {
	gw := g.a.gw
	if gw == nil {
		return nil, errNoGateway
	}
	return gw.TopicPartitions(ctx, topics)
}

func (g gatewayTopics) TopicPartitionsByID(ctx context.Context, ids [][16]byte) (map[[16]byte]int32, error) {
	gw := g.a.gw
	if gw == nil {
		return nil, errNoGateway
	}
	return gw.TopicPartitionsByID(ctx, ids)
}

// DefaultPartitions is 0 (taken as 1) without a gateway.
func (g gatewayTopics) DefaultPartitions(ctx context.Context) int32 {
	gw := g.a.gw
	if gw == nil {
		return 0
	}
	return gw.DefaultPartitions(ctx)
}

func (g gatewayTopics) TopicNames(ctx context.Context) (map[[16]byte]string, error) {
	gw := g.a.gw
	if gw == nil {
		return nil, errNoGateway
	}
	return gw.TopicNames(ctx)
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
	return a.shutdown(ctx)
}

// shutdown stops what Start started, in order, whichever of its steps
// ran: the config watcher, the gateway (its sessions drained within ctx),
// the usage ledger, the Tollgate cluster, the admin port, the embedded
// cluster, the audit log and the store. It is Stop's path and a failed
// Start's; a second call does nothing more.
func (a *App) shutdown(ctx context.Context) error {
	var errs []error
	if a.watching {
		select {
		case <-a.stop:
		default:
			close(a.stop)
		}
		<-a.done
	}
	if a.gw != nil {
		if err := a.gw.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gateway shutdown: %w", err))
		}
	}
	if err := a.stopUsage(ctx); err != nil {
		errs = append(errs, err)
	}
	a.stopCluster()
	a.stopStorage()
	if a.httpSrv != nil {
		if err := a.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	} else if a.httpLn != nil {
		a.httpLn.Close() // opened, never served: a later step failed
	}
	a.closeDev()
	if a.audit != nil {
		a.audit.Close()
		a.audit = nil
	}
	if a.store != nil {
		a.store.Close()
		a.store = nil
	}
	return errors.Join(errs...)
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
