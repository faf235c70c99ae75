package admission

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchLimiter has limits that never bite, so every iteration takes the full
// accept path; withIPRate also turns the per-IP sensor on.
func benchLimiter(b *testing.B, withIPRate bool) *Limiter {
	s := settings(func(s *Settings) {
		s.MaxConnections = 1_000_000
		s.MaxConnectionCreationRate = 1 << 30
		s.MaxConnectionsPerIP = 1_000_000
		if withIPRate {
			s.DefaultIPConnectionRate = 1 << 30
			s.IPConnectionRates = map[netip.Prefix]int{netip.MustParsePrefix("10.0.0.0/8"): 1 << 30}
		}
	})
	l, err := New(s, base)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func benchAccept(b *testing.B, withIPRate bool) { benchAdmit(b, benchLimiter(b, withIPRate), Accept) }

// benchAdmit runs the accept loop's path on l, every connection from one
// address, each getting want (and released, so counts stay flat).
func benchAdmit(b *testing.B, l *Limiter, want Verdict) {
	ip := addr("10.1.2.3")
	var c Conn
	now := base
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		now = now.Add(time.Microsecond)
		t, err := l.Admit("EXTERNAL", now)
		if err != nil && want == Accept {
			b.Fatal(err)
		}
		if d := l.AdmitIP(&t, ip, &c, now); d.Verdict != want {
			b.Fatalf("%v", d.Verdict)
		}
		if want == Accept {
			l.Release(&c)
		}
	}
}

// The accept loop's path: Admit + AdmitIP (+ Release so counts stay flat).
func BenchmarkAdmit(b *testing.B)       { benchAccept(b, false) }
func BenchmarkAdmitIPRate(b *testing.B) { benchAccept(b, true) }

// Parked connections: the per-IP rate trips every time (rate 0).
func BenchmarkAdmitParked(b *testing.B) {
	l, err := New(settings(func(s *Settings) { s.DefaultIPConnectionRate = 0 }), base)
	if err != nil {
		b.Fatal(err)
	}
	benchAdmit(b, l, Park)
}

// All listeners' accept loops (and closes) contending for the one mutex.
func BenchmarkAdmitParallel(b *testing.B) {
	l := benchLimiter(b, true)
	var n atomic.Uint32
	names := []string{"EXTERNAL", "ADMIN", "REPLICATION"}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1)
		name := names[int(i)%len(names)]
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		var c Conn
		for pb.Next() {
			now := time.Now()
			t, _ := l.Admit(name, now)
			if d := l.AdmitIP(&t, ip, &c, now); d.Verdict == Accept {
				l.Release(&c)
			}
		}
	})
}

func BenchmarkTouch(b *testing.B) {
	var c Conn
	now := base
	b.ReportAllocs()
	for range b.N {
		c.Touch(now)
	}
}

// Every method at once from many goroutines, for the race detector; the
// invariants are checked at the end (all released, nothing pending).
func TestConcurrentUse(t *testing.T) {
	s := settings(func(s *Settings) {
		s.MaxConnections = 20
		s.MaxConnectionsPerIP = 8
		s.DefaultIPConnectionRate = 1000
		s.Listeners[0].MaxConnections = 10
	})
	l, err := New(s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			name := kafkaListeners()[g%3].Name
			ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(g % 4)})
			var held []*Conn
			for i := 0; i < 300; i++ {
				tk, err := l.Admit(name, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				c := &Conn{ID: uint64(g<<20 | i)}
				for {
					d := l.AdmitIP(&tk, ip, c, time.Now())
					if d.Verdict == Accept {
						held = append(held, c)
						c.Touch(time.Now())
					}
					if d.Verdict != Wait {
						break
					}
					// Free a slot of our own rather than waiting forever.
					if len(held) > 0 {
						l.Release(held[0])
						held = held[1:]
					} else {
						l.Cancel(&tk, time.Now())
						break
					}
				}
				if len(held) > 3 {
					l.Release(held[0])
					held = held[1:]
				}
			}
			for _, c := range held {
				l.Release(c)
			}
		})
	}
	wg.Go(func() { // shedding, config churn and metric reads, a fixed amount
		ids := make([]uint64, 0, 32)
		for i := range 300 {
			ids = l.Shed(ids[:0])
			s.MaxConnections = 10 + i%15
			if err := l.Update(s, time.Now()); err != nil {
				t.Error(err)
				return
			}
			_ = l.Stats(time.Now())
			select {
			case <-l.ShedSignal():
			default:
			}
		}
	})
	wg.Wait()
	if st := l.Stats(time.Now()); st.Active != 0 || st.ShedPending != 0 {
		t.Fatalf("active %d, shed pending %d after every connection was released", st.Active, st.ShedPending)
	}
}
