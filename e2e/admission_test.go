package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Connection admission through the gateway: connection counts and
// creation rates per IP and per listener, PROXY protocol addresses,
// max.connections shedding, and Kafka's connection-quota test vectors.

// max.connections.per.ip: the connection over the limit is closed at once;
// when one closes, the next is admitted again.
func TestPerIPConnectionCount(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.BrokerConfigs = map[string]string{"max.connections.per.ip": "2"}
	})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		conns = append(conns, dialServed(t, env.Bootstrap, 5*time.Second, fmt.Sprintf("connection %d within the limit", i+1)))
	}
	third, err := net.Dial("tcp", env.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if apiVersions(t, third, 5*time.Second) {
		t.Fatal("the third connection from one IP was served")
	}
	if !env.Logs.WaitFor("reason=connection_limit_max.connections.per.ip", 2*time.Second) {
		t.Error("no log line for the per-IP rejection")
	}
	conns[0].Close()
	time.Sleep(100 * time.Millisecond) // the gateway notices the close
	var served bool
	for try := 0; try < 20 && !served; try++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		served = apiVersions(t, c, 2*time.Second)
	}
	if !served {
		t.Fatal("no connection admitted after one of the two closed")
	}
}

// proxyDialer writes a PROXY header claiming src before the Kafka traffic.
func proxyDialer(src string, version byte) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return proxyDialerFrom("", src, version)
}

// proxyDialerFrom is proxyDialer from the local address local ("": any).
func proxyDialerFrom(local, src string, version byte) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		if local != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		srcAddr, _ := net.ResolveTCPAddr("tcp", src)
		h := proxyproto.HeaderProxyFromAddrs(version, srcAddr, c.RemoteAddr())
		if _, err := h.WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

// A PROXY-protocol listener sees the real client address (v1 and v2): it
// is what the logs show and what per-IP limits count. A malformed header
// closes only that connection.
func TestProxyProtocol(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].ProxyProtocol = true
		c.Listeners[0].ProxyProtocolTrustedCIDRs = []string{"127.0.0.1"}
		c.BrokerConfigs = map[string]string{"max.connections.per.ip": "1000", "max.connections.per.ip.overrides": "10.9.9.9:1"}
	})
	ctx := ctxT(t, 30*time.Second)
	for _, tc := range []struct {
		src     string
		version byte
	}{{"10.1.2.3:40000", 1}, {"[2001:db8::7]:40001", 2}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(proxyDialer(tc.src, tc.version)),
			kgo.DefaultProduceTopic("pp"), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("PROXY v%d: %v", tc.version, err)
		}
		cl.Close()
		host, _, _ := net.SplitHostPort(tc.src)
		if !env.Logs.WaitFor("remote="+net.JoinHostPort(host, ""), 2*time.Second) && !strings.Contains(env.Logs.String(), host) {
			t.Errorf("PROXY v%d: the log never shows the client address %s", tc.version, host)
		}
	}
	// The per-IP override applies to the address in the header.
	first, err := proxyDialer("10.9.9.9:1", 2)(ctx, "tcp", env.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if !apiVersions(t, first, 5*time.Second) {
		t.Fatal("first connection from 10.9.9.9 not served")
	}
	second, err := proxyDialer("10.9.9.9:2", 2)(ctx, "tcp", env.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if apiVersions(t, second, 3*time.Second) {
		t.Fatal("second connection from 10.9.9.9 served despite max.connections.per.ip.overrides=10.9.9.9:1")
	}
	// A malformed header closes that connection only.
	bad, err := net.Dial("tcp", env.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write([]byte("PROXY NONSENSE\r\n"))
	expectClosed(t, bad)
	if !env.Logs.WaitFor("reason=bad_proxy_header", 2*time.Second) {
		t.Error("no log line for the malformed PROXY header")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(proxyDialer("10.1.2.4:1", 1)), kgo.DefaultProduceTopic("pp"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("a good client after the malformed header: %v", err)
	}
}

// The exempt listener keeps accepting at once while the gateway-wide
// creation rate holds back the other listener; and a per-IP creation-rate
// violation is accepted, never served, and closed after its delay.
func TestSynctestConnectionRates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "OPS", Bootstrap: "127.0.0.1:0", Exempt: true})
			c.BrokerConfigs = map[string]string{"max.connection.creation.rate": "2"}
		})
		addrs := env.App.Gateway().BootstrapAddrs()
		checkCreationRate2(t, env, "the gateway-wide rate", addrs["PLAINTEXT"], 5, addrs["OPS"])
	})
}

