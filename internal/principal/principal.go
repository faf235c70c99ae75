// Package principal is the vocabulary the data path, quotas, admission and
// the control plane share about who is connected: the authenticated
// principal and the facts of a client connection. It imports nothing from
// the project.
package principal

import (
	"net/netip"
	"strconv"
	"strings"
)

// Anonymous is Kafka's principal name for unauthenticated connections.
const Anonymous = "ANONYMOUS"

// Principal is an authenticated identity. Kafka quotas use only Name (the
// principal type is ignored, as in Kafka).
type Principal struct {
	Type string // "User"
	Name string
}

// AnonymousPrincipal is the principal of a PLAINTEXT connection.
var AnonymousPrincipal = Principal{Type: "User", Name: Anonymous}

func (p Principal) String() string {
	if p.Type == "" {
		return "User:" + p.Name
	}
	return p.Type + ":" + p.Name
}

// ConnInfo describes one client connection. It is written before the
// connection's goroutines start and read-only afterwards, except where a
// field says otherwise.
type ConnInfo struct {
	ID       uint64
	Listener string
	Remote   netip.AddrPort
	Local    string
	NodeID   int32 // upstream node this connection reaches; -1 for bootstrap
	TLS      bool
	// Principal is set at accept time for PLAINTEXT and after a successful
	// authentication otherwise.
	Principal Principal
	// Credential names what a login terminated at Tollgate used — "user:"
	// and the SCRAM user, or "apikey:" and the key's id — so that its
	// connections can be closed when the credential is withdrawn; "" for
	// other connections. Set with Principal.
	Credential string
	// SoftwareName and SoftwareVersion are what the client's ApiVersions
	// (v3+, KIP-511) named, once Kafka would take them; "" before.
	SoftwareName, SoftwareVersion string
}

// HostAddress is a client address as Kafka names it (Java's
// InetAddress.getHostAddress): an IPv4 address (an IPv4-mapped IPv6 one is
// IPv4 to Java, hence the Unmap) dotted, as Addr.String gives it; an IPv6
// one in Java's full form — eight groups of hex without leading zeros,
// never "::" — and its zone after "%", where Addr.String would shorten it
// ("2001:db8::1" is "2001:db8:0:0:0:0:0:1").
func HostAddress(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	b := a.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	if z := a.Zone(); z != "" {
		sb.WriteString("%" + z)
	}
	return sb.String()
}
