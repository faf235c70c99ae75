package kafkaapi

import (
	"net/netip"
	"strconv"
	"testing"
)

func TestClientHostFormat(t *testing.T) {
	for _, c := range []struct{ upstream, client, want string }{
		{"/10.0.0.9", "192.168.1.5:53000", "/192.168.1.5"},                // Kafka: InetAddress.toString()
		{"/10.0.0.9", "[::1]:53000", "/0:0:0:0:0:0:0:1"},                  // IPv6 uncompressed, as Java
		{"/10.0.0.9", "[2001:db8::ab:1]:1", "/2001:db8:0:0:0:0:ab:1"},     //
		{"/10.0.0.9", "[::ffff:10.1.2.3]:1", "/10.1.2.3"},                 // mapped IPv4
		{"127.0.0.1:41000", "127.0.0.2:53000", "127.0.0.2:53000"},         // kfake and others: host:port
		{"127.0.0.1:41000", "[2001:db8::1]:53000", "[2001:db8::1]:53000"}, //
	} {
		if got := clientHost(c.upstream, netip.MustParseAddrPort(c.client)); got != c.want {
			t.Errorf("clientHost(%q, %s) = %q, want %q", c.upstream, c.client, got, c.want)
		}
	}
}

// The member map is bounded: two generations of memberGen entries; an
// entry found in the old generation moves forward.
func TestMemberHostsBounded(t *testing.T) {
	var m memberHosts
	a := netip.MustParseAddrPort("10.0.0.1:1")
	m.learn("keep", a)
	for i := 0; i < 3*memberGen; i++ {
		m.learn("m"+strconv.Itoa(i), a)
		if i%(memberGen/2) == 0 {
			if _, ok := m.lookup("keep"); !ok {
				t.Fatalf("a member looked up regularly was forgotten after %d others", i)
			}
		}
	}
	if n := len(m.cur) + len(m.old); n > 2*memberGen {
		t.Fatalf("%d members kept, want at most %d", n, 2*memberGen)
	}
	if _, ok := m.lookup("m0"); ok {
		t.Fatal("the oldest member was never forgotten")
	}
	m.learn("", a) // ignored
	if _, ok := m.lookup(""); ok {
		t.Fatal("an empty member id was recorded")
	}
}
