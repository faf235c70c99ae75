package telemetry

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's ClientMetricsConfigs.validate, rule by rule and in its order,
// with its codes and messages.
func TestParseClientSubscriptionRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sub     string
		configs map[string]string
		code    *kerr.Error
		msg     string
	}{
		{"empty name", "", nil, kerr.InvalidRequest, "Subscription name can't be empty"},
		{"empty name before unknown key", "", map[string]string{"x": "1"}, kerr.InvalidRequest, "Subscription name can't be empty"},
		{"unknown key", "s", map[string]string{"metrics": "a", "push.interval": "1"}, kerr.InvalidRequest,
			"Unknown client metrics configuration: push.interval"},
		{"unknown keys: the first sorted", "s", map[string]string{"zz": "", "interval.ms": "x", "bb": "", "cc": ""}, kerr.InvalidRequest,
			"Unknown client metrics configuration: bb"},
		{"interval not a number", "s", map[string]string{"interval.ms": "ten"}, kerr.InvalidConfig,
			"Invalid value ten for configuration interval.ms: Not a number of type INT"},
		{"interval empty", "s", map[string]string{"interval.ms": ""}, kerr.InvalidConfig,
			"Invalid value  for configuration interval.ms: Not a number of type INT"},
		{"interval past int", "s", map[string]string{"interval.ms": "2147483648"}, kerr.InvalidConfig,
			"Invalid value 2147483648 for configuration interval.ms: Not a number of type INT"},
		{"interval fractional", "s", map[string]string{"interval.ms": "100.0"}, kerr.InvalidConfig,
			"Invalid value 100.0 for configuration interval.ms: Not a number of type INT"},
		{"interval 99", "s", map[string]string{"interval.ms": "99"}, kerr.InvalidRequest,
			"Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"interval 3600001", "s", map[string]string{"interval.ms": "3600001"}, kerr.InvalidRequest,
			"Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"interval negative", "s", map[string]string{"interval.ms": " -5 "}, kerr.InvalidRequest,
			"Invalid value -5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"interval before match", "s", map[string]string{"interval.ms": "1", "match": "nope"}, kerr.InvalidRequest,
			"Invalid value 1 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"no =", "s", map[string]string{"match": "client_id"}, kerr.InvalidConfig, "Illegal client matching pattern: client_id"},
		{"trailing = dropped by Java's split", "s", map[string]string{"match": "client_id="}, kerr.InvalidConfig,
			"Illegal client matching pattern: client_id="},
		{"= alone", "s", map[string]string{"match": "="}, kerr.InvalidConfig, "Illegal client matching pattern: ="},
		{"three parts", "s", map[string]string{"match": "a=b=c"}, kerr.InvalidConfig, "Illegal client matching pattern: a=b=c"},
		{"three parts, known key", "s", map[string]string{"match": "client_id=a=b"}, kerr.InvalidConfig,
			"Illegal client matching pattern: client_id=a=b"},
		{"empty key", "s", map[string]string{"match": "=x"}, kerr.InvalidConfig, "Illegal client matching pattern: =x"},
		{"unknown attribute", "s", map[string]string{"match": "client_rack=r1"}, kerr.InvalidConfig,
			"Illegal client matching pattern: client_rack=r1"},
		{"attribute names are case-sensitive", "s", map[string]string{"match": "CLIENT_ID=a"}, kerr.InvalidConfig,
			"Illegal client matching pattern: CLIENT_ID=a"},
		{"bad regex", "s", map[string]string{"match": "client_id=("}, kerr.InvalidConfig, "Illegal client matching pattern: client_id=("},
		{"regex that compiles only wrapped", "s", map[string]string{"match": "client_id=a)|(b"}, kerr.InvalidConfig,
			"Illegal client matching pattern: client_id=a)|(b"},
		{"backreference (Java only)", "s", map[string]string{"match": `client_id=(a)\1`}, kerr.InvalidConfig,
			`Illegal client matching pattern: client_id=(a)\1`},
		{"lookahead (Java only)", "s", map[string]string{"match": `client_id=(?=a)a`}, kerr.InvalidConfig,
			`Illegal client matching pattern: client_id=(?=a)a`},
		{"the entry as listed", "s", map[string]string{"match": " client_id=a ,  client_id = ( "}, kerr.InvalidConfig,
			"Illegal client matching pattern: client_id = ("},
		// Kafka 4.4's broker (measured): an empty entry of a list.
		{"an empty match entry", "s", map[string]string{"match": ", client_id=a"}, kerr.InvalidConfig,
			"Configuration 'match' values must not be empty."},
		{"a trailing comma", "s", map[string]string{"match": "client_id=a,"}, kerr.InvalidConfig,
			"Configuration 'match' values must not be empty."},
		{"an empty metrics entry", "s", map[string]string{"metrics": "a,,b"}, kerr.InvalidConfig,
			"Configuration 'metrics' values must not be empty."},
		{"a comma alone", "s", map[string]string{"metrics": ","}, kerr.InvalidConfig,
			"Configuration 'metrics' values must not be empty."},
		{"the first bad entry", "s", map[string]string{"match": "client_id=a,bad,client_id=("}, kerr.InvalidConfig,
			"Illegal client matching pattern: bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseClientSubscription(tc.sub, tc.configs)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if ce.Code != tc.code.Code || ce.Message != tc.msg || err.Error() != tc.msg {
				t.Fatalf("got %s %q, want %s %q", errName(ce.Code), ce.Message, errName(tc.code.Code), tc.msg)
			}
		})
	}
}

