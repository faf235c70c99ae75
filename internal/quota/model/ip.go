package model

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseIPEntity turns the name of an ip quota entity into a key of
// admission's per-IP tables: an address becomes its single-address prefix
// (/32 or /128), a CIDR range must have no host bits set. IPv4-mapped IPv6
// forms are converted to IPv4, because connections are matched by their
// unmapped address. The default entity has no name.
func ParseIPEntity(name string) (netip.Prefix, error) {
	name = strings.TrimSpace(name)
	if strings.Contains(name, "/") {
		p, err := netip.ParsePrefix(name)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s is not a valid IP or CIDR range", name)
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("%s has host bits set; did you mean %s?", name, p.Masked())
		}
		return NormalizePrefix(p), nil
	}
	a, err := netip.ParseAddr(name)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%s is not a valid IP or CIDR range", name)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// NormalizePrefix maps ::ffff:a.b.c.d/n (n ≥ 96) to a.b.c.d/(n−96).
func NormalizePrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}
