package admission

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Unlimited is Kafka's "no limit" for every connection quota: Int.MaxValue.
// It is a real value, not a flag: Kafka compares against it (an ip rate equal
// to it disables the ip sensor) and so does this package.
const Unlimited = math.MaxInt32

// DefaultTopIPs is the number of per-IP counters kept for metrics when
// Settings.TopIPs is 0.
const DefaultTopIPs = 64

// Settings are the connection-quota settings of a gateway. Field comments give
// Kafka's names. Start from DefaultSettings: for most fields 0 is a meaningful
// (and drastic) limit, so the zero Settings is not "no limits" (and fails
// Validate because it has no quota window).
type Settings struct {
	// MaxConnectionCreationRate is max.connection.creation.rate: new
	// connections per second over all listeners except protected (exempt) ones.
	MaxConnectionCreationRate int
	// MaxConnections is max.connections: connections over all listeners.
	// Protected listeners may exceed it; the others then shed LRU connections.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip, for every listener.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides, parsed
	// (see ParseOverrides). Keys are unmapped, zone-less addresses.
	MaxConnectionsPerIPOverrides map[netip.Addr]int

	// QuotaWindowNum and QuotaWindowSizeSeconds are quota.window.num and
	// quota.window.size.seconds. They shape every connection-rate sensor, and
	// the window size also caps every connection-rate throttle. Kafka treats
	// them as static; Update accepts a change but restarts all rate history.
	QuotaWindowNum         int
	QuotaWindowSizeSeconds int

	// Listeners are the gateway's listeners. Each must be declared here before
	// Admit accepts its name.
	Listeners []ListenerSettings

	// DefaultIPConnectionRate is connection_creation_rate on the default ip
	// entity ({ip: null}); Unlimited when that entity has no such quota.
	DefaultIPConnectionRate int
	// IPConnectionRates is connection_creation_rate on named ip entities.
	// Beyond Kafka, a key may be a range: the rate of an address is that of
	// its exact entity (a /32 or /128), else of the most specific range that
	// contains it, else the default. A range gives each address in it its own
	// rate; it is not an aggregate for the range. Build keys with
	// ParseIPEntity.
	IPConnectionRates map[netip.Prefix]int

	// TopIPs bounds the per-IP throttle/reject counters kept for metrics
	// (Space-Saving top-K, see IPStats); 0 means DefaultTopIPs, negative is
	// invalid. Not a Kafka setting.
	TopIPs int
}

// ListenerSettings are one listener's limits, Kafka's
// listener.name.<l>.max.connections and
// listener.name.<l>.max.connection.creation.rate. For both, 0 means "not set"
// (Unlimited): Kafka rejects an explicit 0 for these two, so no value is lost.
type ListenerSettings struct {
	Name string
	// Exempt marks the listener the way Kafka treats the inter-broker
	// listener: it is not subject to, and does not record into,
	// max.connection.creation.rate, and its connections may exceed
	// max.connections without being shed. As in Kafka the exemption only
	// takes effect while more than one listener is declared.
	Exempt                    bool
	MaxConnections            int
	MaxConnectionCreationRate int
}

// DefaultSettings returns Kafka's defaults: every limit Unlimited,
// quota.window.num 11, quota.window.size.seconds 1.
func DefaultSettings() Settings {
	return Settings{
		MaxConnectionCreationRate: Unlimited,
		MaxConnections:            Unlimited,
		MaxConnectionsPerIP:       Unlimited,
		QuotaWindowNum:            11,
		QuotaWindowSizeSeconds:    1,
		DefaultIPConnectionRate:   Unlimited,
	}
}

// Validate reports every invalid value at once (errors.Join). Messages follow
// Kafka's where Kafka has one.
func (s *Settings) Validate() error {
	errs := s.countErrors()
	errs = append(errs, s.listenerErrors()...)
	errs = append(errs, s.ipRateErrors()...)
	if s.TopIPs < 0 {
		errs = append(errs, fmt.Errorf("TopIPs must not be negative, got %d", s.TopIPs))
	}
	return errors.Join(errs...)
}

