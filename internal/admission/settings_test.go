package admission

import (
	"errors"
	"maps"
	"net/netip"
	"strings"
	"testing"
)

func TestParseOverrides(t *testing.T) {
	resolver := func(host string) (netip.Addr, error) {
		if host == "broker.example" {
			return addr("192.0.2.10"), nil
		}
		return netip.Addr{}, errors.New("no such host")
	}
	tests := []struct {
		in      string
		resolve func(string) (netip.Addr, error)
		want    map[string]int
		wantErr string
	}{
		{in: "", want: map[string]int{}},
		{in: "   ", want: map[string]int{}},
		{in: "127.0.0.1:5", want: map[string]int{"127.0.0.1": 5}},
		{in: "127.0.0.1:5,10.0.0.1:0", want: map[string]int{"127.0.0.1": 5, "10.0.0.1": 0}},
		{in: " 127.0.0.1 : 5 , 10.0.0.1:7 ", want: map[string]int{"127.0.0.1": 5, "10.0.0.1": 7}},
		{in: "::1:5", want: map[string]int{"::1": 5}}, // split at the last colon
		{in: "[2001:db8::1]:9", want: map[string]int{"2001:db8::1": 9}},
		{in: "::ffff:10.0.0.1:3", want: map[string]int{"10.0.0.1": 3}},     // mapped = the IPv4 client
		{in: "10.0.0.1:1,10.0.0.1:2", want: map[string]int{"10.0.0.1": 2}}, // later duplicate wins
		{in: "broker.example:4", resolve: resolver, want: map[string]int{"192.0.2.10": 4}},
		{in: "broker.example:4", wantErr: "host names need a resolver"},
		{in: "nowhere.example:4", resolve: resolver, wantErr: "no such host"},
		{in: "127.0.0.1", wantErr: "not host:count"},
		{in: "127.0.0.1:", wantErr: "not a number"},
		{in: "127.0.0.1:x", wantErr: "not a number"},
		{in: "127.0.0.1:-1", wantErr: "at least 0"},
		{in: "127.0.0.1:2147483648", wantErr: "not a number"},
		{in: ":5", wantErr: "no host"},
		{in: "127.0.0.1:5,,10.0.0.1:1", wantErr: "not host:count"},
	}
	for _, tc := range tests {
		got, err := ParseOverrides(tc.in, tc.resolve)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseOverrides(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseOverrides(%q): %v", tc.in, err)
			continue
		}
		want := make(map[netip.Addr]int)
		for k, v := range tc.want {
			want[addr(k)] = v
		}
		if !maps.Equal(got, want) {
			t.Errorf("ParseOverrides(%q) = %v, want %v", tc.in, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Settings)
		wantErr []string // substrings; nil means valid
	}{
		{"defaults", func(*Settings) {}, nil},
		{"zero limits are valid", func(s *Settings) {
			s.MaxConnections, s.MaxConnectionCreationRate, s.DefaultIPConnectionRate = 0, 0, 0
		}, nil},
		{"zero Settings", func(s *Settings) { *s = Settings{} }, []string{
			"Invalid value 0 for configuration quota.window.num: Value must be at least 1",
			"Invalid value 0 for configuration quota.window.size.seconds: Value must be at least 1",
			"max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.",
		}},
		{"negative gateway limits", func(s *Settings) { s.MaxConnections, s.MaxConnectionCreationRate = -1, -5 }, []string{
			"Invalid value -1 for configuration max.connections: Value must be at least 0",
			"Invalid value -5 for configuration max.connection.creation.rate: Value must be at least 0",
		}},
		{"too large", func(s *Settings) { s.MaxConnectionsPerIP = 1 << 31 }, []string{
			"Invalid value 2147483648 for configuration max.connections.per.ip: Not a number of type INT",
		}},
		{"per-ip zero with overrides", func(s *Settings) {
			s.MaxConnectionsPerIP = 0
			s.MaxConnectionsPerIPOverrides = map[netip.Addr]int{addr("10.0.0.1"): 5}
		}, nil},
		{"negative override", func(s *Settings) {
			s.MaxConnectionsPerIPOverrides = map[netip.Addr]int{addr("10.0.0.1"): -2}
		}, []string{"max.connections.per.ip.overrides[10.0.0.1]: Value must be at least 0"}},
		{"mapped override", func(s *Settings) {
			s.MaxConnectionsPerIPOverrides = map[netip.Addr]int{addr("::ffff:10.0.0.1"): 2}
		}, []string{"unmapped (10.0.0.1)"}},
		{"listener limits", func(s *Settings) {
			s.Listeners[0].MaxConnections = -1
			s.Listeners[1].MaxConnectionCreationRate = -3
		}, []string{
			"listener.name.external.max.connections: Invalid max.connections -1",
			"listener.name.admin.max.connection.creation.rate: Invalid max.connection.creation.rate -3",
		}},
		{"duplicate listener", func(s *Settings) { s.Listeners = append(s.Listeners, ListenerSettings{Name: "external"}) }, []string{`listener "external" declared twice`}},
		{"empty listener name", func(s *Settings) { s.Listeners = append(s.Listeners, ListenerSettings{}) }, []string{"empty name"}},
		{"ip rates", func(s *Settings) {
			s.DefaultIPConnectionRate = -1
			s.IPConnectionRates = map[netip.Prefix]int{
				netip.MustParsePrefix("10.0.0.1/8"):  5,
				netip.MustParsePrefix("10.1.0.0/16"): -4,
			}
		}, []string{
			"connection_creation_rate for ip entity <default> must not be negative, got -1",
			"ip entity 10.0.0.1/8 has host bits set; did you mean 10.0.0.0/8?",
			"connection_creation_rate for ip entity 10.1.0.0/16 must not be negative, got -4",
		}},
		{"same range twice", func(s *Settings) {
			s.IPConnectionRates = map[netip.Prefix]int{
				netip.MustParsePrefix("10.0.0.0/8"):          5,
				netip.MustParsePrefix("::ffff:10.0.0.0/104"): 6,
			}
		}, []string{"name the same range"}},
		{"negative TopIPs", func(s *Settings) { s.TopIPs = -1 }, []string{"TopIPs must not be negative"}},
	}
	for _, tc := range tests {
		s := settings(tc.mod)
		err := s.Validate()
		if tc.wantErr == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: valid, want errors %q", tc.name, tc.wantErr)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
		if _, nerr := New(s, base); nerr == nil {
			t.Errorf("%s: New accepted invalid settings", tc.name)
		}
	}
}

func TestSettingsSet(t *testing.T) {
	tests := []struct {
		key, value string
		check      func(Settings) bool
		wantErr    string
	}{
		{key: "max.connections", value: "800", check: func(s Settings) bool { return s.MaxConnections == 800 }},
		{key: "max.connection.creation.rate", value: " 25 ", check: func(s Settings) bool { return s.MaxConnectionCreationRate == 25 }},
		{key: "max.connections.per.ip", value: "17", check: func(s Settings) bool { return s.MaxConnectionsPerIP == 17 }},
		{key: "quota.window.num", value: "2", check: func(s Settings) bool { return s.QuotaWindowNum == 2 }},
		{key: "quota.window.size.seconds", value: "3", check: func(s Settings) bool { return s.QuotaWindowSizeSeconds == 3 }},
		{key: "max.connections.per.ip.overrides", value: "10.0.0.1:3,::1:4", check: func(s Settings) bool {
			return len(s.MaxConnectionsPerIPOverrides) == 2 && s.MaxConnectionsPerIPOverrides[addr("::1")] == 4
		}},
		{key: "listener.name.external.max.connections", value: "200", check: func(s Settings) bool { return s.Listeners[0].MaxConnections == 200 }},
		{key: "listener.name.REPLICATION.max.connection.creation.rate", value: "30", check: func(s Settings) bool {
			return s.Listeners[2].MaxConnectionCreationRate == 30
		}},
		{key: "listener.name.internal.max.connections", value: "1", wantErr: `unknown listener "internal"`},
		{key: "listener.name.external.num.network.threads", value: "1", wantErr: "unknown connection-quota setting"},
		{key: "max.connections", value: "lots", wantErr: "Invalid value lots for configuration max.connections: Not a number of type INT"},
		{key: "max.connections", value: "2147483648", wantErr: "Not a number of type INT"},
		{key: "producer_byte_rate", value: "1", wantErr: "unknown connection-quota setting"},
		{key: "max.connections.per.ip.overrides", value: "host:1", wantErr: "resolver"},
	}
	for _, tc := range tests {
		s := settings(nil)
		err := s.Set(tc.key, tc.value)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(%s, %s) error %v, want %q", tc.key, tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(s) {
			t.Errorf("Set(%s, %s): err %v, settings %+v", tc.key, tc.value, err, s)
		}
	}
}

