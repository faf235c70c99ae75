package admission

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// §5.2 step 1: the gateway-wide rate delays the acceptor by
// round((O−Q)/Q·window), capped at quota.window.size.seconds; throttled
// connections stay recorded, so each further one waits longer.
func TestGatewayRateDelayAndCap(t *testing.T) {
	tests := []struct {
		name       string
		rate, n, w int
		want       []time.Duration // T of successive connections at one instant (ms)
	}{
		{"rate 5, N=2", 5, 2, 1, ms(0, 0, 0, 0, 0, 200, 400, 600, 800)},
		{"rate 1, N=2: capped at 1 s", 1, 2, 1, ms(0, 1000, 1000, 1000)},
		{"rate 1, N=2, W=2 s: cap follows the window", 1, 2, 2, ms(0, 0, 1000, 2000, 2000, 2000)},
		{"rate 10, defaults: burst of Q·(N−1)·W", 10, 11, 1, append(ms(make([]int64, 100)...), ms(100, 200, 300)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, settings(func(s *Settings) {
				s.MaxConnectionCreationRate = tc.rate
				s.QuotaWindowNum = tc.n
				s.QuotaWindowSizeSeconds = tc.w
			}))
			// All arrive at t0 (the formula is about simultaneous arrivals), so
			// throttled tickets are checked and cancelled rather than waited out:
			// accepting one later would move the clock for the next arrivals.
			var throttled uint64
			for i, want := range tc.want {
				tk, err := f.l.Admit("EXTERNAL", base)
				if err != nil {
					t.Fatal(err)
				}
				if tk.Throttle() != want {
					t.Fatalf("connection %d: T = %v, want %v", i+1, tk.Throttle(), want)
				}
				if want == 0 {
					if d := f.l.AdmitIP(&tk, addr("10.0.0.1"), &Conn{}, base); d.Verdict != Accept {
						t.Fatalf("connection %d: %v, want accept", i+1, d.Verdict)
					}
					continue
				}
				throttled++
				d := f.l.AdmitIP(&tk, addr("10.0.0.1"), &Conn{}, base.Add(want-time.Millisecond))
				if d.Verdict != Wait || d.Reason != ReasonGatewayRate || !d.Until.Equal(base.Add(want)) || d.Delay != want {
					t.Fatalf("connection %d before t0+T: %+v, want wait on max.connection.creation.rate until t0+%v", i+1, d, want)
				}
				f.l.Cancel(&tk, base.Add(want))
			}
			// A throttled connection is accepted once t0+T has passed.
			tk, _ := f.l.Admit("EXTERNAL", base)
			throttled++
			if d := f.l.AdmitIP(&tk, addr("10.0.0.1"), &Conn{}, tk.Until()); d.Verdict != Accept || tk.Throttle() == 0 {
				t.Fatalf("at t0+T=%v: %v", tk.Throttle(), d.Verdict)
			}
			ls := f.listenerStats("EXTERNAL", base)
			if ls.ThrottledByGatewayRate != throttled || ls.AcceptThrottle.Count != throttled {
				t.Errorf("throttle counters %d/%d, want %d", ls.ThrottledByGatewayRate, ls.AcceptThrottle.Count, throttled)
			}
		})
	}
}