// countErrors checks the gateway-wide settings and the per-ip overrides.
func (s *Settings) countErrors() []error {
	var errs []error
	atLeast := func(name string, v, lo int) {
		switch {
		case v < lo:
			errs = append(errs, fmt.Errorf("Invalid value %d for configuration %s: Value must be at least %d", v, name, lo))
		case v > math.MaxInt32:
			errs = append(errs, fmt.Errorf("Invalid value %d for configuration %s: Not a number of type INT", v, name))
		}
	}
	atLeast("max.connection.creation.rate", s.MaxConnectionCreationRate, 0)
	atLeast("max.connections", s.MaxConnections, 0)
	atLeast("max.connections.per.ip", s.MaxConnectionsPerIP, 0)
	atLeast("quota.window.num", s.QuotaWindowNum, 1)
	atLeast("quota.window.size.seconds", s.QuotaWindowSizeSeconds, 1)
	if s.MaxConnectionsPerIP == 0 && len(s.MaxConnectionsPerIPOverrides) == 0 {
		errs = append(errs, errors.New("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."))
	}
	for a, n := range s.MaxConnectionsPerIPOverrides {
		if !a.IsValid() {
			errs = append(errs, errors.New("max.connections.per.ip.overrides: invalid (zero) address"))
			continue
		}
		if a != normalizeAddr(a) {
			errs = append(errs, fmt.Errorf("max.connections.per.ip.overrides: %s must be given without zone and unmapped (%s)", a, normalizeAddr(a)))
		}
		atLeast("max.connections.per.ip.overrides["+a.String()+"]", n, 0)
	}
	return errs
}

// listenerErrors checks each listener's settings, and that no two
// listeners share a name.
func (s *Settings) listenerErrors() []error {
	var errs []error
	seen := make(map[string]bool, len(s.Listeners))
	for _, l := range s.Listeners {
		if l.Name == "" {
			errs = append(errs, errors.New("listener with an empty name"))
			continue
		}
		key := strings.ToLower(l.Name) // Kafka's listener.name.<l>. prefix is lower-cased
		if seen[key] {
			errs = append(errs, fmt.Errorf("listener %q declared twice", l.Name))
		}
		seen[key] = true
		if l.MaxConnections < 0 || l.MaxConnections > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("listener.name.%s.max.connections: Invalid max.connections %d", key, l.MaxConnections))
		}
		if l.MaxConnectionCreationRate < 0 || l.MaxConnectionCreationRate > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("listener.name.%s.max.connection.creation.rate: Invalid max.connection.creation.rate %d", key, l.MaxConnectionCreationRate))
		}
	}
	return errs
}

// ipRateErrors checks the default ip rate and each ip entity's: its rate,
// and that it is one masked range no other entity names.
func (s *Settings) ipRateErrors() []error {
	var errs []error
	// ConnectionQuotas accepts an ip rate of 0 (every connection is parked for
	// the full cap); only the KRaft admin API insists on > 0, so 0 passes here.
	ipRate := func(entity string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("connection_creation_rate for ip entity %s must not be negative, got %d", entity, v))
		} else if v > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("Proposed value for connection_creation_rate (ip entity %s) is too large for an INT.", entity))
		}
	}
	ipRate("<default>", s.DefaultIPConnectionRate)
	normalized := make(map[netip.Prefix]netip.Prefix, len(s.IPConnectionRates))
	for p, v := range s.IPConnectionRates {
		ipRate(p.String(), v)
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("ip entity %s is not a valid address or range", p))
			continue
		}
		if p.Addr().Zone() != "" {
			errs = append(errs, fmt.Errorf("ip entity %s must not carry a zone", p))
			continue
		}
		if p != p.Masked() {
			errs = append(errs, fmt.Errorf("ip entity %s has host bits set; did you mean %s?", p, p.Masked()))
			continue
		}
		n := normalizePrefix(p)
		if other, dup := normalized[n]; dup {
			errs = append(errs, fmt.Errorf("ip entities %s and %s name the same range", other, p))
		}
		normalized[n] = p
	}
	return errs
}

