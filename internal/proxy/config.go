package proxy

import (
	"net/netip"
	"slices"
	"strings"

	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/auth"
)

// ListenerConfig is one named listener: a bootstrap address clients are
// given, and a port per upstream broker on the same host.
type ListenerConfig struct {
	// Name is the listener's name in Kafka's style: PLAINTEXT, EXTERNAL...
	Name string `yaml:"name"`
	// Bootstrap is the host:port clients bootstrap from. Port 0 picks a
	// free port (tests).
	Bootstrap string `yaml:"bootstrap"`
	// AdvertisedHost is the host put in every broker address this listener
	// hands out. Defaults to the bootstrap host, or 127.0.0.1 when that is
	// a wildcard.
	AdvertisedHost string `yaml:"advertised_host"`
	// BrokerPortBase maps upstream node N to port BrokerPortBase+N, so the
	// mapping survives restarts. 0 gives each broker a free port instead.
	BrokerPortBase int `yaml:"broker_port_base"`
	// Exempt exempts the listener from max.connection.creation.rate and
	// max.connections, the role Kafka gives its inter-broker listener: an
	// operations listener that must stay reachable in a connection storm.
	Exempt bool `yaml:"exempt"`
	// ProxyProtocol makes the listener read a PROXY protocol header (v1 or
	// v2) first, so per-IP limits see the real client address behind a
	// load balancer.
	ProxyProtocol bool `yaml:"proxy_protocol"`
	// ProxyProtocolTrustedCIDRs are the load balancers whose PROXY header
	// is believed (addresses or CIDR ranges); a connection from any other
	// peer is closed. Required with proxy_protocol.
	ProxyProtocolTrustedCIDRs []string `yaml:"proxy_protocol_trusted_cidrs"`
	// PrincipalsByCIDR names the principal of unauthenticated connections
	// by source address (KIP-55's "custom principal builder, e.g. per IP
	// range"): the most specific matching range wins; connections no range
	// matches are ANONYMOUS.
	PrincipalsByCIDR []CIDRPrincipal `yaml:"principals_by_cidr"`
	// SecurityProtocol is Kafka's: PLAINTEXT (default), SSL,
	// SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string `yaml:"security_protocol"`
	// TLS is the listener's certificate (SSL and SASL_SSL).
	TLS auth.TLSConfig `yaml:"tls"`
	// SASL configures SASL_PLAINTEXT and SASL_SSL listeners.
	SASL SASLConfig `yaml:"sasl"`
	// SSLPrincipalMappingRules is Kafka's ssl.principal.mapping.rules: how
	// a verified client certificate's subject becomes the principal (SSL
	// listeners with client_auth).
	SSLPrincipalMappingRules string `yaml:"ssl_principal_mapping_rules"`
}

// CIDRPrincipal maps a source range (or a bare address) to a principal
// name.
type CIDRPrincipal = auth.CIDRRule

