package admission

import (
	"net/netip"
	"testing"
	"time"
)

// TV7: ConnectionQuotasTest.testEnforcedIpConnectionRateQuotaUpdate. N=2,
// W=1 s, time frozen. Each phase makes 40 attempts from one IP; the count of
// that IP is checked after it. Parked attempts are un-recorded, so exactly the
// quota gets in per phase, and a live bound change applies at once.
func TestTV7IPRateQuotaUpdate(t *testing.T) {
	const external, admin = "10.0.0.1", "10.0.0.2"
	s := settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.IPConnectionRates = map[netip.Prefix]int{}
	})
	f := newFixture(t, s)
	phases := []struct {
		name         string
		mod          func(*Settings)
		listener, ip string
		wantAccepted int
		wantCount    int // connections counted for ip afterwards
		wantDelay    time.Duration
	}{
		{"ip quota 20", func(s *Settings) { s.IPConnectionRates[entity(t, external)] = 20 }, "EXTERNAL", external, 20, 20, 50 * time.Millisecond},
		{"raised to 30", func(s *Settings) { s.IPConnectionRates[entity(t, external)] = 30 }, "EXTERNAL", external, 10, 30, 0},
		{"quota removed", func(s *Settings) { delete(s.IPConnectionRates, entity(t, external)) }, "EXTERNAL", external, 40, 70, 0},
		{"other ip, no quota", func(*Settings) {}, "ADMIN", admin, 40, 40, 0},
		{"default ip quota 20", func(s *Settings) { s.DefaultIPConnectionRate = 20 }, "ADMIN", admin, 20, 60, 0},
	}
	for _, ph := range phases {
		s = f.update(ph.mod, s)
		accepted := 0
		var firstDelay time.Duration
		for range 40 {
			_, d, _ := f.try(ph.listener, ph.ip, base)
			switch d.Verdict {
			case Accept:
				accepted++
			case Park:
				if d.Reason != ReasonIPRate {
					t.Fatalf("%s: park reason %v", ph.name, d.Reason)
				}
				if firstDelay == 0 {
					firstDelay = d.Delay
				}
			default:
				t.Fatalf("%s: verdict %v", ph.name, d.Verdict)
			}
		}
		if accepted != ph.wantAccepted {
			t.Errorf("%s: accepted %d, want %d", ph.name, accepted, ph.wantAccepted)
		}
		if got := f.l.IPConnections(addr(ph.ip)); got != ph.wantCount {
			t.Errorf("%s: %s has %d connections, want %d", ph.name, ph.ip, got, ph.wantCount)
		}
		if ph.wantDelay != 0 && firstDelay != ph.wantDelay {
			t.Errorf("%s: first park delay %v, want %v", ph.name, firstDelay, ph.wantDelay)
		}
	}
	// The acceptor never blocks for an ip rate.
	for _, ls := range f.l.Stats(base).Listeners {
		if ls.Blocked.Total != 0 {
			t.Errorf("%s: blocked %v, want 0", ls.Name, ls.Blocked.Total)
		}
	}
}

