// Package testkit starts a real Tollgate in front of the embedded cluster
// for end-to-end tests: real sockets on loopback, real clients. It is
// imported by tests only.
package testkit

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
)

// Env is a running gateway and its embedded cluster.
type Env struct {
	App       *app.App
	Bootstrap string
	Logs      *LogBuffer
	// Net is the in-memory network everything runs on (StartInBubble),
	// or nil (Start: real loopback sockets).
	Net *Network
	// Upstream is the cluster it fronts (Upstream.Start); nil: the
	// embedded kfake cluster (Start).
	Upstream *Upstream

	cfg  app.Config
	opts app.Options
}

// Start runs Tollgate with the embedded 3-broker cluster on free loopback
// ports and stops it when the test ends. edit may change the config.
func Start(t testing.TB, opts app.Options, edit ...func(*app.Config)) *Env {
	t.Helper()
	skipIfRealOnly(t)
	return start(t, config(t, edit), opts, nil)
}

// skipIfRealOnly skips a test that has no real-cluster row when the run
// is the real-cluster-only pass (TOLLGATE_UPSTREAMS=kafka): its kfake row
// ran in the pass before.
func skipIfRealOnly(t testing.TB) { SkipIfRealOnly(t) }

// SkipIfRealOnly is skipIfRealOnly for a test that checks more after its
// synctest bubble (a skip inside the bubble ends the bubble's test, not
// the outer one).
func SkipIfRealOnly(t testing.TB) {
	t.Helper()
	if RealOnly() {
		t.Skip("kfake only; this pass runs the real cluster's rows (TOLLGATE_UPSTREAMS=kafka)")
	}
}

// config is the configuration every Env starts from (one PLAINTEXT
// listener and the admin port on free loopback ports, a quick metadata
// refresh, a data directory of the test's own), then edit.
func config(t testing.TB, edit []func(*app.Config)) app.Config {
	cfg := app.Config{
		Listeners: []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
		HTTP:      app.HTTPConfig{Address: "127.0.0.1:0"},
		Upstream:  app.UpstreamConfig{MetadataRefresh: 200 * time.Millisecond},
	}
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.DataDir = t.TempDir()
	for _, e := range edit {
		e(&cfg)
	}
	return cfg
}

// start runs the gateway with its log kept in memory (shown if the test
// fails) and stops it when the test ends. nw is the in-memory network it
// runs on, or nil.
func start(t testing.TB, cfg app.Config, opts app.Options, nw *Network) *Env {
	t.Helper()
	logs := &LogBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := app.Start(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("start tollgate: %v", err)
	}
	env := &Env{App: a, Bootstrap: a.Bootstrap(), Logs: logs, Net: nw, cfg: cfg, opts: opts}
	t.Cleanup(func() {
		if err := env.App.Stop(context.Background()); err != nil {
			t.Errorf("stop tollgate: %v", err)
		}
		if t.Failed() {
			t.Logf("tollgate log:\n%s", logs.String())
		}
	})
	return env
}

// Restart stops the gateway gracefully and starts it again with the same
// configuration, data directory and options, its listeners and admin port
// on the addresses they had (clients reconnect to the same bootstrap), as
// an operator's restart does. The embedded cluster restarts with it,
// empty: to restart a gateway in front of a cluster that survives, run
// the cluster outside the app (upstream.bootstrap).
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	cfg := e.cfg
	cfg.Listeners = append([]proxy.ListenerConfig(nil), cfg.Listeners...)
	boots := e.App.Gateway().BootstrapAddrs()
	for i := range cfg.Listeners {
		cfg.Listeners[i].Bootstrap = boots[cfg.Listeners[i].Name]
	}
	if a := e.App.HTTPAddr(); a != "" {
		cfg.HTTP.Address = a
	}
	if err := e.App.Stop(context.Background()); err != nil {
		t.Fatalf("stop tollgate: %v", err)
	}
	a, err := app.Start(context.Background(), cfg, e.opts)
	if err != nil {
		t.Fatalf("restart tollgate: %v", err)
	}
	e.App, e.Bootstrap = a, a.Bootstrap()
}

// LogBuffer collects log output safely across goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitFor polls the log until it contains s or the timeout passes.
func (l *LogBuffer) WaitFor(s string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(l.String(), s) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return strings.Contains(l.String(), s)
}

// Dialer records every address a client dials.
type Dialer struct {
	// Net is the in-memory network to dial on (env.Net in a synctest
	// bubble); nil dials real sockets.
	Net   *Network
	mu    sync.Mutex
	addrs map[string]int
	d     net.Dialer
}

// DialContext dials and records addr.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.addrs == nil {
		d.addrs = map[string]int{}
	}
	d.addrs[addr]++
	d.mu.Unlock()
	if d.Net != nil {
		return d.Net.DialContext(ctx, network, addr)
	}
	return d.d.DialContext(ctx, network, addr)
}

// Addrs returns the distinct addresses dialed.
func (d *Dialer) Addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.addrs))
	for a := range d.addrs {
		out = append(out, a)
	}
	return out
}

// GatewayAddrs returns every address the gateway serves on its listeners
// (bootstrap and broker ports), to check that clients dial nothing else.
func (e *Env) GatewayAddrs() map[string]bool {
	out := map[string]bool{}
	gw := e.App.Gateway()
	for name, boot := range gw.BootstrapAddrs() {
		out[boot] = true
		host, _, _ := net.SplitHostPort(boot)
		for _, port := range gw.BrokerPorts(name) {
			out[net.JoinHostPort(host, strconv.Itoa(int(port)))] = true
		}
	}
	return out
}