func ms(v ...int64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// §5.2 step 1: the listener rate throttles only its listener; T is the max of
// the gateway and listener throttles.
func TestListenerRate(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.MaxConnectionCreationRate = 8
		s.Listeners[0].MaxConnectionCreationRate = 5 // EXTERNAL
	}))
	steps := []struct {
		listener string
		want     time.Duration
		reason   Reason
	}{
		{"EXTERNAL", 0, ReasonNone},
		{"EXTERNAL", 0, ReasonNone},
		{"EXTERNAL", 0, ReasonNone},
		{"EXTERNAL", 0, ReasonNone},
		{"EXTERNAL", 0, ReasonNone},
		{"EXTERNAL", 200 * time.Millisecond, ReasonListenerRate}, // listener 6/5, gateway 6/8
		{"ADMIN", 0, ReasonNone},                                 // gateway 7/8
		{"ADMIN", 0, ReasonNone},                                 // gateway 8/8: equal is fine
		{"ADMIN", 125 * time.Millisecond, ReasonGatewayRate},     // gateway 9/8
		{"EXTERNAL", 400 * time.Millisecond, ReasonListenerRate}, // listener 7/5 beats gateway 10/8 (250)
	}
	for i, st := range steps {
		tk, err := f.l.Admit(st.listener, base)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Throttle() != st.want || tk.rateReason != st.reason {
			t.Fatalf("step %d (%s): T = %v (%v), want %v (%v)", i, st.listener, tk.Throttle(), tk.rateReason, st.want, st.reason)
		}
		f.l.Cancel(&tk, base)
	}
	ext := f.listenerStats("EXTERNAL", base)
	if ext.ThrottledByListenerRate != 2 || ext.ThrottledByGatewayRate != 1 {
		t.Errorf("EXTERNAL counters listener %d gateway %d, want 2 and 1", ext.ThrottledByListenerRate, ext.ThrottledByGatewayRate)
	}
}

// §5.3: a protected listener neither records into nor is limited by the
// gateway rate, but its own listener rate applies. With a single listener
// the exemption does not take effect.
func TestExemptListenerIgnoresGatewayRate(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.MaxConnectionCreationRate = 5
		s.Listeners[2].MaxConnectionCreationRate = 3 // REPLICATION
	}))
	for range 5 {
		f.accept("EXTERNAL", "10.0.0.1", base)
	}
	if tk, _ := f.l.Admit("EXTERNAL", base); tk.Throttle() != 200*time.Millisecond {
		t.Fatalf("gateway rate not exhausted: T = %v", tk.Throttle())
	}
	before := f.l.Stats(base).ConnectionAcceptRate
	for i, want := range ms(0, 0, 0, 333) { // 4/3 over 1 s
		tk, _ := f.l.Admit("REPLICATION", base)
		if tk.Throttle() != want {
			t.Fatalf("REPLICATION %d: T = %v, want %v", i+1, tk.Throttle(), want)
		}
		f.l.Cancel(&tk, base)
	}
	if after := f.l.Stats(base).ConnectionAcceptRate; after != before {
		t.Errorf("gateway rate moved from %v to %v: the exempt listener recorded into it", before, after)
	}

	solo := newFixture(t, func() Settings {
		s := settings(func(s *Settings) { s.QuotaWindowNum = 2; s.MaxConnectionCreationRate = 1 })
		s.Listeners = []ListenerSettings{{Name: "REPLICATION", Exempt: true}}
		return s
	}())
	solo.accept("REPLICATION", "10.0.0.1", base)
	if tk, _ := solo.l.Admit("REPLICATION", base); tk.Throttle() != time.Second {
		t.Errorf("single exempt listener: T = %v, want 1s (not protected)", tk.Throttle())
	}
}