// TV8: SocketServerTest.testConnectionRatePerIp. quota.window.num=2, default
// ip quota 5. The 6th and 7th connections are parked for 200 ms and never
// accepted; later connections are throttled by the same formula, and one at
// +200 ms fits exactly (equal to the quota is fine). At +1000 ms a new sample
// starts while the window is still 1 s, so the rate jumps again.
func TestTV8ConnectionRatePerIP(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) {
		s.QuotaWindowNum = 2
		s.DefaultIPConnectionRate = 5
	}))
	const ip = "192.0.2.7"
	steps := []struct {
		atMs      int64
		want      Verdict
		wantDelay time.Duration
		wantCount int
	}{
		{0, Accept, 0, 1},
		{0, Accept, 0, 2},
		{0, Accept, 0, 3},
		{0, Accept, 0, 4},
		{0, Accept, 0, 5},
		{0, Park, 200 * time.Millisecond, 5},
		{0, Park, 200 * time.Millisecond, 5},
		{150, Park, 50 * time.Millisecond, 5},
		{199, Park, 1 * time.Millisecond, 5},
		{200, Accept, 0, 6},
		{1000, Park, 400 * time.Millisecond, 6},
	}
	for i, st := range steps {
		now := at(st.atMs)
		_, d, _ := f.try("EXTERNAL", ip, now)
		if d.Verdict != st.want || d.Delay != st.wantDelay {
			t.Fatalf("step %d (+%d ms): %v %v, want %v %v", i, st.atMs, d.Verdict, d.Delay, st.want, st.wantDelay)
		}
		if d.Verdict == Park && !d.Until.Equal(now.Add(st.wantDelay)) {
			t.Errorf("step %d: park until %v, want now+%v", i, d.Until.Sub(base), st.wantDelay)
		}
		if got := f.l.IPConnections(addr(ip)); got != st.wantCount {
			t.Errorf("step %d: %d connections counted, want %d (parked sockets are never counted)", i, got, st.wantCount)
		}
	}
	if got := f.listenerStats("EXTERNAL", at(1000)).ParkedByIPRate; got != 5 {
		t.Errorf("ParkedByIPRate = %d, want 5", got)
	}
}

// TV16: ConnectionQuotasTest.testMaxConnectionsPerIp. 17 accepted, the next
// two rejected at once; another IP is unaffected; closes make room again.
func TestTV16MaxConnectionsPerIP(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) { s.MaxConnectionsPerIP = 17 }))
	const ip, other = "10.0.0.1", "10.0.0.9"
	var mine []*Conn
	for range 17 {
		mine = append(mine, f.accept("EXTERNAL", ip, base))
	}
	for range 2 {
		if _, d, _ := f.try("EXTERNAL", ip, base); d.Verdict != Reject || d.Reason != ReasonIPCount {
			t.Fatalf("18th+: %v %v, want reject max.connections.per.ip", d.Verdict, d.Reason)
		}
	}
	if got := f.l.IPConnections(addr(ip)); got != 17 {
		t.Fatalf("count %d after rejects, want 17", got)
	}
	for range 17 {
		f.accept("EXTERNAL", other, base)
	}
	f.release(mine[0])
	f.release(mine[1])
	if got := f.l.IPConnections(addr(ip)); got != 15 {
		t.Fatalf("count %d after two closes, want 15", got)
	}
	f.accept("EXTERNAL", ip, base)
	f.accept("EXTERNAL", ip, base)
	if _, d, _ := f.try("EXTERNAL", ip, base); d.Verdict != Reject {
		t.Fatalf("after refilling: %v, want reject", d.Verdict)
	}
	if got := f.listenerStats("EXTERNAL", base).RejectedByIPCount; got != 3 {
		t.Errorf("RejectedByIPCount = %d, want 3", got)
	}
}