// checkCreationRate2 checks a connection creation rate of 2/s that holds
// back limited and not free, in a synctest bubble: with Kafka's 11
// one-second samples a burst of 20 connections to limited passes, the over
// connections after it wait (1 s at least in all), and a connection to
// free is then served at once.
func checkCreationRate2(t *testing.T, env *testkit.Env, rate, limited string, over int, free string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		servedAfter(t, env, limited)
	}
	var waited time.Duration
	for i := 0; i < over; i++ {
		waited += servedAfter(t, env, limited)
	}
	if waited < time.Second {
		t.Fatalf("%d connections over %s waited only %v in all", over, rate, waited)
	}
	if d := servedAfter(t, env, free); d != 0 {
		t.Fatalf("a listener %s does not hold waited %v while it was exhausted", rate, d)
	}
}

func TestSynctestPerIPRateParks(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rate := 1.0
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{{DefaultIP: true, ConnectionCreationRate: &rate}}
		})
		var servedN, parked int
		for i := 0; i < 15; i++ {
			c, err := env.Net.DialContext(context.Background(), "tcp", env.Bootstrap)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if apiVersions(t, c, 30*time.Second) {
				servedN++
			} else {
				parked++
				// The delay is capped at one window (1 s); Tollgate
				// spreads each close over [delay, 2·delay).
				if d := time.Since(start); d <= 0 || d >= 2*time.Second {
					t.Errorf("parked connection closed after %v, want within twice the 1 s cap", d)
				}
			}
			c.Close()
		}
		// 1/s, N=11: the first 10 pass (window floor 10 s), then every
		// further one in the same instant is parked.
		if servedN != 10 || parked != 5 {
			t.Fatalf("served %d, parked %d; want 10 and 5", servedN, parked)
		}
	})
}

// listener.name.<l>.max.connection.creation.rate holds back that
// listener's acceptor only; another listener keeps accepting at once.
func TestSynctestListenerCreationRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "OTHER", Bootstrap: "127.0.0.1:0"})
			c.BrokerConfigs = map[string]string{"listener.name.plaintext.max.connection.creation.rate": "2"}
		})
		addrs := env.App.Gateway().BootstrapAddrs()
		checkCreationRate2(t, env, "the listener's rate", addrs["PLAINTEXT"], 4, addrs["OTHER"])
	})
}

// Lowering max.connections live closes the least recently used
// connections.
func TestMaxConnectionsShedsLRU(t *testing.T) {
	// Not parallel: orders connections by 20 ms sleeps and gives the shed 200
	// ms.
	env := startControl(t)
	ctx := ctxT(t, 30*time.Second)
	var conns []net.Conn
	for i := 0; i < 5; i++ {
		conns = append(conns, dialServed(t, env.Bootstrap, 3*time.Second, fmt.Sprintf("connection %d", i)))
		time.Sleep(20 * time.Millisecond) // distinct last-activity times
	}
	// The newest three are used again, so the first two are the least
	// recently used.
	for _, c := range conns[2:] {
		if !apiVersions(t, c, 3*time.Second) {
			t.Fatal("a connection was refused before the limit changed")
		}
	}
	// Six connections with the admin's (the most recent); a limit of
	// four sheds two.
	adm := adminAs(t, env, "127.0.0.2")
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("4")}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	if !env.Logs.WaitFor("reason=max_connections_shed", 5*time.Second) {
		t.Fatal("nothing was shed")
	}
	time.Sleep(200 * time.Millisecond)
	for i, c := range conns {
		alive := apiVersions(t, c, 2*time.Second)
		if i < 2 && alive {
			t.Errorf("least recently used connection %d survived", i)
		}
	}
	alive := 0
	for _, c := range conns[2:] {
		if apiVersions(t, c, 2*time.Second) {
			alive++
		}
	}
	if alive == 0 {
		t.Error("every recently used connection was shed too")
	}
}

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
