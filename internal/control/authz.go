package control

import (
	"net/netip"
	"strings"
	"sync/atomic"

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
	// OpDescribe is DESCRIBE on CLUSTER: DescribeUserScramCredentials,
	// which lists who can log in. Kafka grants it separately from
	// DESCRIBE_CONFIGS; Admins grants it to the quota admins only.
	OpDescribe
)

func (o Operation) String() string {
	switch o {
	case OpDescribeConfigs:
		return "DESCRIBE_CONFIGS"
	case OpAlterConfigs:
		return "ALTER_CONFIGS"
	case OpDescribe:
		return "DESCRIBE"
	}
	return "UNKNOWN"
}

// Authorizer decides whether an initiator may perform an operation.
type Authorizer interface {
	Authorize(who Initiator, op Operation) bool
}

// Admins is Tollgate's authorizer for the control plane: the listed
// principals may do everything; every other authenticated principal may
// describe configs and quotas (DESCRIBE_CONFIGS), not users (DESCRIBE);
// ANONYMOUS may describe configs and quotas only with
// AllowAnonymousDescribe. A
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

// LiveAdmins is an Admins that can be replaced while requests are being
// authorized (a configuration reload): every holder of the same *LiveAdmins
// — the client quotas, the credentials, the broker configs and the admin
// HTTP port — sees a change at the same moment, and a request is decided
// by one version of the list, never a mix. The zero value is Admins{}.
type LiveAdmins struct {
	cur atomic.Pointer[Admins]
}

// NewLiveAdmins returns a LiveAdmins holding a.
func NewLiveAdmins(a Admins) *LiveAdmins {
	l := &LiveAdmins{}
	l.Set(a)
	return l
}

// Set replaces the administrators; requests authorized from now on use a.
func (l *LiveAdmins) Set(a Admins) {
	a.Principals = append([]string(nil), a.Principals...)
	l.cur.Store(&a)
}

// Get returns the administrators in force.
func (l *LiveAdmins) Get() Admins {
	if a := l.cur.Load(); a != nil {
		return *a
	}
	return Admins{}
}

// IsAdmin reports whether p is one of the administrators in force.
func (l *LiveAdmins) IsAdmin(p principal.Principal) bool { return l.Get().IsAdmin(p) }

// Authorize implements Authorizer with the administrators in force.
func (l *LiveAdmins) Authorize(who Initiator, op Operation) bool {
	return l.Get().Authorize(who, op)
}
