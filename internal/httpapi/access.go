package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
)

// ListenerName is the listener name of the admin port in audit events and
// metrics.
const ListenerName = "admin-http"

// MechanismBearer and MechanismCertificate name how a failed login on the
// admin port tried to authenticate (audit events, metrics).
const (
	MechanismBearer      = "Bearer"
	MechanismCertificate = "SSL"
)

// The endpoints Access.OpenEndpoints may name.
const (
	EndpointMetrics = "/metrics"
	EndpointHealthz = "/healthz"
	EndpointReadyz  = "/readyz"
)

// DefaultOpenEndpoints answer without credentials unless configured
// otherwise: what load balancers and Prometheus need.
var DefaultOpenEndpoints = []string{EndpointMetrics, EndpointHealthz, EndpointReadyz}

// DefaultAllowedHosts are the host names accepted in the Host header unless
// configured otherwise. "localhost" is safe: DNS rebinding needs a name the
// attacker's DNS answers for, and a browser sends the name of the page's own
// origin, never "localhost" for a page from elsewhere.
var DefaultAllowedHosts = []string{"localhost"}

// Access is who may use the admin port and how they prove who they are.
//
// A request authenticates with "Authorization: Bearer <API key>" (checked
// against Keys, the source the Kafka listeners' SASL/PLAIN "token" logins
// use) or, on an HTTPS port that asks for one, a verified client
// certificate mapped by Certificates; a Bearer key wins over a certificate,
// as SASL does over TLS on a Kafka listener. No credentials: ANONYMOUS.
// Presented credentials that do not verify are refused (401) whatever the
// endpoint: they are never downgraded to ANONYMOUS.
//
// Authorization is the Kafka API's, through the same Authorizer: reads
// (buckets, resolve, connections, audit, the API-key list) need
// DESCRIBE_CONFIGS; creating and revoking API keys need ALTER_CONFIGS, which
// the APIKeyManager checks and audits. Open endpoints and the dashboard's
// static files need nothing. Before all of this, a request whose Host is
// neither an IP literal nor one of AllowedHosts is refused (421): that is
// what defeats DNS rebinding.
type Access struct {
	// Keys are the API keys Bearer tokens are checked against. nil: every
	// Bearer token is refused.
	Keys auth.APIKeys
	// Authz decides reads (and, in the APIKeyManager, changes). nil:
	// control.Admins{}: nobody changes anything, ANONYMOUS reads nothing.
	Authz control.Authorizer
	// Certificates maps a verified client certificate's subject to its
	// principal (ssl_principal_mapping_rules). nil: DEFAULT.
	Certificates *auth.Mapper
	// AllowedHosts are the names accepted in the Host header, compared
	// without case and trailing dot; IP literals are always accepted. nil:
	// DefaultAllowedHosts; empty: IP literals only.
	AllowedHosts []string
	// OpenEndpoints answer without credentials (any of EndpointMetrics,
	// EndpointHealthz, EndpointReadyz). nil: DefaultOpenEndpoints; empty:
	// they need the read right like the JSON API.
	OpenEndpoints []string
	// Audit records failed logins on this port, as the Kafka listeners'
	// are recorded. nil: not recorded. Anyone who reaches the port can
	// cause failed logins and denials at will: give it a Logger that
	// aggregates denials (audit.Config.AggregateInterval), as the gateway
	// does, so they cost a few events rather than one write each.
	Audit *audit.Logger
	// AuthFailed counts a failed login (tollgate_authentication_failures_total).
	AuthFailed func(remote netip.AddrPort, mechanism string, err error)
}

// guard applies Access to every request.
type guard struct {
	Access
}

func newGuard(a Access) *guard {
	if a.Authz == nil {
		a.Authz = control.Admins{}
	}
	if a.AllowedHosts == nil {
		a.AllowedHosts = DefaultAllowedHosts
	}
	if a.OpenEndpoints == nil {
		a.OpenEndpoints = DefaultOpenEndpoints
	}
	return &guard{Access: a}
}

type ctxKey struct{}

// initiatorOf is who sent r, as the guard authenticated it.
func initiatorOf(r *http.Request) control.Initiator {
	if who, ok := r.Context().Value(ctxKey{}).(control.Initiator); ok {
		return who
	}
	return control.Initiator{Principal: principal.AnonymousPrincipal, Listener: ListenerName}
}

// maxClientID bounds the User-Agent kept as the audit events' client id.
const maxClientID = 256

// baseInitiator is the request's source and client, without a principal.
func baseInitiator(r *http.Request) control.Initiator {
	who := control.Initiator{Listener: ListenerName}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		who.Source = ap
	}
	ua := r.UserAgent()
	if len(ua) > maxClientID {
		ua = ua[:maxClientID]
	}
	who.ClientID = ua
	return who
}

// wrap checks the Host, authenticates, and hands the request on with its
// initiator.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, g.AllowedHosts) {
			fail(w, http.StatusMisdirectedRequest, fmt.Sprintf(
				"Host %q is not a name of this admin port: use an IP address, or add the name to http.allowed_hosts", truncate(r.Host, 256)))
			return
		}
		who := baseInitiator(r)
		p, mech, err := g.authenticate(r)
		if err != nil {
			g.loginFailed(r.Context(), who, mech, err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate", error="invalid_token"`)
			fail(w, http.StatusUnauthorized, err.Error())
			return
		}
		who.Principal = p
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, who)))
	})
}