// Per-IP counters: Space-Saving keeps the K heaviest, a newcomer inherits the
// evicted count as its overcount.
func TestTopIPs(t *testing.T) {
	var top topIPs
	top.resize(2)
	a, b, c := addr("10.0.0.1"), addr("10.0.0.2"), addr("10.0.0.3")
	for range 3 {
		top.add(a, true)
	}
	top.add(b, false)
	top.add(b, true)
	top.add(c, false) // evicts b (2 events)
	got := top.snapshot()
	want := []IPStats{
		{Addr: a, Events: 3, Parked: 3},
		{Addr: c, Events: 3, Overcount: 2, Rejected: 1},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("snapshot %+v, want %+v", got, want)
	}
	top.resize(1)
	if got := top.snapshot(); len(got) != 1 || got[0].Addr != a {
		t.Fatalf("after shrinking: %+v", got)
	}
	top.resize(0)
	top.add(b, true)
	if got := top.snapshot(); len(got) != 0 {
		t.Fatalf("K=0 keeps %+v", got)
	}

	// Cardinality stays bounded under many distinct addresses, and a heavy
	// hitter survives.
	top.resize(8)
	for i := range 10000 {
		top.add(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), false)
		top.add(a, true)
	}
	got = top.snapshot()
	if len(got) != 8 || got[0].Addr != a || got[0].Parked != 10000 {
		t.Fatalf("heavy hitter lost or table unbounded: %d entries, first %+v", len(got), got[0])
	}
}
