package auth

import (
	"net/netip"
	"testing"
)

func TestCIDRMapper(t *testing.T) {
	m, err := NewCIDRMapper([]CIDRRule{
		{CIDR: "10.0.0.0/8", Principal: "internal"},
		{CIDR: "10.1.0.0/16", Principal: "team-1"},
		{CIDR: "10.1.2.3", Principal: "one-host"},
		{CIDR: "2001:db8::/32", Principal: "v6"},
		{CIDR: "::ffff:192.168.0.0/112", Principal: "mapped"},
		{CIDR: "172.16.5.9/12", Principal: "masked"}, // host bits are ignored
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ addr, want string }{
		{"10.9.9.9", "internal"},
		{"10.1.9.9", "team-1"},
		{"10.1.2.3", "one-host"},
		{"::ffff:10.1.2.3", "one-host"},
		{"2001:db8::1", "v6"},
		{"2001:db8::1%eth0", "v6"},
		{"192.168.7.7", "mapped"},
		{"172.31.0.1", "masked"},
		{"11.0.0.1", ""},
		{"2001:db9::1", ""},
	} {
		p, ok := m.Map(netip.MustParseAddr(tt.addr))
		if tt.want == "" {
			if ok {
				t.Errorf("%s mapped to %v", tt.addr, p)
			}
			continue
		}
		if !ok || p.Name != tt.want || p.Type != "User" {
			t.Errorf("%s = %v %v, want %s", tt.addr, p, ok, tt.want)
		}
	}
	if _, ok := m.Map(netip.Addr{}); ok {
		t.Error("invalid address mapped")
	}
	var nilMapper *CIDRMapper
	if _, ok := nilMapper.Map(netip.MustParseAddr("10.0.0.1")); ok {
		t.Error("nil mapper mapped")
	}
	for _, bad := range [][]CIDRRule{
		{{CIDR: "10.0.0.0/33", Principal: "x"}},
		{{CIDR: "nonsense", Principal: "x"}},
		{{CIDR: "10.0.0.0/8", Principal: ""}},
		{{CIDR: "10.0.0.0/8", Principal: "a"}, {CIDR: "10.0.0.1/8", Principal: "b"}},
	} {
		if _, err := NewCIDRMapper(bad); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}