// §5.2 step 2: a per-IP rate violation parks the socket until now+T_ip, does
// not count it, and un-records it from the ip, listener and gateway sensors
// (the gateway one only for non-protected listeners). The un-record happens at
// AdmitIP time, after any wait.
func TestIPRateParkAndUnrecord(t *testing.T) {
	const ip = "10.0.0.1"
	f := newFixture(t, settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.IPConnectionRates = map[netip.Prefix]int{entity(t, ip): 2}
	}))
	f.accept("EXTERNAL", ip, base)
	f.accept("ADMIN", ip, base)
	now := at(10)
	_, d, c := f.try("EXTERNAL", ip, now)
	if d.Verdict != Park || d.Reason != ReasonIPRate || d.Delay != 490*time.Millisecond || !d.Until.Equal(now.Add(d.Delay)) {
		t.Fatalf("3rd: %+v, want park for 490ms", d)
	}
	if c.ln != nil || f.l.IPConnections(addr(ip)) != 2 {
		t.Fatal("a parked connection was counted or registered")
	}
	st := f.l.Stats(now)
	if r, _ := f.l.IPConnectionAcceptRate(addr(ip), now); !near(r, 2/1.01) {
		t.Errorf("ip rate %v, want 2 connections over 1.01 s", r)
	}
	if !near(st.ConnectionAcceptRate, 2/1.01) {
		t.Errorf("gateway rate %v, want 2 connections over 1.01 s", st.ConnectionAcceptRate)
	}
	ext := f.listenerStats("EXTERNAL", now)
	if !near(ext.ConnectionAcceptRate, 1/1.01) || ext.ParkedByIPRate != 1 || ext.IPAcceptThrottle.Total != 490*time.Millisecond {
		t.Errorf("EXTERNAL: rate %v parked %d ip throttle %v", ext.ConnectionAcceptRate, ext.ParkedByIPRate, ext.IPAcceptThrottle.Total)
	}

	// On the protected listener the gateway sensor is neither recorded nor
	// un-recorded.
	_, d, _ = f.try("REPLICATION", ip, now)
	if d.Verdict != Park {
		t.Fatalf("REPLICATION: %v, want park (per-IP rate applies to all listeners)", d.Verdict)
	}
	if got := f.l.Stats(now).ConnectionAcceptRate; got != st.ConnectionAcceptRate {
		t.Errorf("gateway rate %v after a protected park, want %v", got, st.ConnectionAcceptRate)
	}
	if top := f.l.Stats(now).TopIPs; len(top) != 1 || top[0].Addr != addr(ip) || top[0].Parked != 2 {
		t.Errorf("TopIPs %+v, want %s with 2 parks", top, ip)
	}
}

// §5.2 step 4: the (max+1)-th connection from an ip is closed at once, the
// override wins over the default, and the rejected connection stays recorded
// in the rate sensors.
func TestIPCountRejectsAtOnce(t *testing.T) {
	tests := []struct {
		ip   string
		want int // connections accepted before the first reject
	}{
		{"10.0.0.1", 2},        // max.connections.per.ip
		{"10.0.0.2", 3},        // override 3
		{"10.0.0.3", 0},        // override 0 blocks the host
		{"2001:db8::1", 4},     // IPv6 override
		{"::ffff:10.0.0.2", 0}, // the same client as 10.0.0.2, already full
	}
	f := newFixture(t, settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.MaxConnectionsPerIP = 2
		o, err := ParseOverrides("10.0.0.2:3, 10.0.0.3:0,2001:db8::1:4", nil)
		if err != nil {
			t.Fatal(err)
		}
		s.MaxConnectionsPerIPOverrides = o
	}))
	rejected := 0
	for _, tc := range tests {
		for i := 0; ; i++ {
			_, d, _ := f.try("EXTERNAL", tc.ip, base)
			if d.Verdict == Accept {
				continue
			}
			if d.Verdict != Reject || d.Reason != ReasonIPCount || i != tc.want {
				t.Fatalf("%s: %v (%v) after %d accepts, want reject after %d", tc.ip, d.Verdict, d.Reason, i, tc.want)
			}
			rejected++
			break
		}
	}
	ls := f.listenerStats("EXTERNAL", base)
	if want := 2 + 3 + 4; ls.Active != want {
		t.Errorf("active %d, want %d", ls.Active, want)
	}
	// Accepted and rejected connections are both in the rate (1 s window).
	if want := float64(ls.Active + rejected); !near(ls.ConnectionAcceptRate, want) {
		t.Errorf("listener rate %v, want %v: rejects are not un-recorded", ls.ConnectionAcceptRate, want)
	}
}