func TestParseClientSubscriptionAccepted(t *testing.T) {
	pat := func(attr, re string) MatchPattern { return MatchPattern{Attr: attr, Regex: re} }
	for _, tc := range []struct {
		name    string
		configs map[string]string
		want    ClientSubscription
	}{
		{"defaults", nil, ClientSubscription{Interval: 5 * time.Minute}},
		{"empty values", map[string]string{"metrics": "", "match": "  "}, ClientSubscription{Interval: 5 * time.Minute}},
		{"interval 100", map[string]string{"interval.ms": "100"}, ClientSubscription{Interval: 100 * time.Millisecond}},
		{"interval 3600000", map[string]string{"interval.ms": "3600000"}, ClientSubscription{Interval: time.Hour}},
		{"interval trimmed, signed", map[string]string{"interval.ms": " +1500\t"}, ClientSubscription{Interval: 1500 * time.Millisecond}},
		{"metrics list", map[string]string{"metrics": " org.apache.kafka.producer. ,org.apache.kafka.consumer., *"},
			ClientSubscription{Interval: 5 * time.Minute, Metrics: []string{"org.apache.kafka.producer.", "org.apache.kafka.consumer.", "*"}}},
		{"match trimmed around =", map[string]string{"match": " client_id = app.* "},
			ClientSubscription{Interval: 5 * time.Minute, Match: []MatchPattern{pat("client_id", "app.*")}}},
		{"every attribute, sorted", map[string]string{"match": "client_source_port=9\\d+,client_software_version=1\\..*,client_id=a," +
			"client_software_name=apache-kafka-java,client_source_address=10\\..*,client_instance_id=AAEC.*"},
			ClientSubscription{Interval: 5 * time.Minute, Match: []MatchPattern{
				pat("client_id", "a"), pat("client_instance_id", "AAEC.*"), pat("client_software_name", "apache-kafka-java"),
				pat("client_software_version", `1\..*`), pat("client_source_address", `10\..*`), pat("client_source_port", `9\d+`)}}},
		{"an attribute twice: the last kept", map[string]string{"match": "client_id=a,client_id=b"},
			ClientSubscription{Interval: 5 * time.Minute, Match: []MatchPattern{pat("client_id", "b")}}},
		{"an empty list", map[string]string{"metrics": " ", "match": ""},
			ClientSubscription{Interval: 5 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseClientSubscription("sub", tc.configs)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Name = "sub"
			if !got.equal(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for _, p := range got.Match {
				if p.re == nil {
					t.Fatalf("%s not compiled", p.Attr)
				}
			}
		})
	}
}

func TestJavaSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a", []string{"a"}},
		{"a=b", []string{"a", "b"}},
		{"a=", []string{"a"}},
		{"a==", []string{"a"}},
		{"=", nil},
		{"==", nil},
		{"=a", []string{"", "a"}},
		{"a=b=c", []string{"a", "b", "c"}},
		{"a==b", []string{"a", "", "b"}},
	} {
		if got := javaSplit(tc.in, "="); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The attributes a client is matched on, as Kafka's
// ClientMetricsInstanceMetadata gives them.
func TestClientAttributes(t *testing.T) {
	id := [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	c := Client{User: "alice", ClientID: "app\xff", SoftwareName: "apache-kafka-java", SoftwareVersion: "3.9.0",
		Addr: netip.MustParseAddrPort("[::ffff:10.1.2.3]:53124")}
	for _, tc := range []struct {
		c    Client
		attr string
		want string
		ok   bool
	}{
		{c, AttrClientInstanceID, "AAECAwQFBgcICQoLDA0ODw", true},
		{c, AttrClientID, "app\uFFFD", true},
		{Client{}, AttrClientID, "", true},
		{c, AttrClientSoftwareName, "apache-kafka-java", true},
		{Client{}, AttrClientSoftwareName, "", false},
		{c, AttrClientSoftwareVersion, "3.9.0", true},
		{Client{}, AttrClientSoftwareVersion, "", false},
		{c, AttrClientSourceAddress, "10.1.2.3", true},
		{c, AttrClientSourcePort, "53124", true},
		{Client{Addr: netip.MustParseAddrPort("[2001:db8::1]:9092")}, AttrClientSourceAddress, "2001:db8:0:0:0:0:0:1", true},
		{Client{Addr: netip.MustParseAddrPort("[fe80::a:ff%eth0]:1")}, AttrClientSourceAddress, "fe80:0:0:0:0:0:a:ff%eth0", true},
		{Client{}, AttrClientSourceAddress, "", false},
		{Client{}, AttrClientSourcePort, "", false},
		{c, "client_rack", "", false},
	} {
		got, ok := tc.c.attribute(tc.attr, id)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s of %+v: got %q, %v, want %q, %v", tc.attr, tc.c, got, ok, tc.want, tc.ok)
		}
	}
}

// A subscription matches a client when each of its patterns matches the
// whole of its attribute; one without patterns matches every client.
func TestClientSubscriptionMatches(t *testing.T) {
	id := [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	java := Client{User: "alice", ClientID: "orders-app-1", SoftwareName: "apache-kafka-java", SoftwareVersion: "3.9.0",
		Addr: netip.MustParseAddrPort("10.1.2.3:53124")}
	unknown := Client{User: "bob", ClientID: "legacy"}
	for _, tc := range []struct {
		match string
		c     Client
		want  bool
	}{
		{"", java, true},
		{"", unknown, true},
		{"client_id=orders-.*", java, true},
		{"client_id=orders", java, false}, // a full match, not a find
		{"client_id=app", java, false},
		{"client_id=.*app.*", java, true},
		{"client_instance_id=AAECAwQFBgcICQoLDA0ODw", java, true},
		{"client_instance_id=AAEC.*", java, true},
		{"client_instance_id=000102030405060708090a0b0c0d0e0f", java, false},
		{"client_software_name=apache-kafka-java", java, true},
		{"client_software_name=.*", unknown, false}, // null matches nothing
		{"client_software_version=3\\.9\\..*", java, true},
		{"client_software_version=.*", unknown, false},
		{"client_source_address=10\\.1\\..*", java, true},
		{"client_source_address=10\\.1", java, false},
		{"client_source_address=.*", unknown, false},
		{"client_source_port=53124", java, true},
		{"client_source_port=5312", java, false},
		{"client_source_port=.*", unknown, false},
		{"client_id=orders-.*,client_software_name=apache-kafka-java", java, true},
		{"client_id=orders-.*,client_software_name=librdkafka", java, false}, // all must match
		{"client_id=a|orders-app-1", java, true},                             // the alternation is wrapped whole
		{"client_id=(?m)orders-app-1$", java, true},
	} {
		s, err := ParseClientSubscription("sub", map[string]string{"match": tc.match})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.matches(tc.c, id); got != tc.want {
			t.Errorf("%q against %+v: got %v, want %v", tc.match, tc.c, got, tc.want)
		}
	}
}
