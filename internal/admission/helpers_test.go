package admission

import (
	"net/netip"
	"testing"
	"time"
)

// t0ms is an unaligned, wall-clock-like start: Kafka's MockTime starts at the
// current time, so windows never line up with whole seconds in its tests.
const t0ms int64 = 1_700_000_000_123

// base is t0ms as a time.Time; every test clock is an explicit offset from it.
var base = time.UnixMilli(t0ms)

func at(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func entity(t testing.TB, name string) netip.Prefix {
	t.Helper()
	p, err := ParseIPEntity(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// kafkaListeners mirrors ConnectionQuotasTest: EXTERNAL, ADMIN and the
// inter-broker REPLICATION listener, which is the exempt one.
func kafkaListeners() []ListenerSettings {
	return []ListenerSettings{
		{Name: "EXTERNAL"},
		{Name: "ADMIN"},
		{Name: "REPLICATION", Exempt: true},
	}
}

// settings returns DefaultSettings with the Kafka test listeners, modified.
func settings(mod func(*Settings)) Settings {
	s := DefaultSettings()
	s.Listeners = kafkaListeners()
	if mod != nil {
		mod(&s)
	}
	return s
}

type fixture struct {
	t      testing.TB
	l      *Limiter
	nextID uint64
	conns  map[uint64]*Conn
}

func newFixture(t testing.TB, s Settings) *fixture {
	t.Helper()
	l, err := New(s, base)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &fixture{t: t, l: l, conns: make(map[uint64]*Conn)}
}

func (f *fixture) update(mod func(*Settings), s Settings) Settings {
	f.t.Helper()
	mod(&s)
	if err := f.l.Update(s, base); err != nil {
		f.t.Fatalf("Update: %v", err)
	}
	return s
}

// try runs the acceptor procedure once at now without waiting: Admit, then one
// AdmitIP. On Accept the connection is kept in f.conns under its ID.
func (f *fixture) try(listener, ip string, now time.Time) (*Ticket, Decision, *Conn) {
	f.t.Helper()
	tk, err := f.l.Admit(listener, now)
	if err != nil {
		f.t.Fatalf("Admit(%s): %v", listener, err)
	}
	f.nextID++
	c := &Conn{ID: f.nextID}
	d := f.l.AdmitIP(&tk, addr(ip), c, now)
	if d.Verdict == Accept {
		f.conns[c.ID] = c
	}
	return &tk, d, c
}

// accept requires try to Accept.
func (f *fixture) accept(listener, ip string, now time.Time) *Conn {
	f.t.Helper()
	_, d, c := f.try(listener, ip, now)
	if d.Verdict != Accept {
		f.t.Fatalf("%s from %s at %v: %v (%v), want accept", listener, ip, now.Sub(base), d.Verdict, d.Reason)
	}
	return c
}

// attempts runs n tries at now and counts the verdicts.
func (f *fixture) attempts(listener, ip string, n int, now time.Time) map[Verdict]int {
	f.t.Helper()
	got := make(map[Verdict]int)
	for range n {
		_, d, _ := f.try(listener, ip, now)
		got[d.Verdict]++
	}
	return got
}

func (f *fixture) release(c *Conn) {
	f.l.Release(c)
	delete(f.conns, c.ID)
}

// releaseOne releases any accepted connection on listener.
func (f *fixture) releaseOne(listener string) {
	f.t.Helper()
	for _, c := range f.conns {
		if c.ln != nil && c.ln.name == listener {
			f.release(c)
			return
		}
	}
	f.t.Fatalf("no connection on %s to release", listener)
}

func (f *fixture) listenerStats(name string, now time.Time) ListenerStats {
	f.t.Helper()
	for _, ls := range f.l.Stats(now).Listeners {
		if ls.Name == name {
			return ls
		}
	}
	f.t.Fatalf("no stats for listener %s", name)
	return ListenerStats{}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}
