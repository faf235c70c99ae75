package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// Kafka's SslPrincipalMapperTest, with Java string literals written as the
// text they denote.

func TestMappingValidRules(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
		// split on newlines
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L\nDEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/\nRULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L\nDEFAULT",
	} {
		if _, err := ParseMappingRules(rules); err != nil {
			t.Errorf("ParseMappingRules(%q): %v", rules, err)
		}
	}
}

func TestMappingInvalidRules(t *testing.T) {
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// Beyond Kafka's table: what Java would reject when the rule
		// first applies, and what Go's RE2 cannot compile.
		"RULE:^CN=.*$/$1/",             // no groups at all: "No group 1"
		"RULE:^CN=(.*)$/x\\/",          // trailing backslash
		"RULE:^CN=(.*)$/$/",            // $ at the end
		"RULE:^CN=(.*)$/$x/",           // illegal group reference
		"RULE:^CN=(?<n>.*)$/${m}/",     // unknown named group
		"RULE:^CN=(?<n>.*)$/${n/",      // unterminated name
		"RULE:^CN=(\\w+)\\1$/$1/",      // backreference
		"RULE:^CN=(?=a).*$/x/",         // lookahead
		"RULE:^CN=([a-z]++)$/$1/",      // possessive
		"RULE:^CN=(.*$/$1/",            // unbalanced
		"RULE:^CN=(.*)$/$99999999999/", // group number overflow
	} {
		if m, err := ParseMappingRules(rules); err == nil {
			t.Errorf("ParseMappingRules(%q) accepted: %v", rules, m)
		}
	}
}

