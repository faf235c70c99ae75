package clientconf

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

func TestParseProperties(t *testing.T) {
	got, err := ParseProps("# comment\n! also\n  a=1\nb : two words \nc\\=d:x\n" +
		"long = one\\\n    two\\\n three\nu=\\u00e9\\t|\nempty=\nbare\r\nlast=\\\\\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "two words ", "c=d": "x", "long": "onetwothree",
		"u": "é\t|", "empty": "", "bare": "", "last": `\`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if _, err := ParseProps(`bad=\u12`); err == nil {
		t.Fatal("a short \\u escape parsed")
	}
}

func TestJAASOptions(t *testing.T) {
	got, err := parseJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required
		username="alice" password="p\"w d;x" tokenauth=true;`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"username": "alice", "password": `p"w d;x`, "tokenauth": "true"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"", "Module", `Module maybe username="a";`, `Module required username="a`, `Module required =x;`} {
		if _, err := parseJAAS(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestClientProps(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "test CA").CertFile
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`
	ok := []map[string]string{
		{},
		{"security.protocol": "plaintext", "client.id": "me", "acks": "all"},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas},
		{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas,
			"ssl.truststore.location": ca, "ssl.truststore.type": "PEM"},
		{"security.protocol": "SSL", "ssl.truststore.location": ca, "ssl.endpoint.identification.algorithm": ""},
		{"security.protocol": "SSL"}, // system roots
	}
	for _, p := range ok {
		c, err := New("127.0.0.1:9092", p, "dflt")
		if err != nil {
			t.Errorf("%v: %v", p, err)
			continue
		}
		if c.Protocol == "" || len(c.Opts()) < 2 {
			t.Errorf("%v: %+v", p, c)
		}
	}
	c, _ := New("127.0.0.1:9092", ok[1], "dflt")
	if c.ClientID != "me" || c.Protocol != "PLAINTEXT" || !reflect.DeepEqual(Unknown(ok[1]), []string{"acks"}) {
		t.Fatalf("%+v %v", c, Unknown(ok[1]))
	}
	bad := map[string]map[string]string{
		"security.protocol":            {"security.protocol": "SSH"},
		"GSSAPI":                       {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas},
		"OAUTHBEARER":                  {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas},
		"sasl.jaas.config must be set": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
		"no password":                  {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": `M required username="u";`},
		"PEM files only":               {"security.protocol": "SSL", "ssl.truststore.location": ca, "ssl.truststore.type": "JKS"},
		"ssl.truststore.location":      {"security.protocol": "SSL", "ssl.truststore.location": filepath.Join(dir, "missing.pem")},
		"no PEM certificate":           {"security.protocol": "SSL", "ssl.truststore.certificates": "not pem"},
		"ssl.key.password":             {"security.protocol": "SSL", "ssl.key.password": "x"},
	}
	for want, p := range bad {
		if _, err := New("127.0.0.1:9092", p, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want one mentioning %q", p, err, want)
		}
	}
}