// §5.4: the default ip entity applies to addresses without their own entity;
// an own entity of Unlimited switches the ip sensor off for that address.
func TestDefaultIPEntity(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.DefaultIPConnectionRate = 3
		s.IPConnectionRates = map[netip.Prefix]int{
			entity(t, "10.0.0.5"): 5,
			entity(t, "10.0.0.9"): Unlimited,
		}
	}))
	for _, tc := range []struct {
		ip     string
		want   int
		sensor bool
	}{
		{"10.0.0.1", 3, true},
		{"10.0.0.2", 3, true},
		{"10.0.0.5", 5, true},
		{"10.0.0.9", 50, false},
	} {
		got := f.attempts("EXTERNAL", tc.ip, 50, base)[Accept]
		if got != tc.want {
			t.Errorf("%s: %d accepted, want %d", tc.ip, got, tc.want)
		}
		if _, ok := f.l.IPConnectionAcceptRate(addr(tc.ip), base); ok != tc.sensor {
			t.Errorf("%s: ip sensor present %v, want %v", tc.ip, ok, tc.sensor)
		}
	}
}

// Beyond Kafka: ip entities may be ranges. Exact address > most specific
// range > default, for IPv4 and IPv6, and IPv4-mapped spellings of either the
// peer or the entity count as IPv4.
func TestCIDRPrecedence(t *testing.T) {
	entities := map[string]int{
		"10.0.0.0/8":             50,
		"10.1.0.0/16":            20,
		"10.1.2.3":               7,
		"10.1.2.0/24":            9,
		"2001:db8::/32":          40,
		"2001:db8:1::/48":        30,
		"2001:db8:1::5":          3,
		"2001:db8:1::/64":        4,
		"::ffff:192.168.0.0/112": 6, // is 192.168.0.0/16
		"0.0.0.0/0":              90,
	}
	s := settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.DefaultIPConnectionRate = 11
		s.IPConnectionRates = map[netip.Prefix]int{}
		for name, v := range entities {
			s.IPConnectionRates[entity(t, name)] = v
		}
	})
	tests := []struct {
		ip   string
		want int
	}{
		{"10.1.2.3", 7},         // exact
		{"::ffff:10.1.2.3", 7},  // exact, mapped peer
		{"10.1.2.4", 9},         // /24 beats /16 and /8
		{"10.1.3.4", 20},        // /16
		{"10.2.0.1", 50},        // /8
		{"11.0.0.1", 90},        // /0 beats the default
		{"192.168.7.7", 6},      // mapped entity
		{"2001:db8:1::5", 3},    // exact
		{"2001:db8:1::6", 4},    // /64 beats /48
		{"2001:db8:1:1::6", 30}, // /48
		{"2001:db8:2::1", 40},   // /32
		{"2001:db9::1", 11},     // default: the v4 /0 does not cover v6
	}
	rates := newIPRates(s.DefaultIPConnectionRate, s.IPConnectionRates)
	for _, tc := range tests {
		if got := rates.lookup(normalizeAddr(addr(tc.ip))); got != tc.want {
			t.Errorf("lookup(%s) = %d, want %d", tc.ip, got, tc.want)
		}
	}
	// End to end: with N=2 and a frozen clock exactly `rate` connections fit.
	f := newFixture(t, s)
	for _, tc := range tests {
		if tc.ip == "::ffff:10.1.2.3" {
			continue // same client as 10.1.2.3, already used up
		}
		if got := f.attempts("EXTERNAL", tc.ip, 100, base)[Accept]; got != tc.want {
			t.Errorf("%s: %d accepted, want %d", tc.ip, got, tc.want)
		}
	}
}