// Errors of authentication; the text is the client's answer.
var (
	errAuthHeader   = errors.New("the Authorization header must be \"Bearer <API key>\"")
	errAuthTwice    = errors.New("more than one Authorization header")
	errAPIKey       = errors.New("the API key is unknown, revoked or malformed")
	errCertMapping  = errors.New("the client certificate maps to no principal (http.ssl_principal_mapping_rules)")
	errCertMapEmpty = errors.New("the client certificate maps to an empty principal name")
)

// authenticate returns the request's principal: its Bearer API key's
// identity, else its verified client certificate's mapped subject, else
// ANONYMOUS. mech says what failed when err is not nil.
func (g *guard) authenticate(r *http.Request) (principal.Principal, string, error) {
	if hs := r.Header.Values("Authorization"); len(hs) > 0 {
		if len(hs) > 1 {
			return principal.Principal{}, MechanismBearer, errAuthTwice
		}
		tok, ok := BearerToken(hs[0])
		if !ok {
			return principal.Principal{}, MechanismBearer, errAuthHeader
		}
		p, ok := auth.VerifyAPIKey(g.Keys, tok)
		if !ok {
			return principal.Principal{}, MechanismBearer, errAPIKey
		}
		return p, MechanismBearer, nil
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		// Only a certificate the handshake verified gets here: the port
		// asks for one only with client_auth requested or required, which
		// verify against client_ca_file.
		p, err := g.Certificates.PrincipalFromTLS(*r.TLS)
		switch {
		case err != nil:
			return principal.Principal{}, MechanismCertificate, errCertMapping
		case p.Name == "":
			return principal.Principal{}, MechanismCertificate, errCertMapEmpty
		}
		return p, MechanismCertificate, nil
	}
	return principal.AnonymousPrincipal, "", nil
}

// loginFailed counts and audits a failed login. The audit log aggregates
// denials per source (audit.Config.AggregateInterval), so a flood of bad
// keys is a few events, not one fsync'd write per request.
func (g *guard) loginFailed(ctx context.Context, who control.Initiator, mech string, err error) {
	if g.AuthFailed != nil {
		g.AuthFailed(who.Source, mech, err)
	}
	if g.Audit == nil {
		return
	}
	ev := audit.Event{
		Action:       audit.ActionAuthenticate,
		Outcome:      audit.Denied,
		ErrorCode:    kerr.SaslAuthenticationFailed.Code,
		ErrorMessage: err.Error(),
		Initiator:    auditInitiator(who),
		Changes:      []audit.Change{{Key: "mechanism", New: audit.String(mech)}},
	}
	g.Audit.Record(ctx, ev)
}

func auditInitiator(who control.Initiator) audit.Initiator {
	a := audit.Initiator{ClientID: who.ClientID, Listener: who.Listener}
	if who.Principal.Name != "" {
		a.Principal = who.Principal.String()
	}
	if who.Source.IsValid() {
		a.Source = who.Source.String()
	}
	return a
}

// needAuth answers a request ANONYMOUS may not make: 401, so that a client
// knows to send a key (the dashboard then asks for one).
func needAuth(w http.ResponseWriter, what string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
	fail(w, http.StatusUnauthorized, "authentication required to "+what+
		": send Authorization: Bearer <API key> (or a client certificate)")
}

// read lets through principals that may read the gateway's state
// (DESCRIBE_CONFIGS, as DescribeClientQuotas).
func (g *guard) read(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := initiatorOf(r)
		if !g.Authz.Authorize(who, control.OpDescribeConfigs) {
			if who.Anonymous() {
				needAuth(w, "read this gateway's state")
			} else {
				fail(w, http.StatusForbidden, who.Principal.String()+" may not read this gateway's state")
			}
			return
		}
		next(w, r)
	})
}

// open serves an endpoint to anyone when it is one of OpenEndpoints, and
// to readers otherwise.
func (g *guard) open(endpoint string, next http.HandlerFunc) http.Handler {
	if slices.Contains(g.OpenEndpoints, endpoint) {
		return next
	}
	return g.read(next)
}

// change guards an endpoint that changes something. The APIKeyManager
// authorizes and audits (denials aggregated by the audit log); this adds
// what only HTTP needs: a browser request from another origin is refused
// (defence in depth — such a request already needs a CORS preflight, which
// this port never grants).
func (g *guard) change(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			fail(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		next(w, r)
	})
}

// sameOrigin reports whether an Origin header names host (the request's
// Host, port included).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}

// HostAllowed reports whether a Host header value may be served: an IP
// literal (IPv4, or IPv6 in brackets; with or without a port), or one of
// the allowed names (without case, a trailing dot and the port).
func HostAllowed(host string, allowed []string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		name = name[1 : len(name)-1]
	}
	if name == "" || strings.ContainsAny(name, "[]") {
		return false
	}
	if _, err := netip.ParseAddr(name); err == nil {
		// A bare IPv6 address without brackets is no Host a browser
		// sends, but it is an IP literal all the same.
		return true
	}
	if strings.HasPrefix(host, "[") || strings.ContainsAny(name, ":%") {
		return false // brackets hold IP literals only
	}
	name = strings.TrimSuffix(name, ".")
	for _, a := range allowed {
		if a != "" && strings.EqualFold(name, strings.TrimSuffix(a, ".")) {
			return true
		}
	}
	return false
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// value (RFC 6750 §2.1: the scheme without case, then a b64token).
func BearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" {
		return "", false
	}
	body := strings.TrimRight(tok, "=")
	if body == "" {
		return "", false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			return "", false
		}
	}
	return tok, true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
