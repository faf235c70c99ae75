package admission

import (
	"net/netip"
	"slices"
)

// ipRates resolves the connection_creation_rate of an address: exact entity,
// else the most specific range containing it, else the default.
//
// Ranges are grouped by prefix length so a lookup is at most one map probe per
// distinct length in use (longest first), with no allocation: netip.Prefix is a
// comparable value and addr.Prefix(bits) builds the probe key in place.
type ipRates struct {
	def   int
	exact map[netip.Addr]int
	v4    []prefixLevel // longest prefix first
	v6    []prefixLevel
}

type prefixLevel struct {
	bits   int
	ranges map[netip.Prefix]int
}

// newIPRates builds the table from validated settings; keys are normalized
// here so a ::ffff:10.0.0.0/104 entity matches IPv4 peers.
func newIPRates(def int, entities map[netip.Prefix]int) ipRates {
	t := ipRates{def: def, exact: make(map[netip.Addr]int)}
	levels := map[bool]map[int]map[netip.Prefix]int{true: {}, false: {}}
	for p, v := range entities {
		p = normalizePrefix(p)
		a := p.Addr()
		if p.Bits() == a.BitLen() {
			t.exact[a] = v
			continue
		}
		byBits := levels[a.Is4()]
		if byBits[p.Bits()] == nil {
			byBits[p.Bits()] = make(map[netip.Prefix]int)
		}
		byBits[p.Bits()][p] = v
	}
	build := func(byBits map[int]map[netip.Prefix]int) []prefixLevel {
		out := make([]prefixLevel, 0, len(byBits))
		for bits, m := range byBits {
			out = append(out, prefixLevel{bits: bits, ranges: m})
		}
		slices.SortFunc(out, func(a, b prefixLevel) int { return b.bits - a.bits })
		return out
	}
	t.v4 = build(levels[true])
	t.v6 = build(levels[false])
	return t
}

// lookup expects a normalized (unmapped, zone-less) address.
func (t *ipRates) lookup(a netip.Addr) int {
	if v, ok := t.exact[a]; ok {
		return v
	}
	levels := t.v6
	if a.Is4() {
		levels = t.v4
	}
	for _, l := range levels {
		p, err := a.Prefix(l.bits)
		if err != nil {
			continue
		}
		if v, ok := l.ranges[p]; ok {
			return v
		}
	}
	return t.def
}