// §5.6: raising a limit wakes blocked acceptors; a wait in progress keeps
// its T even if the rate is raised.
func TestLiveRaiseWakesWaiters(t *testing.T) {
	s := settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.MaxConnections = 1
		s.Listeners[1].MaxConnections = 1 // ADMIN
	})
	f := newFixture(t, s)
	f.accept("EXTERNAL", "10.0.0.1", base)
	gen := f.l.Generation()

	ext, d1, c1 := f.try("EXTERNAL", "10.0.0.1", base)
	if d1.Verdict != Wait || d1.Reason != ReasonGatewayCount {
		t.Fatalf("EXTERNAL: %v %v, want wait on max.connections", d1.Verdict, d1.Reason)
	}
	wake := f.l.Wake()
	s = f.update(func(s *Settings) { s.MaxConnections = 10 }, s)
	if !closed(d1.Wake) || !closed(wake) || f.l.Generation() != gen+1 {
		t.Fatal("raising max.connections did not wake the waiter or bump the generation")
	}
	if d := f.l.AdmitIP(ext, addr("10.0.0.1"), c1, at(5)); d.Verdict != Accept {
		t.Fatalf("after raise: %v", d.Verdict)
	}

	f.accept("ADMIN", "10.0.0.2", base)
	adm, d2, c2 := f.try("ADMIN", "10.0.0.2", base)
	if d2.Verdict != Wait || d2.Reason != ReasonListenerCount {
		t.Fatalf("ADMIN: %v %v, want wait on its listener max", d2.Verdict, d2.Reason)
	}
	s = f.update(func(s *Settings) { s.Listeners[1].MaxConnections = 2 }, s)
	if !closed(d2.Wake) {
		t.Fatal("raising the listener max did not wake the waiter")
	}
	if d := f.l.AdmitIP(adm, addr("10.0.0.2"), c2, at(5)); d.Verdict != Accept {
		t.Fatalf("after listener raise: %v", d.Verdict)
	}

	// A rate wait already computed keeps its deadline. At +10 s every earlier
	// sample has been purged (N·W = 2 s), so the window starts fresh.
	s = f.update(func(s *Settings) { s.MaxConnectionCreationRate = 1 }, s)
	f.accept("EXTERNAL", "10.0.0.3", at(10000))
	tk, _ := f.l.Admit("EXTERNAL", at(10000))
	if tk.Throttle() != time.Second {
		t.Fatalf("T = %v, want 1s", tk.Throttle())
	}
	f.update(func(s *Settings) { s.MaxConnectionCreationRate = 1000 }, s)
	if d := f.l.AdmitIP(&tk, addr("10.0.0.3"), &Conn{}, at(10500)); d.Verdict != Wait || !d.Until.Equal(at(11000)) {
		t.Fatalf("after raising the rate: %v until %v, want wait until the original t0+T", d.Verdict, d.Until.Sub(base))
	}
	if d := f.l.AdmitIP(&tk, addr("10.0.0.3"), &Conn{}, at(11000)); d.Verdict != Accept {
		t.Fatalf("at t0+T: %v", d.Verdict)
	}
}