// TV16: ConnectionQuotasTest.testMaxBrokerWideConnectionLimit, as a script.
func TestTV16MaxBrokerWideConnectionLimit(t *testing.T) {
	f := newFixture(t, settings(func(s *Settings) { s.MaxConnections = 800 }))
	l := f.l
	for range 800 {
		f.accept("EXTERNAL", "10.0.0.1", base)
	}
	if ls := f.listenerStats("EXTERNAL", base); ls.Blocked.Total != 0 {
		t.Fatalf("blocked %v with no wait for a slot, want 0", ls.Blocked.Total)
	}
	if l.MaxConnectionsExceeded("EXTERNAL") {
		t.Fatal("exceeded at exactly 800")
	}

	// The 801st blocks until a close.
	tk, d, c := f.try("EXTERNAL", "10.0.0.1", at(0))
	if d.Verdict != Wait || d.Reason != ReasonGatewayCount || d.Wake == nil {
		t.Fatalf("801st: %+v, want wait on max.connections", d)
	}
	if closed(d.Wake) {
		t.Fatal("wake closed before any close")
	}
	if ls := f.listenerStats("EXTERNAL", at(50)); !ls.Blocked.Since.Equal(at(0)) {
		t.Fatalf("BlockedSince %v, want t0", ls.Blocked.Since)
	}
	f.releaseOne("EXTERNAL")
	if !closed(d.Wake) {
		t.Fatal("a close did not wake the blocked acceptor")
	}
	if d = l.AdmitIP(tk, addr("10.0.0.1"), c, at(100)); d.Verdict != Accept {
		t.Fatalf("801st after a close: %v", d.Verdict)
	}
	f.conns[c.ID] = c
	ls := f.listenerStats("EXTERNAL", at(100))
	if ls.Blocked.Total != 100*time.Millisecond || !ls.Blocked.Since.IsZero() {
		t.Fatalf("blocked total %v since %v, want 100ms and not blocked", ls.Blocked.Total, ls.Blocked.Since)
	}
	if ls.BlockedByGatewayCount != 1 {
		t.Errorf("BlockedByGatewayCount = %d, want 1", ls.BlockedByGatewayCount)
	}

	// The inter-broker listener gets in at 800, and the others are now over.
	f.accept("REPLICATION", "10.0.0.3", at(100))
	if !l.MaxConnectionsExceeded("EXTERNAL") || l.MaxConnectionsExceeded("REPLICATION") {
		t.Fatal("after an inter-broker connection at the limit: EXTERNAL should exceed, REPLICATION not")
	}
	admin, d, ac := f.try("ADMIN", "10.0.0.2", at(100))
	if d.Verdict != Wait {
		t.Fatalf("ADMIN at 801: %v, want wait", d.Verdict)
	}
	f.accept("REPLICATION", "10.0.0.3", at(100)) // still fine while ADMIN waits

	// 802 now: the waiting ADMIN connection needs three closes.
	for i := 1; i <= 3; i++ {
		f.releaseOne("EXTERNAL")
		d = l.AdmitIP(admin, addr("10.0.0.2"), ac, at(200))
		if want := map[bool]Verdict{true: Accept, false: Wait}[i == 3]; d.Verdict != want {
			t.Fatalf("ADMIN after %d closes: %v, want %v", i, d.Verdict, want)
		}
	}
}

// TV16: ConnectionQuotasTest.testRejectedIpConnectionUnrecordedFromConnectionRateQuotas.
// An ip rate of 0 parks every connection for the full cap, and the un-record
// leaves the ip, listener and gateway rates at 0, on a protected listener too.
func TestTV16RejectedIPConnectionUnrecorded(t *testing.T) {
	const external, replication = "10.0.0.1", "10.0.0.3"
	f := newFixture(t, settings(func(s *Settings) {
		s.IPConnectionRates = map[netip.Prefix]int{entity(t, external): 0, entity(t, replication): 0}
	}))
	for _, tc := range []struct{ listener, ip string }{{"EXTERNAL", external}, {"REPLICATION", replication}} {
		_, d, _ := f.try(tc.listener, tc.ip, base)
		if d.Verdict != Park || d.Delay != time.Second {
			t.Fatalf("%s: %v %v, want park for the 1 s cap", tc.listener, d.Verdict, d.Delay)
		}
		ipRate, ok := f.l.IPConnectionAcceptRate(addr(tc.ip), base)
		if !ok || ipRate != 0 {
			t.Errorf("%s: ip rate %v (sensor %v), want 0", tc.listener, ipRate, ok)
		}
		st := f.l.Stats(base)
		if st.ConnectionAcceptRate != 0 {
			t.Errorf("%s: gateway rate %v, want 0", tc.listener, st.ConnectionAcceptRate)
		}
		if r := f.listenerStats(tc.listener, base).ConnectionAcceptRate; r != 0 {
			t.Errorf("%s: listener rate %v, want 0", tc.listener, r)
		}
	}
}