func TestMappingKafka(t *testing.T) {
	rules := strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", ")
	m, err := ParseMappingRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := m.Map(dn); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestMappingCommaWithWhitespace(t *testing.T) {
	m, err := ParseMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Map(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestMappingRulesSplitting(t *testing.T) {
	for _, tt := range []struct{ want, rules string }{
		{"[]", ""},
		{"[DEFAULT]", "DEFAULT"},
		{"[RULE:/]", "RULE://"},
		{"[RULE:/.*]", "RULE:/.*/"},
		{"[RULE:/.*/L]", "RULE:/.*/L"},
		{"[RULE:/, DEFAULT]", "RULE://,DEFAULT"},
		{"[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "},
		{"[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "},
		{"[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "},
		{"[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "},
		// empty rules are ignored
		{"[]", ",   , , ,      , , ,   "},
		{"[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"},
		{"[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "},
		{"[RULE:   /  , DEFAULT]", "     ,  , RULE:   /  /    ,,,   DEFAULT, ,   "},
		{"[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"},
		// escape sequences
		{`[RULE:\/\\\(\)\n\t/\/\/]`, `RULE:\/\\\(\)\n\t/\/\//`},
		{`[RULE:\**\/+/*/L, RULE:\/*\**/**]`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`},
		// rules rule
		{
			`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		},
		// Newlines separate rules too (as in Redpanda; Kafka splits on
		// commas only and would silently drop a rule followed by a
		// newline).
		{"[RULE:a/b/L, DEFAULT]", "RULE:a/b/L\nDEFAULT"},
		{"[RULE:a/b, RULE:c/d/U, DEFAULT]", "RULE:a/b/\n  RULE:c/d/U \n\n DEFAULT\n"},
	} {
		m, err := ParseMappingRules(tt.rules)
		if err != nil {
			t.Errorf("ParseMappingRules(%q): %v", tt.rules, err)
			continue
		}
		if got := "[" + strings.Join(m.Rules(), ", ") + "]"; got != tt.want {
			t.Errorf("ParseMappingRules(%q) = %s, want %s", tt.rules, got, tt.want)
		}
		if got, want := m.String(), "SslPrincipalMapper(rules = "+tt.want+")"; got != want {
			t.Errorf("String() = %s, want %s", got, want)
		}
	}
}

// Java String.replaceAll semantics the rules inherit.
func TestMappingJavaReplacement(t *testing.T) {
	for _, tt := range []struct{ rules, dn, want string }{
		// The rule must match the whole DN; replaceAll then rewrites
		// every match, including Java's empty match at the end.
		{"RULE:(.*)/x$1/", "abc", "xabcx"},
		{"RULE:.*/X/", "abc", "XX"},
		{"RULE:^(.*)$/x$1/", "abc", "xabc"},
		{"RULE:(b*)/[$1]/,DEFAULT", "bbb", "[bbb][]"},
		{"RULE:CN=(\\w+),.*/$1/", "CN=bob,O=x", "bob"},
		// $12 with one group is group 1 then "2"; $2 with one group is
		// escaped to a literal (NiFi's escapeLiteralBackReferences).
		{"RULE:^CN=([a-z]+),.*$/$12/", "CN=bob,O=x", "bob2"},
		{"RULE:^CN=([a-z]+),.*$/$1@$2/", "CN=bob,O=x", "bob@$2"},
		{"RULE:^CN=([a-z]+),.*$/$2x/", "CN=bob,O=x", "$2x"},
		{"RULE:^CN=([a-z]+),.*$/$0/", "CN=bob,O=x", "CN=bob,O=x"},
		{"RULE:^CN=([a-z]+),.*$/\\$1/", "CN=bob,O=x", "$1"},
		{"RULE:^CN=(?<user>[a-z]+),.*$/${user}!/", "CN=bob,O=x", "bob!"},
		// A group that did not participate is empty.
		{"RULE:^CN=(a)?([a-z]+),.*$/[$1|$2]/", "CN=bob,O=x", "[|bob]"},
		// Case folding is Java's toLowerCase/toUpperCase(Locale.ENGLISH).
		{"RULE:^CN=(.*)$/$1/U", "CN=straße", "STRASSE"},
		{"RULE:^CN=(.*)$/$1/L", "CN=ÀÉÎ", "àéî"},
		// First matching rule wins; a rule that does not match the whole
		// DN is skipped.
		{"RULE:^CN=a$/first/,RULE:^CN=.*$/second/", "CN=ab", "second"},
		{"RULE:^CN=a/first/,DEFAULT", "CN=ab", "CN=ab"},
		// An empty result is returned, as in Kafka.
		{"RULE:^CN=.*$//", "CN=x", ""},
	} {
		m, err := ParseMappingRules(tt.rules)
		if err != nil {
			t.Errorf("ParseMappingRules(%q): %v", tt.rules, err)
			continue
		}
		if got, err := m.Map(tt.dn); err != nil || got != tt.want {
			t.Errorf("%s on %q = %q, %v; want %q", tt.rules, tt.dn, got, err, tt.want)
		}
	}
}

func TestMappingNoMatch(t *testing.T) {
	for _, rules := range []string{"", "RULE:^CN=a$/x/", ", ,"} {
		m, err := ParseMappingRules(rules)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Map("CN=b"); !errors.Is(err, ErrNoMatchingRule) {
			t.Errorf("%q: err = %v", rules, err)
		}
	}
	var nilMapper *Mapper
	if got, err := nilMapper.Map("CN=b"); err != nil || got != "CN=b" {
		t.Fatal("nil mapper is not DEFAULT")
	}
}

// The brief's example end to end: a generated certificate, its DN as Java
// formats it, Kafka's rule.
func TestMappingCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "Tollgate Test CA")
	m, err := ParseMappingRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "kafka-server", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}}, "kafka-server"},
		{pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}, Country: []string{"US"}}, "CN=alice,OU=eng,O=Example,C=US"},
	} {
		cert := ca.Issue(t, &x509.Certificate{Subject: tt.subject}).Cert
		p, err := m.PrincipalFromCert(cert)
		if err != nil || p != (principal.Principal{Type: "User", Name: tt.want}) {
			t.Errorf("%v: %v, %v; want %s", tt.subject, p, err, tt.want)
		}
		p, err = m.PrincipalFromTLS(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}})
		if err != nil || p.Name != tt.want {
			t.Errorf("PrincipalFromTLS: %v, %v", p, err)
		}
	}
	if p, err := m.PrincipalFromTLS(tls.ConnectionState{}); err != nil || p != principal.AnonymousPrincipal {
		t.Fatalf("no client certificate: %v, %v", p, err)
	}
	strict, _ := ParseMappingRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
	cert := ca.Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "x"}}).Cert
	if _, err := strict.PrincipalFromCert(cert); !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("no matching rule: %v", err)
	}
}

// replaceAll's find loop keeps the text before the search position as
// context for ^ and \b, as java.util.regex.Matcher.find does.
func TestJavaReplaceAllContext(t *testing.T) {
	for _, tt := range []struct{ pattern, repl, in, want string }{
		{`\bx`, "Y", "xax x", "Yax Y"},
		{`^a`, "X", "aa", "Xa"},
		{`a*`, "-", "baaac", "-b--c-"},
		{`(?m)^a`, "X", "a\na", "X\nX"},
		{`é|`, "_", "aé", "_a__"},
		{`\B`, "|", "ab c", "a|b c"},
	} {
		r, err := parseRule("RULE:" + tt.pattern + "/" + tt.repl + "/")
		if err != nil {
			t.Fatal(err)
		}
		if got := r.replaceAll(tt.in); got != tt.want {
			t.Errorf("%q.replaceAll(%q, %q) = %q, want %q", tt.in, tt.pattern, tt.repl, got, tt.want)
		}
	}
}
