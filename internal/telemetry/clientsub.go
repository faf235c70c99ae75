package telemetry

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
)

// The configs of a client-metrics subscription (a Kafka CLIENT_METRICS
// resource), as kafka-client-metrics.sh and IncrementalAlterConfigs name
// them.
const (
	ConfigMetrics    = "metrics"
	ConfigIntervalMs = "interval.ms"
	ConfigMatch      = "match"
)

// DefaultClientSubscriptionInterval is a subscription's interval.ms when
// it has none: Kafka's DEFAULT_INTERVAL_MS.
const DefaultClientSubscriptionInterval = 5 * time.Minute

// ClientConfigDef is one config of a client-metrics subscription as Kafka
// 4's broker describes it (DescribeConfigs): its type, its default and its
// documentation.
type ClientConfigDef struct {
	Name, Default, Doc string
	Type               kmsg.ConfigType
}

// ClientConfigDefs are the configs of a client-metrics subscription by
// name, as Kafka 4.4's broker lists them (measured).
var ClientConfigDefs = []ClientConfigDef{
	{Name: ConfigIntervalMs, Type: kmsg.ConfigTypeInt, Default: "300000", Doc: "Metrics push interval in milliseconds"},
	{Name: ConfigMatch, Type: kmsg.ConfigTypeList, Default: "", Doc: "Client match criteria"},
	{Name: ConfigMetrics, Type: kmsg.ConfigTypeList, Default: "", Doc: "Telemetry metric name prefix list"},
}

// The client attributes a subscription's match patterns may name (Kafka's
// ClientMetricsInstanceMetadata).
const (
	AttrClientInstanceID      = "client_instance_id"
	AttrClientID              = "client_id"
	AttrClientSoftwareName    = "client_software_name"
	AttrClientSoftwareVersion = "client_software_version"
	AttrClientSourceAddress   = "client_source_address"
	AttrClientSourcePort      = "client_source_port"
)

func matchAttribute(k string) bool {
	switch k {
	case AttrClientInstanceID, AttrClientID, AttrClientSoftwareName, AttrClientSoftwareVersion,
		AttrClientSourceAddress, AttrClientSourcePort:
		return true
	}
	return false
}

