package auth

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/tollgate/tollgate/internal/principal"
)

// CIDRRule names the principal of unauthenticated connections from a
// source network.
type CIDRRule struct {
	CIDR      string `yaml:"cidr"`      // e.g. 10.1.0.0/16, 2001:db8::/32, or a single address
	Principal string `yaml:"principal"` // principal name (type User)
}

// CIDRMapper maps a connection's source address to a principal; the most
// specific (longest) matching prefix wins.
type CIDRMapper struct {
	entries []cidrEntry
}

type cidrEntry struct {
	prefix netip.Prefix
	name   string
}

// NewCIDRMapper validates rules: well-formed CIDRs (a bare address is a
// /32 or /128), non-empty principals, no prefix listed twice.
func NewCIDRMapper(rules []CIDRRule) (*CIDRMapper, error) {
	m := &CIDRMapper{}
	seen := map[netip.Prefix]bool{}
	for i, r := range rules {
		p, err := ParseCIDR(r.CIDR)
		if err != nil {
			return nil, fmt.Errorf("auth: cidr rule %d: %w", i, err)
		}
		if r.Principal == "" {
			return nil, fmt.Errorf("auth: cidr rule %d (%s): empty principal", i, r.CIDR)
		}
		if seen[p] {
			return nil, fmt.Errorf("auth: cidr rule %d: %s listed twice", i, p)
		}
		seen[p] = true
		m.entries = append(m.entries, cidrEntry{prefix: p, name: r.Principal})
	}
	slices.SortStableFunc(m.entries, func(a, b cidrEntry) int { return b.prefix.Bits() - a.prefix.Bits() })
	return m, nil
}

// ParseCIDR parses a CIDR range or a bare address (a /32 or /128), masked,
// with IPv4-mapped IPv6 ranges as IPv4.
func ParseCIDR(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Map returns the principal for a source address, if a rule covers it.
// IPv4-mapped IPv6 addresses match IPv4 rules.
func (m *CIDRMapper) Map(addr netip.Addr) (principal.Principal, bool) {
	if m == nil || !addr.IsValid() {
		return principal.Principal{}, false
	}
	addr = addr.Unmap().WithZone("")
	for _, e := range m.entries {
		if e.prefix.Contains(addr) {
			return principal.Principal{Type: "User", Name: e.name}, true
		}
	}
	return principal.Principal{}, false
}
