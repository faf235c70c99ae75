package control

import (
	"net/netip"
	"strings"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/principal"
)

// Initiator is who sent an admin request.
type Initiator struct {
	Principal principal.Principal
	// ClientID is the request header's client id ("" for null).
	ClientID string
	Source   netip.AddrPort
	Listener string
}

// FromConn is the initiator of a request on connection c.
func FromConn(c *principal.ConnInfo, clientID string) Initiator {
	return Initiator{Principal: c.Principal, ClientID: clientID, Source: c.Remote, Listener: c.Listener}
}

// Anonymous reports whether the initiator is unauthenticated: Kafka's
// ANONYMOUS principal, or no principal at all.
func (i Initiator) Anonymous() bool {
	return i.Principal.Name == "" || i.Principal.Name == principal.Anonymous
}

func (i Initiator) audit() audit.Initiator {
	a := audit.Initiator{Principal: i.Principal.String(), ClientID: i.ClientID, Listener: i.Listener}
	if i.Source.IsValid() {
		a.Source = i.Source.String()
	}
	return a
}

// Operation is what an admin request asks to do, in Kafka's ACL terms (the
// resource is always the cluster).
type Operation uint8

// Operations.
const (
	// OpDescribeConfigs is DESCRIBE_CONFIGS on CLUSTER: DescribeClientQuotas.
	OpDescribeConfigs Operation = iota + 1
	// OpAlterConfigs is ALTER_CONFIGS on CLUSTER: AlterClientQuotas,
	// validate_only included.
	OpAlterConfigs
)

func (o Operation) String() string {
	switch o {
	case OpDescribeConfigs:
		return "DESCRIBE_CONFIGS"
	case OpAlterConfigs:
		return "ALTER_CONFIGS"
	}
	return "UNKNOWN"
}

// Authorizer decides whether an initiator may perform an operation.
type Authorizer interface {
	Authorize(who Initiator, op Operation) bool
}

// Admins is Tollgate's authorizer for the control plane: the listed
// principals may do everything; every other authenticated principal may
// describe; ANONYMOUS may describe only with AllowAnonymousDescribe. A
// principal is written "User:alice"; a bare "alice" means "User:alice".
// ANONYMOUS is an administrator only if listed explicitly
// ("User:ANONYMOUS"), e.g. on a PLAINTEXT-only test setup.
type Admins struct {
	Principals             []string
	AllowAnonymousDescribe bool
}

// IsAdmin reports whether p is one of the administrators.
func (a Admins) IsAdmin(p principal.Principal) bool {
	if p.Name == "" {
		return false
	}
	full := p.String()
	for _, s := range a.Principals {
		if s == full {
			return true
		}
		if !strings.Contains(s, ":") && s == p.Name && (p.Type == "" || p.Type == "User") {
			return true
		}
	}
	return false
}

// Authorize implements Authorizer.
func (a Admins) Authorize(who Initiator, op Operation) bool {
	if a.IsAdmin(who.Principal) {
		return true
	}
	if op == OpDescribeConfigs {
		return !who.Anonymous() || a.AllowAnonymousDescribe
	}
	return false
}