// §5.6 and §5.2 step 6: lowering max.connections sheds the least recently
// active connections of non-protected listeners until total ≤ max; protected
// connections count but are never shed. An exempt accept over the limit also
// signals shedding.
func TestLowerMaxConnectionsShedsLRU(t *testing.T) {
	s := settings(nil)
	f := newFixture(t, s)
	type conn struct {
		listener string
		touched  int64 // ms
	}
	conns := []conn{
		{"EXTERNAL", 50}, {"EXTERNAL", 10}, {"EXTERNAL", 40},
		{"ADMIN", 20}, {"ADMIN", 60},
		{"REPLICATION", 0}, {"REPLICATION", 5}, // oldest, but protected
	}
	for i, c := range conns {
		got := f.accept(c.listener, "10.0.0.1", base)
		if got.ID != uint64(i+1) {
			t.Fatalf("unexpected id %d", got.ID)
		}
		got.Touch(at(c.touched))
	}
	sig := f.l.ShedSignal()
	if closed(sig) || len(f.l.Shed(nil)) != 0 {
		t.Fatal("shedding below the limit")
	}
	s = f.update(func(s *Settings) { s.MaxConnections = 3 }, s)
	if !closed(sig) {
		t.Fatal("lowering max.connections did not signal shedding")
	}
	got := f.l.Shed(nil)
	want := []uint64{2, 4, 3, 1} // touched at 10, 20, 40, 50 ms
	if !slices.Equal(got, want) {
		t.Fatalf("Shed = %v, want %v", got, want)
	}
	if again := f.l.Shed(nil); len(again) != 0 {
		t.Fatalf("second Shed before the closes = %v, want nothing new", again)
	}
	if st := f.l.Stats(base); st.ShedPending != 4 || st.Active != 7 {
		t.Fatalf("pending %d active %d, want 4 and 7", st.ShedPending, st.Active)
	}
	for _, id := range got {
		f.release(f.conns[id])
	}
	if st := f.l.Stats(base); st.ShedPending != 0 || st.Active != 3 {
		t.Fatalf("after closes: pending %d active %d, want 0 and 3", st.ShedPending, st.Active)
	}

	// At the limit, an exempt accept pushes the total over: shed one more.
	sig = f.l.ShedSignal()
	f.accept("REPLICATION", "10.0.0.1", base)
	if !closed(sig) {
		t.Fatal("an exempt accept over the limit did not signal shedding")
	}
	if got := f.l.Shed(nil); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("Shed = %v, want [5] (the only non-protected connection)", got)
	}
	// Only protected connections are left: nothing more to shed even though
	// the total is still over.
	f.release(f.conns[5])
	f.accept("REPLICATION", "10.0.0.1", base)
	if got := f.l.Shed(nil); len(got) != 0 {
		t.Fatalf("Shed = %v with only protected connections left", got)
	}
}

// §5.6 table: lowering a listener or per-IP maximum closes nothing; new
// connections wait (listener) or are rejected (ip). Lowering a rate affects
// only future accepts.
func TestLoweredLimitsKeepExistingConnections(t *testing.T) {
	s := settings(func(s *Settings) { s.QuotaWindowNum = 2 })
	f := newFixture(t, s)
	for range 4 {
		f.accept("EXTERNAL", "10.0.0.1", base)
	}
	s = f.update(func(s *Settings) {
		s.Listeners[0].MaxConnections = 2
		s.MaxConnectionsPerIP = 1
		s.MaxConnectionCreationRate = 1
	}, s)
	if got := f.l.Shed(nil); len(got) != 0 {
		t.Fatalf("Shed = %v, want nothing: only max.connections sheds", got)
	}
	if n := f.listenerStats("EXTERNAL", base).Active; n != 4 {
		t.Fatalf("active %d, want 4 kept", n)
	}
	if _, d, _ := f.try("EXTERNAL", "10.0.0.2", at(5000)); d.Verdict != Wait || d.Reason != ReasonListenerCount {
		t.Fatalf("new EXTERNAL connection: %v %v, want wait on the listener max", d.Verdict, d.Reason)
	}
	if _, d, _ := f.try("ADMIN", "10.0.0.1", at(10000)); d.Verdict != Reject || d.Reason != ReasonIPCount {
		t.Fatalf("new connection from the full ip: %v %v, want reject", d.Verdict, d.Reason)
	}
	if tk, _ := f.l.Admit("ADMIN", at(10000)); tk.Throttle() == 0 {
		t.Fatal("the lowered gateway rate does not apply to the next accept")
	}
}

