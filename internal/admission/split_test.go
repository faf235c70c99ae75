package admission

import (
	"net/netip"
	"testing"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.MaxConnections = 10
	s.MaxConnectionCreationRate = 5
	s.MaxConnectionsPerIP = 1
	s.DefaultIPConnectionRate = 7
	s.MaxConnectionsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("10.0.0.1"): 9}
	s.IPConnectionRates = map[netip.Prefix]int{netip.MustParsePrefix("10.0.0.0/8"): 30}
	s.Listeners = []ListenerSettings{{Name: "a", MaxConnections: 4}, {Name: "b"}}
	for _, c := range []struct {
		n                                             int
		conns, rate, perIP, ipRate, over, rng, l0, l1 int
	}{
		{1, 10, 5, 1, 7, 9, 30, 4, 0},
		{3, 4, 2, 1, 3, 3, 10, 2, 0},
		{10, 1, 1, 1, 1, 1, 3, 1, 0},
		{20, 1, 1, 1, 1, 1, 2, 1, 0},
	} {
		got := s.Split(c.n)
		if got.MaxConnections != c.conns || got.MaxConnectionCreationRate != c.rate || got.MaxConnectionsPerIP != c.perIP ||
			got.DefaultIPConnectionRate != c.ipRate || got.MaxConnectionsPerIPOverrides[netip.MustParseAddr("10.0.0.1")] != c.over ||
			got.IPConnectionRates[netip.MustParsePrefix("10.0.0.0/8")] != c.rng || got.Listeners[0].MaxConnections != c.l0 ||
			got.Listeners[1].MaxConnections != c.l1 {
			t.Errorf("split over %d: %+v", c.n, got)
		}
		// The whole cluster never admits less than the limit, nor more
		// than limit + n − 1.
		if total := c.n * got.MaxConnections; total < s.MaxConnections || total > s.MaxConnections+c.n-1 && got.MaxConnections > 1 {
			t.Errorf("split over %d: total %d for a limit of %d", c.n, total, s.MaxConnections)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("split over %d: %v", c.n, err)
		}
	}
	// Unlimited stays unlimited; the original is not modified.
	u := DefaultSettings().Split(3)
	if u.MaxConnections != Unlimited || u.MaxConnectionsPerIP != Unlimited {
		t.Fatalf("%+v", u)
	}
	if s.Listeners[0].MaxConnections != 4 || s.IPConnectionRates[netip.MustParsePrefix("10.0.0.0/8")] != 30 {
		t.Fatal("Split changed its receiver")
	}
}
