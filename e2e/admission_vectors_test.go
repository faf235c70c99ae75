package e2e

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Kafka's connection-quota test vectors (TV7, TV8, TV16 — the admission
// package runs them against the limiter with an explicit clock), here
// through the gateway: Kafka-protocol clients on connections, in a
// synctest bubble so that time is exact. A client's address is that of the
// listener it dials (the in-memory network's loopback), so listeners on
// 127.0.0.1, .2 and .3 give three client addresses.

// attempt is one connection: dialed, ApiVersions written, and its fate —
// answered (served) or closed unanswered (parked or rejected) — with the
// virtual time it took.
type attempt struct {
	c    net.Conn
	done chan struct{}
	ok   bool
	took time.Duration
}

func tryConnect(t *testing.T, env *testkit.Env, addr string) *attempt {
	t.Helper()
	c, err := env.Net.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := &attempt{c: c, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(a.done)
		if _, err := c.Write(probeRequest()); err == nil {
			_, err = readFrame(c)
			a.ok = err == nil
		}
		a.took = time.Since(start)
	}()
	return a
}

// answered reports whether a was served at once (in the same instant).
func (a *attempt) answered() bool {
	synctest.Wait()
	select {
	case <-a.done:
		return a.ok && a.took == 0
	default:
		return false
	}
}

// closedAfter waits for a to end and returns how long it took; it fails if
// a was served.
func (a *attempt) closedAfter(t *testing.T) time.Duration {
	t.Helper()
	<-a.done
	if a.ok {
		t.Fatal("the connection was served, want it closed unanswered")
	}
	return a.took
}

// TV8 (SocketServerTest.testConnectionRatePerIp): quota.window.num=2,
// default ip quota 5. Five connections at once are served; the 6th and 7th
// are parked for 200 ms and never served; at +150 ms one is parked for
// 50 ms, at +199 ms for 1 ms; at +200 ms one fits exactly; at +1000 ms a new
// sample starts while the window is still 1 s and one is parked for 400 ms.
// Tollgate closes a parked socket within [delay, 2·delay).
func TestSynctestTV8ConnectionRatePerIP(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rate := 5.0
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Quota.WindowNum = 2
			c.Quotas = []app.QuotaEntry{{DefaultIP: true, ConnectionCreationRate: &rate}}
		})
		start := time.Now()
		steps := []struct {
			atMs  int64
			serve bool
			delay time.Duration
		}{
			{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0},
			{0, false, 200 * time.Millisecond}, {0, false, 200 * time.Millisecond},
			{150, false, 50 * time.Millisecond},
			{199, false, time.Millisecond},
			{200, true, 0},
			{1000, false, 400 * time.Millisecond},
		}
		type parkedAt struct {
			a     *attempt
			step  int
			delay time.Duration
		}
		var parked []parkedAt
		for i, st := range steps {
			if wait := time.Duration(st.atMs)*time.Millisecond - time.Since(start); wait > 0 {
				time.Sleep(wait)
			}
			a := tryConnect(t, env, env.Bootstrap)
			if got := a.answered(); got != st.serve {
				t.Fatalf("step %d (+%d ms): served %v, want %v", i, st.atMs, got, st.serve)
			}
			if !st.serve {
				parked = append(parked, parkedAt{a, i, st.delay})
			}
		}
		for _, p := range parked {
			if d := p.a.closedAfter(t); d < p.delay || d >= 2*p.delay {
				t.Errorf("step %d: parked connection closed after %v, want within [%v, %v)", p.step, d, p.delay, 2*p.delay)
			}
		}
	})
}

// TV7 (ConnectionQuotasTest.testEnforcedIpConnectionRateQuotaUpdate):
// N=2, time frozen (no virtual time passes until the end), 40 attempts a
// phase; quotas changed live through
// AlterClientQuotas (kadm) between phases. Exactly the quota gets in per
// phase, parked attempts are un-recorded, and a change applies at once.
func TestSynctestTV7IPRateQuotaUpdate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Quota.WindowNum = 2
			c.Listeners = []proxy.ListenerConfig{
				{Name: "EXTERNAL", Bootstrap: "127.0.0.1:0"},
				{Name: "ADMIN", Bootstrap: "127.0.0.2:0"},
				{Name: "CONTROL", Bootstrap: "127.0.0.3:0"},
			}
			c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
		})
		addrs := env.App.Gateway().BootstrapAddrs()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs["CONTROL"]), kgo.Dialer(env.Net.DialContext))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		alter := func(ip *string, op kadm.AlterClientQuotaOp) {
			t.Helper()
			res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{
				Entity: []kadm.ClientQuotaEntityComponent{{Type: "ip", Name: ip}},
				Ops:    []kadm.AlterClientQuotaOp{op},
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
		}
		external := "127.0.0.1"
		set := func(v float64) kadm.AlterClientQuotaOp {
			return kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: v}
		}
		phases := []struct {
			name     string
			change   func()
			listener string
			want     int
		}{
			{"ip quota 20", func() { alter(&external, set(20)) }, "EXTERNAL", 20},
			{"raised to 30", func() { alter(&external, set(30)) }, "EXTERNAL", 10},
			{"quota removed", func() {
				alter(&external, kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Remove: true})
			}, "EXTERNAL", 40},
			{"other ip, no quota", func() {}, "ADMIN", 40},
			{"default ip quota 20", func() { alter(nil, set(20)) }, "ADMIN", 20},
		}
		var parked []*attempt
		for _, ph := range phases {
			ph.change()
			served := 0
			for range 40 {
				a := tryConnect(t, env, addrs[ph.listener])
				if a.answered() {
					served++
				} else {
					parked = append(parked, a)
				}
			}
			if served != ph.want {
				t.Fatalf("%s: %d of 40 served, want %d", ph.name, served, ph.want)
			}
		}
		// Time stood still through the phases (as in Kafka's test); now
		// every parked connection is closed, never served.
		for _, a := range parked {
			a.closedAfter(t)
		}
	})
}

