//go:build linux

package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/proc"
)

// startWithAcceptor runs Tollgate with its acceptor helper process (this
// test binary, see TestMain) and a default ip connection_creation_rate.
func startWithAcceptor(t *testing.T, rate float64, edit ...func(*app.Config)) (*testkit.Env, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := testkit.Start(t, app.Options{AcceptorExe: exe}, append([]func(*app.Config){func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{DefaultIP: true, ConnectionCreationRate: &rate}}
	}}, edit...)...)
	helpers := helperPIDs(t)
	if len(helpers) != 1 {
		t.Fatalf("%d acceptor helper processes, want 1", len(helpers))
	}
	return env, helpers[0]
}

// helperPIDs lists this process's live children started as acceptor
// helpers.
func helperPIDs(t *testing.T) []int {
	t.Helper()
	kids, err := proc.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, k := range kids {
		if k.State == 'Z' {
			continue
		}
		// A child that exits meanwhile has no environment left: not a helper.
		env, _ := proc.Environ(k.PID)
		if slices.Contains(env, accept.AcceptorHelperEnv+"=1") {
			out = append(out, k.PID)
		}
	}
	return out
}

func openFDs(t *testing.T, pid int) int {
	t.Helper()
	n, err := proc.OpenFDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// With the acceptor helper, admission is unchanged: 1/s with N=11 serves
// the first 10 at once and parks the rest, which are closed after their
// delay (within twice the 1 s cap) — and the parked sockets are held by
// the helper, not by the gateway.
func TestAcceptorProcessParksInHelper(t *testing.T) {
	// Not parallel: counts this process's children and open descriptors, which
	// parallel tests would change.
	env, helper := startWithAcceptor(t, 1)
	gwFDs := openFDs(t, os.Getpid())
	wire := probeRequest()
	start := time.Now()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 40; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
	}
	// Let the gateway take them all, then count who holds what: the
	// test's 40 client sockets are here, the gateway's side of the
	// served ones too, the parked ones' in the helper.
	time.Sleep(200 * time.Millisecond)
	gained, inHelper := openFDs(t, os.Getpid())-gwFDs, openFDs(t, helper)
	var served, parked int
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(3*time.Second - time.Since(start)))
		var sz [4]byte
		_, err := c.Read(sz[:])
		switch {
		case err == nil:
			served++
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatalf("connection %d neither served nor closed within 3 s", i)
		default: // closed unanswered: parked
			parked++
		}
	}
	if served != 10 || parked != 30 {
		t.Fatalf("served %d, parked %d; want 10 and 30 (1/s, quota.window.num 11)", served, parked)
	}
	// Here: 40 client sockets, and per served one the gateway's socket,
	// its upstream connection and the embedded cluster's end of that (30);
	// the 30 parked would come on top if the gateway held them.
	if gained > 40+30+15 {
		t.Errorf("this process gained %d descriptors for 40 client sockets, 10 served and 30 parked; it holds the parked ones, not the helper", gained)
	}
	if inHelper < 30 {
		t.Errorf("the helper holds %d descriptors, want at least the 30 parked sockets", inHelper)
	}
	if !env.Logs.WaitFor("reason=connection_rate_connection_creation_rate", time.Second) {
		t.Error("no log line for the per-IP park")
	}
}