// AcceptorBlockedPercent: the wait is marked when it ends; the rates are
// Yammer's EWMAs (5 s ticks) of blocked ns per ns, the mean is blocked time
// over the listener's lifetime.
func TestAcceptorBlockedPercent(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) { s.MaxConnections = 1 }))
	f.accept("EXTERNAL", "10.0.0.1", base)
	tk, d, c := f.try("EXTERNAL", "10.0.0.1", at(0))
	if d.Verdict != Wait {
		t.Fatalf("%v, want wait", d.Verdict)
	}
	if b := f.listenerStats("EXTERNAL", at(1000)).Blocked; !b.Since.Equal(base) || b.Total != 0 || b.MeanRate != 0 {
		t.Fatalf("while blocked: %+v, want since t0 and nothing marked yet", b)
	}
	f.releaseOne("EXTERNAL")
	if d := f.l.AdmitIP(tk, addr("10.0.0.1"), c, at(2500)); d.Verdict != Accept {
		t.Fatalf("%v after the close", d.Verdict)
	}
	f.l.MarkBlocked("EXTERNAL", 500*time.Millisecond, at(4000)) // step 5, fed by the caller

	// 3 s blocked in the first 5 s interval, then idle ticks.
	first := 3.0 / 5.0
	decay := func(minutes float64, ticks int) float64 {
		return first * math.Pow(1-alpha(minutes), float64(ticks))
	}
	tests := []struct {
		atMs              int64
		mean, m1, m5, m15 float64
		total             time.Duration
		comment           string
	}{
		{4999, 3.0 / 4.999, 0, 0, 0, 3 * time.Second, "no tick yet"},
		{5000, 3.0 / 5, first, first, first, 3 * time.Second, "first tick initializes every EWMA"},
		{10000, 3.0 / 10, decay(1, 1), decay(5, 1), decay(15, 1), 3 * time.Second, "one idle tick"},
		{60000, 3.0 / 60, decay(1, 11), decay(5, 11), decay(15, 11), 3 * time.Second, "eleven idle ticks at once"},
	}
	for _, tc := range tests {
		b := f.listenerStats("EXTERNAL", at(tc.atMs)).Blocked
		if !near(b.MeanRate, tc.mean) || !near(b.OneMinuteRate, tc.m1) || !near(b.FiveMinuteRate, tc.m5) ||
			!near(b.FifteenMinuteRate, tc.m15) || b.Total != tc.total || !b.Since.IsZero() {
			t.Errorf("+%d ms (%s): %+v, want mean %v m1 %v m5 %v m15 %v", tc.atMs, tc.comment, b, tc.mean, tc.m1, tc.m5, tc.m15)
		}
	}
	// A listener that never blocks reads 0 everywhere.
	if b := f.listenerStats("ADMIN", at(60000)).Blocked; b != (BlockedStats{}) {
		t.Errorf("ADMIN: %+v, want zero", b)
	}
}

func alpha(minutes float64) float64 { return 1 - math.Exp(-5.0/60.0/minutes) }

// Tickets outlive settings: a removed listener's waiting ticket is rejected
// and an unknown listener is an error.
func TestListenerRemoval(t *testing.T) {
	s := settings(func(s *Settings) { s.Listeners[1].MaxConnections = 1 })
	f := newFixture(t, s)
	c := f.accept("ADMIN", "10.0.0.1", base)
	tk, d, wc := f.try("ADMIN", "10.0.0.1", base)
	if d.Verdict != Wait {
		t.Fatalf("%v, want wait", d.Verdict)
	}
	s = f.update(func(s *Settings) { s.Listeners = s.Listeners[:1] }, s)
	if !closed(d.Wake) {
		t.Fatal("removing the listener did not wake its acceptor")
	}
	if d := f.l.AdmitIP(tk, addr("10.0.0.1"), wc, at(10)); d.Verdict != Reject || d.Reason != ReasonListenerRemoved {
		t.Fatalf("%v %v, want reject for the removed listener", d.Verdict, d.Reason)
	}
	if _, err := f.l.Admit("ADMIN", base); !errors.Is(err, ErrUnknownListener) {
		t.Fatalf("Admit on a removed listener: %v", err)
	}
	if got := f.l.Stats(base).Active; got != 1 {
		t.Fatalf("active %d: a removed listener's connections stay counted until released", got)
	}
	f.release(c)
	if got := f.l.Stats(base).Active; got != 0 {
		t.Fatalf("active %d after release", got)
	}
}

