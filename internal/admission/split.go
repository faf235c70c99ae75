package admission

import "net/netip"

// Split returns the settings one of n live instances of a Tollgate cluster
// enforces so that the cluster as a whole holds s: every connection count
// and creation rate divided by n, rounded up, never below 1; Unlimited
// stays Unlimited. The cluster total is then at most n·⌈L/n⌉ < L + n for
// a limit L, however connections spread; a client whose connections all
// land on one instance gets ⌈L/n⌉ there (docs/cluster.md). n ≤ 1 returns s.
func (s Settings) Split(n int) Settings {
	if n <= 1 {
		return s
	}
	part := func(v int) int {
		if v <= 0 || v >= Unlimited {
			return v
		}
		return max((v+n-1)/n, 1)
	}
	out := s
	out.MaxConnectionCreationRate = part(s.MaxConnectionCreationRate)
	out.MaxConnections = part(s.MaxConnections)
	out.MaxConnectionsPerIP = part(s.MaxConnectionsPerIP)
	out.DefaultIPConnectionRate = part(s.DefaultIPConnectionRate)
	if s.MaxConnectionsPerIPOverrides != nil {
		out.MaxConnectionsPerIPOverrides = make(map[netip.Addr]int, len(s.MaxConnectionsPerIPOverrides))
		for k, v := range s.MaxConnectionsPerIPOverrides {
			out.MaxConnectionsPerIPOverrides[k] = part(v)
		}
	}
	if s.IPConnectionRates != nil {
		out.IPConnectionRates = make(map[netip.Prefix]int, len(s.IPConnectionRates))
		for k, v := range s.IPConnectionRates {
			out.IPConnectionRates[k] = part(v)
		}
	}
	out.Listeners = make([]ListenerSettings, len(s.Listeners))
	for i, l := range s.Listeners {
		l.MaxConnections = part(l.MaxConnections)
		l.MaxConnectionCreationRate = part(l.MaxConnectionCreationRate)
		out.Listeners[i] = l
	}
	return out
}