// A helper that dies leaves the gateway accepting by itself, and what the
// helper held is closed by its death.
func TestAcceptorProcessDiesGatewayAccepts(t *testing.T) {
	// Not parallel: finds its acceptor helper among this process's children;
	// another test's helper would be counted.
	env, helper := startWithAcceptor(t, 1000)
	c, err := net.Dial("tcp", env.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	if !apiVersions(t, c, 5*time.Second) {
		t.Fatal("not served through the helper")
	}
	c.Close()
	if up := scrapeMetric(t, env, "tollgate_acceptor_process_up"); up != 1 {
		t.Fatalf("tollgate_acceptor_process_up = %v with the helper running, want 1", up)
	}
	if err := syscall.Kill(helper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !env.Logs.WaitFor("acceptor helper gone", 5*time.Second) {
		t.Fatal("the gateway did not notice the helper's death")
	}
	deadline := time.Now().Add(5 * time.Second)
	for scrapeMetric(t, env, "tollgate_acceptor_process_up") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("tollgate_acceptor_process_up still 1 after the helper died")
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkServed(t, env, 5, "the helper died")
}

// checkServed makes n connections to env's bootstrap, one after the
// other, and checks that each is answered (ApiVersions) within 5 s.
func checkServed(t *testing.T, env *testkit.Env, n int, after string) {
	t.Helper()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		ok := apiVersions(t, c, 5*time.Second)
		c.Close()
		if !ok {
			t.Fatalf("connection %d after %s not served", i, after)
		}
	}
}

// A helper that is alive but does not accept (here: stopped with
// SIGSTOP, as a debugger or a starved CPU would leave it) must not stall
// the gateway: the watchdog sees connections waiting in the backlog while
// the gateway waits for the helper, kills it, and the gateway accepts
// itself — the waiting connection is served, late but not lost. (Issue "A
// hostile tenant gets nothing", point 13.)
func TestAcceptorProcessStalledGatewayAccepts(t *testing.T) {
	// Not parallel: finds its acceptor helper among this process's children.
	env, helper := startWithAcceptor(t, 1000)
	if err := syscall.Kill(helper, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGCONT) })
	// kill(2) returns before every thread has stopped: a helper thread
	// still running could accept the connection below itself.
	for deadline := time.Now().Add(5 * time.Second); !proc.Stopped(helper); {
		if time.Now().After(deadline) {
			t.Fatal("the acceptor helper did not stop within 5 s of SIGSTOP")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c, err := net.Dial("tcp", env.Bootstrap) // completes in the kernel's backlog
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !apiVersions(t, c, 20*time.Second) {
		t.Fatal("a connection made while the helper was stopped was never served")
	}
	if !env.Logs.WaitFor("acceptor helper stalled", 5*time.Second) {
		t.Fatal("no 'acceptor helper stalled' log")
	}
	if n := scrapeMetric(t, env, "tollgate_acceptor_helper_stalls_total"); n != 1 {
		t.Fatalf("tollgate_acceptor_helper_stalls_total = %v, want 1", n)
	}
	if up := scrapeMetric(t, env, "tollgate_acceptor_process_up"); up != 0 {
		t.Fatalf("tollgate_acceptor_process_up = %v after the stall, want 0", up)
	}
	checkServed(t, env, 3, "the stall")
}

// oneServedOneWaiting opens two connections under max.connections=1: the
// first is served, the second waits (both are closed when the test ends).
func oneServedOneWaiting(t *testing.T, env *testkit.Env) (first, second net.Conn) {
	t.Helper()
	var conns [2]net.Conn
	for i := range conns {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	if !apiVersions(t, conns[0], 5*time.Second) {
		t.Fatal("first connection not served")
	}
	if apiVersions(t, conns[1], 300*time.Millisecond) {
		t.Fatal("a second connection was served over max.connections=1")
	}
	return conns[0], conns[1]
}

// max.connections through the helper: the connection over the limit waits
// (Kafka's blocking acceptor) and is served when one closes.
func TestAcceptorProcessWaitsForSlot(t *testing.T) {
	// Not parallel: finds its acceptor helper among this process's children;
	// another test's helper would be counted.
	env, _ := startWithAcceptor(t, 1000, func(c *app.Config) {
		c.BrokerConfigs = map[string]string{"max.connections": "1"}
	})
	first, second := oneServedOneWaiting(t, env)
	first.Close()
	// It was written before the slot freed; the answer comes once served.
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	var sz [4]byte
	if _, err := second.Read(sz[:]); err != nil {
		t.Fatalf("the waiting connection was not served after the first closed: %v", err)
	}
}

// Stopping the gateway stops the helper and frees the port.
func TestAcceptorProcessStopsWithGateway(t *testing.T) {
	// Not parallel: counts this process's acceptor helper children, which
	// another test's helper would change.
	exe, _ := os.Executable()
	rate := 100.0
	env := testkit.Start(t, app.Options{AcceptorExe: exe}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{DefaultIP: true, ConnectionCreationRate: &rate}}
	})
	if len(helperPIDs(t)) != 1 {
		t.Fatal("no acceptor helper")
	}
	addr := env.Bootstrap
	if err := env.App.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(helperPIDs(t)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the acceptor helper outlived the gateway")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the bootstrap port is still taken after the gateway stopped: %v", err)
	}
	ln.Close()
}

// §5.6: raising max.connections live (kadm IncrementalAlterConfigs on the
// default broker entity) wakes the acceptor blocked on it, and the waiting
// connection is served without any other closing — with the gateway
// accepting itself and with the acceptor helper.
func TestRaisingMaxConnectionsWakesWaitingAcceptor(t *testing.T) {
	// Not parallel: starts an acceptor helper, which the other acceptor tests
	// count among this process's children.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		opts app.Options
	}{{"in-process", app.Options{}}, {"acceptor helper", app.Options{AcceptorExe: exe}}} {
		t.Run(mode.name, func(t *testing.T) {
			env := testkit.Start(t, mode.opts, func(c *app.Config) {
				c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "OPS", Bootstrap: "127.0.0.1:0", Exempt: true})
				c.BrokerConfigs = map[string]string{"max.connections": "1"}
				c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
			})
			_, second := oneServedOneWaiting(t, env)
			// The admin client comes in on the exempt listener.
			cl, err := kgo.NewClient(kgo.SeedBrokers(env.App.Gateway().BootstrapAddrs()["OPS"]))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			res, err := kadm.NewClient(cl).AlterBrokerConfigs(context.Background(),
				[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("2")}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("raise max.connections: %v %v", err, res)
			}
			second.SetReadDeadline(time.Now().Add(5 * time.Second))
			var sz [4]byte
			if _, err := second.Read(sz[:]); err != nil {
				t.Fatalf("the waiting connection was not served after max.connections was raised: %v", err)
			}
		})
	}
}