// ConfigError is a client-metrics subscription refused as Kafka refuses
// it: Kafka's error code (INVALID_REQUEST or INVALID_CONFIG) and message,
// for the AlterConfigs or IncrementalAlterConfigs response.
type ConfigError struct {
	Code    int16
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

func invalidRequest(format string, a ...any) *ConfigError {
	return &ConfigError{Code: kerr.InvalidRequest.Code, Message: fmt.Sprintf(format, a...)}
}

func invalidConfig(format string, a ...any) *ConfigError {
	return &ConfigError{Code: kerr.InvalidConfig.Code, Message: fmt.Sprintf(format, a...)}
}

// ClientSubscription is one named client-metrics subscription (a Kafka
// CLIENT_METRICS resource): the metrics it asks the clients it matches
// for, and how often.
type ClientSubscription struct {
	Name string
	// Metrics are metric name prefixes; "*" among them is every metric.
	Metrics []string
	// Interval is the push interval (interval.ms).
	Interval time.Duration
	// Match are the patterns a client must all match, one per attribute,
	// sorted by attribute; none matches every client.
	Match []MatchPattern
}

// MatchPattern is one of a subscription's match patterns: a regular
// expression that must match the whole of a client attribute.
type MatchPattern struct {
	// Attr is the attribute, one of the Attr constants.
	Attr string
	// Regex is the regular expression, in Go's syntax (RE2).
	Regex string
	// re is \A(?:Regex)\z compiled; nil until compiled, or when Regex
	// does not compile.
	re *regexp.Regexp
}

// compileMatch compiles regex to match the whole of an attribute, as
// Java's Matcher.matches does. The regex is compiled alone first: wrapped at
// once, one such as "a)|(b" would compile into another.
func compileMatch(regex string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(regex); err != nil {
		return nil, err
	}
	return regexp.Compile(`\A(?:` + regex + `)\z`)
}

func (s ClientSubscription) clone() ClientSubscription {
	s.Metrics = slices.Clone(s.Metrics)
	s.Match = slices.Clone(s.Match)
	return s
}

func (s ClientSubscription) equal(o ClientSubscription) bool {
	return s.Name == o.Name && s.Interval == o.Interval && slices.Equal(s.Metrics, o.Metrics) &&
		slices.EqualFunc(s.Match, o.Match, func(a, b MatchPattern) bool { return a.Attr == b.Attr && a.Regex == b.Regex })
}

// ParseClientSubscription reads a subscription's configs (config name →
// value, as stored), validating them as Kafka's
// ClientMetricsConfigs.validate does, in Kafka's order; a refusal is a
// *ConfigError with Kafka's code and message:
//
//   - an empty name is INVALID_REQUEST;
//   - a config other than metrics, interval.ms and match INVALID_REQUEST
//     (of several, the first in sorted order is named: Java names the
//     first in its hash order);
//   - an interval.ms that is no int INVALID_CONFIG, one outside 100 to
//     3600000 INVALID_REQUEST;
//   - a match entry that is not attribute=regex, names no attribute or
//     whose regex does not compile INVALID_CONFIG.
//
// Lists (metrics, match) are read as Kafka's ConfigDef reads a LIST:
// split on commas, each entry trimmed; an empty value is an empty list.
// Unlike Kafka, which keeps them, empty entries are dropped. A match entry
// is split on "=" as Java's String.split("="), which drops trailing empty
// strings: it must give exactly two parts, so "client_id=" and "a=b=c" are
// refused. Of two entries for one attribute the last is kept, as Kafka's
// map of them keeps it.
//
// Regexes are Go's (RE2) rather than Java's: constructs RE2 lacks, such as
// backreferences, lookaround and possessive quantifiers, are refused as
// Kafka refuses a regex that does not compile. A regex must match the
// whole attribute, as Java's Matcher.matches.
//
// Absent configs are Kafka's defaults: no metrics, an interval of 5
// minutes, no match patterns (every client matches).
func ParseClientSubscription(name string, configs map[string]string) (ClientSubscription, error) {
	if name == "" {
		return ClientSubscription{}, invalidRequest("Subscription name can't be empty")
	}
	keys := make([]string, 0, len(configs))
	for k := range configs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != ConfigMetrics && k != ConfigIntervalMs && k != ConfigMatch {
			return ClientSubscription{}, invalidRequest("Unknown client metrics configuration: %s", k)
		}
	}
	s := ClientSubscription{Name: name, Interval: DefaultClientSubscriptionInterval}
	// ConfigDef parses in its definition order, metrics first.
	var err error
	if s.Metrics, err = parseList(ConfigMetrics, configs[ConfigMetrics]); err != nil {
		return ClientSubscription{}, err
	}
	if v, ok := configs[ConfigIntervalMs]; ok {
		n, err := strconv.ParseInt(javaTrim(v), 10, 32)
		if err != nil {
			// ConfigException(name, value, "Not a number of type INT").
			return ClientSubscription{}, invalidConfig("Invalid value %s for configuration %s: Not a number of type INT", v, ConfigIntervalMs)
		}
		if n < MinPushInterval.Milliseconds() || n > MaxPushInterval.Milliseconds() {
			return ClientSubscription{}, invalidRequest("Invalid value %d for %s, interval must be between 100 and 3600000 (1 hour)", n, ConfigIntervalMs)
		}
		s.Interval = time.Duration(n) * time.Millisecond
	}
	match, err := parseList(ConfigMatch, configs[ConfigMatch])
	if err != nil {
		return ClientSubscription{}, err
	}
	for _, p := range match {
		parts := javaSplit(p, "=")
		if len(parts) != 2 {
			return ClientSubscription{}, invalidConfig("Illegal client matching pattern: %s", p)
		}
		mp := MatchPattern{Attr: javaTrim(parts[0]), Regex: javaTrim(parts[1])}
		if !matchAttribute(mp.Attr) {
			return ClientSubscription{}, invalidConfig("Illegal client matching pattern: %s", p)
		}
		if mp.re, err = compileMatch(mp.Regex); err != nil {
			return ClientSubscription{}, invalidConfig("Illegal client matching pattern: %s", p)
		}
		if i := slices.IndexFunc(s.Match, func(o MatchPattern) bool { return o.Attr == mp.Attr }); i >= 0 {
			s.Match[i] = mp
		} else {
			s.Match = append(s.Match, mp)
		}
	}
	slices.SortFunc(s.Match, func(a, b MatchPattern) int { return strings.Compare(a.Attr, b.Attr) })
	return s, nil
}

