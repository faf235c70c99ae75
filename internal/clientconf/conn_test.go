package clientconf

import (
	"maps"
	"testing"
)

func TestParseProps(t *testing.T) {
	got, err := ParseProps("# comment\n! also\n  a=1\nb : two words \nc three\nd=x\\\n   y\ne=\\u00e9\\t\\\\\nf\n\ng=h=i\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": "two words ", "c": "three", "d": "xy", "e": "é\t\\", "f": "", "g": "h=i"}
	if !maps.Equal(got, want) {
		t.Errorf("ParseProps = %q, want %q", got, want)
	}
}

func TestParseJAAS(t *testing.T) {
	for in, want := range map[string]map[string]string{
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="secret";`: {"username": "alice", "password": "secret"},
		`org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password="p a\"ss";`:    {"username": "bob", "password": `p a"ss`},
	} {
		got, err := parseJAAS(in)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("parseJAAS(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`PlainLoginModule username="a";`, `PlainLoginModule required username="a`, `X required junk;`} {
		if _, err := parseJAAS(in); err == nil {
			t.Errorf("parseJAAS(%s): no error", in)
		}
	}
}