// TV16 (ConnectionQuotasTest.testMaxConnectionsPerIp): 17 accepted from one
// address, the next two rejected at once; another address is unaffected;
// two closes make room for two more, and no more.
func TestSynctestTV16MaxConnectionsPerIP(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Listeners = []proxy.ListenerConfig{
				{Name: "EXTERNAL", Bootstrap: "127.0.0.1:0"},
				{Name: "OTHER", Bootstrap: "127.0.0.9:0"},
			}
			c.BrokerConfigs = map[string]string{"max.connections.per.ip": "17"}
		})
		addrs := env.App.Gateway().BootstrapAddrs()
		var mine []*attempt
		for i := 0; i < 17; i++ {
			a := tryConnect(t, env, addrs["EXTERNAL"])
			if !a.answered() {
				t.Fatalf("connection %d of 17 not served", i+1)
			}
			mine = append(mine, a)
		}
		for i := 0; i < 2; i++ {
			if d := tryConnect(t, env, addrs["EXTERNAL"]).closedAfter(t); d != 0 {
				t.Fatalf("the %dth connection was closed after %v, want at once", 18+i, d)
			}
		}
		for i := 0; i < 17; i++ {
			if !tryConnect(t, env, addrs["OTHER"]).answered() {
				t.Fatalf("another address's connection %d not served", i+1)
			}
		}
		mine[0].c.Close()
		mine[1].c.Close()
		synctest.Wait()
		for i := 0; i < 2; i++ {
			if !tryConnect(t, env, addrs["EXTERNAL"]).answered() {
				t.Fatalf("connection %d after two closes not served", i+1)
			}
		}
		if d := tryConnect(t, env, addrs["EXTERNAL"]).closedAfter(t); d != 0 {
			t.Fatalf("the connection over the refilled limit closed after %v, want at once", d)
		}
	})
}

// Beyond Kafka: ip entities may be ranges. Through the gateway, at frozen
// time (Q·(N−1)·W connections pass at once for a rate Q, N=11): an exact
// address beats a range that contains it, the most specific range beats a
// wider one, and an address in no range gets the default.
func TestSynctestCIDRPrecedence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		q := func(ip string, rate float64) app.QuotaEntry {
			if ip == "" {
				return app.QuotaEntry{DefaultIP: true, ConnectionCreationRate: &rate}
			}
			return app.QuotaEntry{IP: &ip, ConnectionCreationRate: &rate}
		}
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Listeners = []proxy.ListenerConfig{
				{Name: "EXACT", Bootstrap: "127.0.0.1:0"},   // 127.0.0.1/32: 2
				{Name: "NARROW", Bootstrap: "127.0.0.2:0"},  // 127.0.0.2/31: 4
				{Name: "WIDE", Bootstrap: "127.0.0.5:0"},    // 127.0.0.0/24: 3
				{Name: "DEFAULT", Bootstrap: "127.0.1.1:0"}, // default: 1
			}
			c.Quotas = []app.QuotaEntry{q("", 1), q("127.0.0.0/24", 3), q("127.0.0.2/31", 4), q("127.0.0.1", 2)}
		})
		addrs := env.App.Gateway().BootstrapAddrs()
		for _, tc := range []struct {
			listener string
			want     int
		}{{"EXACT", 20}, {"NARROW", 40}, {"WIDE", 30}, {"DEFAULT", 10}} {
			served := 0
			for range 50 {
				if tryConnect(t, env, addrs[tc.listener]).answered() {
					served++
				}
			}
			if served != tc.want {
				t.Errorf("%s: %d of 50 served at once, want %d", tc.listener, served, tc.want)
			}
		}
	})
}