// Set applies one Kafka-named setting given as a string, the way it appears in
// a properties file or a dynamic broker config:
// max.connection.creation.rate, max.connections, max.connections.per.ip,
// max.connections.per.ip.overrides, quota.window.num,
// quota.window.size.seconds, listener.name.<l>.max.connections and
// listener.name.<l>.max.connection.creation.rate. The listener must already be
// in s.Listeners (matched case-insensitively, as Kafka lower-cases the
// prefix). Set checks syntax only; call Validate for ranges. Host names in
// overrides are rejected; use ParseOverrides with a resolver for those.
func (s *Settings) Set(key, value string) error {
	value = strings.TrimSpace(value)
	if rest, ok := strings.CutPrefix(key, "listener.name."); ok {
		for _, field := range []string{".max.connections", ".max.connection.creation.rate"} {
			name, ok := strings.CutSuffix(rest, field)
			if !ok || name == "" {
				continue
			}
			i := s.listenerIndex(name)
			if i < 0 {
				return fmt.Errorf("%s: unknown listener %q", key, name)
			}
			n, err := parseInt(key, value)
			if err != nil {
				return err
			}
			if field == ".max.connections" {
				s.Listeners[i].MaxConnections = n
			} else {
				s.Listeners[i].MaxConnectionCreationRate = n
			}
			return nil
		}
		return fmt.Errorf("unknown connection-quota setting %q", key)
	}
	var dst *int
	switch key {
	case "max.connection.creation.rate":
		dst = &s.MaxConnectionCreationRate
	case "max.connections":
		dst = &s.MaxConnections
	case "max.connections.per.ip":
		dst = &s.MaxConnectionsPerIP
	case "quota.window.num":
		dst = &s.QuotaWindowNum
	case "quota.window.size.seconds":
		dst = &s.QuotaWindowSizeSeconds
	case "max.connections.per.ip.overrides":
		m, err := ParseOverrides(value, nil)
		if err != nil {
			return err
		}
		s.MaxConnectionsPerIPOverrides = m
		return nil
	default:
		return fmt.Errorf("unknown connection-quota setting %q", key)
	}
	n, err := parseInt(key, value)
	if err != nil {
		return err
	}
	*dst = n
	return nil
}

func (s *Settings) listenerIndex(name string) int {
	for i, l := range s.Listeners {
		if strings.EqualFold(l.Name, name) {
			return i
		}
	}
	return -1
}

func parseInt(key, value string) (int, error) {
	n, err := strconv.ParseInt(value, 10, 32) // Kafka INT
	if err != nil {
		return 0, fmt.Errorf("Invalid value %s for configuration %s: Not a number of type INT", value, key)
	}
	return int(n), nil
}

// ParseOverrides parses max.connections.per.ip.overrides, Kafka's
// "host:count,host:count" form (CoreUtils.parseCsvMap): entries are split on
// commas, each at its last colon, so unbracketed IPv6 works ("::1:5");
// whitespace around items is ignored, a later duplicate wins, "" is empty.
// Kafka resolves host names when it loads the config; this package does no
// I/O, so a host that is not an address literal is passed to resolve, and is
// an error if resolve is nil.
func ParseOverrides(s string, resolve func(host string) (netip.Addr, error)) (map[netip.Addr]int, error) {
	out := make(map[netip.Addr]int)
	s = strings.TrimSpace(s)
	if s == "" {
		return out, nil
	}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		colon := strings.LastIndexByte(entry, ':')
		if colon < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: entry %q is not host:count", entry)
		}
		host := strings.TrimSpace(entry[:colon])
		count := strings.TrimSpace(entry[colon+1:])
		if host == "" {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: entry %q has no host", entry)
		}
		n, err := strconv.ParseInt(count, 10, 32)
		if err != nil {
			return nil, &kafkaError{msg: fmt.Sprintf("max.connections.per.ip.overrides: count %q for host %s is not a number of type INT", count, host),
				kafka: fmt.Sprintf("For input string: %q", count)}
		}
		if n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: count %d for host %s must be at least 0", n, host)
		}
		literal := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		addr, err := netip.ParseAddr(literal)
		if err != nil {
			if resolve == nil {
				return nil, fmt.Errorf("max.connections.per.ip.overrides: %q is not an IP address (host names need a resolver)", host)
			}
			if addr, err = resolve(host); err != nil {
				return nil, fmt.Errorf("max.connections.per.ip.overrides: %s: %w", host, err)
			}
		}
		out[normalizeAddr(addr)] = int(n)
	}
	return out, nil
}

// ParseIPEntity turns the name of an ip quota entity into a key of
// Settings.IPConnectionRates (the quota model's rule, model.ParseIPEntity).
func ParseIPEntity(name string) (netip.Prefix, error) { return model.ParseIPEntity(name) }

// normalizeAddr is the key every per-IP table uses: dual-stack sockets report
// IPv4 peers as ::ffff:a.b.c.d and Java's InetAddress treats those as IPv4,
// so the two spellings must count as one client.
func normalizeAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// normalizePrefix maps ::ffff:a.b.c.d/n (n ≥ 96) to a.b.c.d/(n−96).
func normalizePrefix(p netip.Prefix) netip.Prefix { return model.NormalizePrefix(p) }

// kafkaError is a config error whose message differs from the one Kafka's
// broker gives for the same mistake (there, the Java exception's own): the
// Kafka config API answers with KafkaMessage, the config file with Error.
type kafkaError struct{ msg, kafka string }

func (e *kafkaError) Error() string        { return e.msg }
func (e *kafkaError) KafkaMessage() string { return e.kafka }