// §5.4: ip sensors expire after an hour without records; counts do not.
func TestIPSensorExpiry(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) { s.DefaultIPConnectionRate = 100 }))
	c := f.accept("EXTERNAL", "10.0.0.1", base)
	f.accept("EXTERNAL", "10.0.0.2", base)
	f.release(c)
	hour := int64(3600 * 1000)
	f.accept("EXTERNAL", "10.0.0.3", at(hour)) // exactly an hour: not expired yet (strictly greater)
	if _, ok := f.l.IPConnectionAcceptRate(addr("10.0.0.1"), at(hour)); !ok {
		t.Fatal("sensor expired at exactly one hour")
	}
	f.accept("EXTERNAL", "10.0.0.3", at(hour+sweepEveryMs+1))
	if _, ok := f.l.IPConnectionAcceptRate(addr("10.0.0.1"), at(hour+sweepEveryMs+1)); ok {
		t.Fatal("idle sensor of a disconnected ip survived the sweep")
	}
	if _, ok := f.l.IPConnectionAcceptRate(addr("10.0.0.2"), at(hour+sweepEveryMs+1)); ok {
		t.Fatal("idle sensor of a connected ip survived the sweep")
	}
	if n := f.l.IPConnections(addr("10.0.0.2")); n != 1 {
		t.Fatalf("count %d, want the connection still counted", n)
	}
	if n := f.l.Stats(at(hour + sweepEveryMs + 1)).TrackedIPs; n != 2 {
		t.Fatalf("tracked %d, want 2 (10.0.0.2 connected, 10.0.0.3 with a live sensor)", n)
	}
}

// Kafka treats the quota window as static; here a change restarts every rate
// sensor, so the history behind a throttle is gone.
func TestWindowChangeRestartsRates(t *testing.T) {
	s := settings(func(s *Settings) { s.QuotaWindowNum = 2; s.MaxConnectionCreationRate = 1 })
	f := newFixture(t, s)
	f.accept("EXTERNAL", "10.0.0.1", base)
	if tk, _ := f.l.Admit("EXTERNAL", base); tk.Throttle() != time.Second {
		t.Fatalf("T = %v, want 1s", tk.Throttle())
	}
	s = f.update(func(s *Settings) { s.QuotaWindowNum = 3 }, s)
	if tk, _ := f.l.Admit("EXTERNAL", base); tk.Throttle() != 0 {
		t.Fatalf("T = %v after a window change, want 0 (fresh sensor, burst of 2)", tk.Throttle())
	}
	f.update(func(s *Settings) {}, s)  // same window: history kept
	for i, want := range ms(0, 1000) { // 2 then 3 over a 2 s window at rate 1
		if tk, _ := f.l.Admit("EXTERNAL", base); tk.Throttle() != want {
			t.Fatalf("admit %d after an unrelated update: T = %v, want %v", i+2, tk.Throttle(), want)
		}
	}
}

// Misuse that would corrupt the counts panics instead.
func TestMisusePanics(t *testing.T) {
	f := newFixture(t, settings(nil))
	c := f.accept("EXTERNAL", "10.0.0.1", base)
	for name, fn := range map[string]func(){
		"zero ticket": func() { f.l.AdmitIP(&Ticket{}, addr("10.0.0.1"), &Conn{}, base) },
		"registered conn": func() {
			tk, _ := f.l.Admit("EXTERNAL", base)
			f.l.AdmitIP(&tk, addr("10.0.0.1"), c, base)
		},
		"finished ticket": func() {
			tk, _ := f.l.Admit("EXTERNAL", base)
			f.l.AdmitIP(&tk, addr("10.0.0.1"), &Conn{}, base)
			f.l.AdmitIP(&tk, addr("10.0.0.1"), &Conn{}, base)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
	f.release(c)
	f.l.Release(c) // a second release is a no-op
	if got := f.l.Stats(base).Active; got != 1 {
		t.Fatalf("active %d, want 1 (the finished-ticket case accepted once)", got)
	}
}