// Validate checks the listener on its own.
func (l *ListenerConfig) Validate() error {
	if l.Name == "" {
		return errors.New("listener: name is required")
	}
	host, port, err := net.SplitHostPort(l.Bootstrap)
	if err != nil {
		return fmt.Errorf("listener %s: bootstrap %q: %w", l.Name, l.Bootstrap, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("listener %s: bootstrap port %q is not a port number", l.Name, port)
	}
	_ = host
	if err := l.validateSecurity(); err != nil {
		return err
	}
	if _, err := auth.NewCIDRMapper(l.PrincipalsByCIDR); err != nil {
		return fmt.Errorf("listener %s: principals_by_cidr: %w", l.Name, err)
	}
	if l.ProxyProtocol && len(l.ProxyProtocolTrustedCIDRs) == 0 {
		return fmt.Errorf("listener %s: proxy_protocol needs proxy_protocol_trusted_cidrs, the addresses of the load balancers that send the header: without it anyone who reaches the port could claim any source address", l.Name)
	}
	if _, err := l.proxyTrusted(); err != nil {
		return err
	}
	if l.BrokerPortBase < 0 || l.BrokerPortBase > 65535 {
		return fmt.Errorf("listener %s: broker_port_base %d out of range 0-65535", l.Name, l.BrokerPortBase)
	}
	return nil
}

// proxyTrusted parses proxy_protocol_trusted_cidrs (a bare address is a
// /32 or /128).
func (l *ListenerConfig) proxyTrusted() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range l.ProxyProtocolTrustedCIDRs {
		p, err := auth.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("listener %s: proxy_protocol_trusted_cidrs: %w", l.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// advertisedHost is the host every broker address of the listener names.
func (l *ListenerConfig) advertisedHost() string {
	if l.AdvertisedHost != "" {
		return l.AdvertisedHost
	}
	host, _, _ := net.SplitHostPort(l.Bootstrap)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return host
}

// Config is what the data path needs, as values.
type Config struct {
	Listeners []ListenerConfig
	// Upstream is the bootstrap list of the real cluster.
	Upstream []string
	// MaxRequestSize is socket.request.max.bytes (default 104857600).
	MaxRequestSize int32
	// QueuedMaxRequestBytes bounds the request frames all sessions hold
	// together (socket.queued_max_request_bytes, Kafka's
	// queued.max.request.bytes; membudget.go). Default
	// DefaultQueuedMaxRequestBytes, or two frames of MaxRequestSize if
	// that is more; negative: no bound. At least MaxRequestSize + 4, so
	// that every frame allowed can fit.
	QueuedMaxRequestBytes int64
	// MaxInFlight bounds the requests one connection may have outstanding
	// upstream before the gateway stops reading it (default 256).
	MaxInFlight int
	// DialTimeout bounds each upstream dial (default 10s).
	DialTimeout time.Duration
	// MetadataRefresh is how often the broker set is re-read from
	// upstream (default 10s).
	MetadataRefresh time.Duration
	// MaxResponseSize bounds an upstream response read whole: a larger
	// one (any but a Fetch, which is streamed) closes its session instead
	// of being buffered (default 104857600).
	MaxResponseSize int32
	// SASLMaxReceiveSize bounds a client frame before its SASL login
	// completes, Kafka's sasl.server.max.receive.size (default 524288).
	SASLMaxReceiveSize int32
	// IdleTimeout closes a client connection that sends no request for
	// this long, Kafka's connections.max.idle.ms (default 10m; negative:
	// never).
	IdleTimeout time.Duration
	// HandshakeTimeout bounds a connection's TLS handshake, PROXY header
	// and SASL login, each from the moment the connection was accepted
	// (default 10s).
	HandshakeTimeout time.Duration
	// RequestTimeout is how long the upstream may take to answer a
	// forwarded request, beyond what the request itself lets the broker
	// wait (a Fetch's max_wait_ms, a Produce's timeout_ms): a broker that
	// stalls closes the session, as a client's request.timeout.ms would
	// (default 30s).
	RequestTimeout time.Duration
}

func (c *Config) setDefaults() {
	orDefault(&c.MaxRequestSize, 104857600)
	orDefault(&c.QueuedMaxRequestBytes, max(DefaultQueuedMaxRequestBytes, 2*(int64(c.MaxRequestSize)+4)))
	orDefault(&c.MaxInFlight, 256)
	orDefault(&c.DialTimeout, 10*time.Second)
	orDefault(&c.MetadataRefresh, 10*time.Second)
	orDefault(&c.MaxResponseSize, 104857600)
	orDefault(&c.SASLMaxReceiveSize, 524288)
	orDefault(&c.IdleTimeout, 10*time.Minute)
	orDefault(&c.HandshakeTimeout, 10*time.Second)
	orDefault(&c.RequestTimeout, 30*time.Second)
}

// orDefault sets *v to def if it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks the data path configuration.
func (c *Config) Validate() error {
	if len(c.Listeners) == 0 {
		return errors.New("at least one listener is required")
	}
	seen := map[string]bool{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if err := l.Validate(); err != nil {
			return err
		}
		if seen[l.Name] {
			return fmt.Errorf("listener %s is defined twice", l.Name)
		}
		seen[l.Name] = true
	}
	if len(c.Upstream) == 0 {
		return errors.New("upstream: at least one bootstrap address is required")
	}
	if c.MaxRequestSize < 0 {
		return fmt.Errorf("socket.request.max.bytes must be positive, got %d", c.MaxRequestSize)
	}
	if q := c.QueuedMaxRequestBytes; q > 0 && q < int64(c.MaxRequestSize)+4 {
		return fmt.Errorf("socket.queued_max_request_bytes %d is smaller than a frame of socket.request_max_bytes (%d + 4): such a frame could never be read", q, c.MaxRequestSize)
	}
	return nil
}

// Kafka's security protocols (listener security_protocol).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL modes of a SASL listener.
const (
	// SASLTerminate checks credentials at Tollgate (its own credential
	// store) and talks to upstream with one service identity.
	SASLTerminate = "terminate"
	// SASLPassthrough forwards the exchange to the upstream brokers, which
	// stay the authority; Tollgate reads the user name from the client's
	// first message and binds it once upstream says yes.
	SASLPassthrough = "passthrough"
)

// SASLConfig configures authentication on a SASL listener.
type SASLConfig struct {
	// Mode is terminate (default) or passthrough.
	Mode string `yaml:"mode"`
	// Mechanisms enabled (default PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
	Mechanisms []string `yaml:"mechanisms"`
	// FailedAuthenticationDelay is Kafka's
	// connection.failed.authentication.delay.ms (KIP-306): a failed login
	// is answered and closed after this long (default 100ms).
	FailedAuthenticationDelay time.Duration `yaml:"failed_authentication_delay"`
	// OAuthBearerSubClaimName is Kafka's sasl.oauthbearer.sub.claim.name:
	// the JWT claim a pass-through OAUTHBEARER login is accounted to
	// (default sub). A token without it is refused.
	OAuthBearerSubClaimName string `yaml:"oauthbearer_sub_claim_name"`
}

// Protocol is the listener's security protocol, PLAINTEXT by default.
func (l *ListenerConfig) Protocol() string {
	if l.SecurityProtocol == "" {
		return ProtocolPlaintext
	}
	return strings.ToUpper(l.SecurityProtocol)
}

// UsesTLS reports whether clients speak TLS (SSL, SASL_SSL).
func (l *ListenerConfig) UsesTLS() bool {
	p := l.Protocol()
	return p == ProtocolSSL || p == ProtocolSASLSSL
}

// UsesSASL reports whether clients log in with SASL.
func (l *ListenerConfig) UsesSASL() bool {
	p := l.Protocol()
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

// SASLMode is terminate (default) or passthrough.
func (l *ListenerConfig) SASLMode() string {
	if l.SASL.Mode == "" {
		return SASLTerminate
	}
	return l.SASL.Mode
}

// TerminatesSASL reports whether the listener checks SASL logins itself.
func (l *ListenerConfig) TerminatesSASL() bool {
	return l.UsesSASL() && l.SASLMode() == SASLTerminate
}

// Mechanisms are the SASL mechanisms enabled on the listener.
func (l *ListenerConfig) Mechanisms() []string {
	if len(l.SASL.Mechanisms) == 0 {
		return auth.Mechanisms()
	}
	return l.SASL.Mechanisms
}

// FailedAuthDelay is how long a failed login waits before its answer.
func (l *ListenerConfig) FailedAuthDelay() time.Duration {
	if l.SASL.FailedAuthenticationDelay == 0 {
		return 100 * time.Millisecond
	}
	return max(l.SASL.FailedAuthenticationDelay, 0)
}

func (l *ListenerConfig) validateSecurity() error {
	switch l.Protocol() {
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		return fmt.Errorf("listener %s: security_protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", l.Name, l.SecurityProtocol)
	}
	if l.UsesTLS() {
		if err := l.TLS.Validate(); err != nil {
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
	}
	if l.UsesSASL() {
		switch l.SASLMode() {
		case SASLTerminate, SASLPassthrough:
		default:
			return fmt.Errorf("listener %s: sasl.mode %q: want terminate or passthrough", l.Name, l.SASL.Mode)
		}
		for _, m := range l.Mechanisms() {
			known := slices.Contains(auth.Mechanisms(), m) || (m == auth.MechanismOAuthBearer && l.SASLMode() == SASLPassthrough)
			if !known {
				return fmt.Errorf("listener %s: sasl mechanism %q is not supported in %s mode", l.Name, m, l.SASLMode())
			}
		}
	}
	if l.SSLPrincipalMappingRules != "" {
		if _, err := auth.ParseMappingRules(l.SSLPrincipalMappingRules); err != nil {
			return fmt.Errorf("listener %s: ssl_principal_mapping_rules: %w", l.Name, err)
		}
	}
	return nil
}