// javaTrim is Java's String.trim: it strips every character up to U+0020
// from both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// parseList reads a LIST config as Kafka 4's ConfigDef does — the value
// trimmed, then split on commas with the whitespace (Java's \s) around
// them — refusing an empty entry as its ValidList does ("a,,b", "a,", ","
// are refused INVALID_CONFIG; Kafka 3.9 took them, dropping the trailing
// ones). An empty value is the empty list.
func parseList(key, v string) ([]string, error) {
	v = javaTrim(v)
	if v == "" {
		return nil, nil
	}
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		if e = strings.Trim(e, " \t\n\v\f\r"); e == "" {
			return nil, invalidConfig("Configuration '%s' values must not be empty.", key)
		}
		out = append(out, e)
	}
	return out, nil
}

// javaSplit is Java's String.split(sep) for a literal sep: trailing empty
// strings are dropped (all of them, so a string of separators alone gives
// none), and a string without sep is itself.
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	if len(parts) == 1 {
		return parts
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// Client is the client a request comes from, as Kafka's
// ClientMetricsInstanceMetadata describes it for matching.
type Client struct {
	// User is the principal's name; instance ids are per user.
	User string
	// ClientID is the request header's client-id.
	ClientID string
	// SoftwareName and SoftwareVersion are what the connection's
	// ApiVersions request gave; empty when unknown, and then a pattern on
	// them matches nothing.
	SoftwareName, SoftwareVersion string
	// Addr is the connection's source; zero when unknown, and then a
	// pattern on the address or port matches nothing.
	Addr netip.AddrPort
}

// attribute is the client attribute attr of instance id, as Kafka's
// ClientMetricsInstanceMetadata gives it; false where Kafka's is null.
func (c Client) attribute(attr string, id [16]byte) (string, bool) {
	switch attr {
	case AttrClientInstanceID:
		return uuidString(id), true
	case AttrClientID:
		// As the series key: read as Java reads the request header.
		return strings.ToValidUTF8(c.ClientID, "\uFFFD"), true
	case AttrClientSoftwareName:
		return c.SoftwareName, c.SoftwareName != ""
	case AttrClientSoftwareVersion:
		return c.SoftwareVersion, c.SoftwareVersion != ""
	case AttrClientSourceAddress:
		if !c.Addr.Addr().IsValid() {
			return "", false
		}
		return principal.HostAddress(c.Addr.Addr()), true
	case AttrClientSourcePort:
		if !c.Addr.IsValid() {
			return "", false
		}
		return strconv.Itoa(int(c.Addr.Port())), true
	}
	return "", false
}

// matches reports whether s matches the client c of instance id: s has no
// patterns, or each matches the whole of its attribute (a null attribute
// matches nothing), as Kafka's ClientMetricsInstanceMetadata.isMatch.
func (s *ClientSubscription) matches(c Client, id [16]byte) bool {
	for _, p := range s.Match {
		v, ok := c.attribute(p.Attr, id)
		if !ok || p.re == nil || !p.re.MatchString(v) {
			return false
		}
	}
	return true
}

// uuidString is Kafka's Uuid.toString: the 16 bytes in URL-safe base64
// without padding.
func uuidString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
