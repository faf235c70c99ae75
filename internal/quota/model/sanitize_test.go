package model

import "testing"

// Sanitize is Java URLEncoder (UTF-8) with "*" → %2A and "+" → %20.
func TestSanitize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"alice", "alice"},
		{"a.b-c_d09AZ", "a.b-c_d09AZ"},
		{"User:alice", "User%3Aalice"},
		{"a b", "a%20b"},
		{"a*b", "a%2Ab"},
		{"a+b", "a%2Bb"},
		{"~", "%7E"},
		{"<default>", "%3Cdefault%3E"},
		{"CN=foo,OU=bar", "CN%3Dfoo%2COU%3Dbar"},
		{"a/b%c", "a%2Fb%25c"},
		{"ü", "%C3%BC"},
		{"名前", "%E5%90%8D%E5%89%8D"},
		{"😀", "%F0%9F%98%80"},
		{"x\xffy", "x%EF%BF%BDy"}, // Kafka decodes names as UTF-8 with replacement
	}
	for _, c := range cases {
		if got := Sanitize(c.in); got != c.want {
			t.Errorf("Sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
		if c.in == "x\xffy" {
			continue
		}
		if back, err := Desanitize(c.want); err != nil || back != c.in {
			t.Errorf("Desanitize(%q) = %q, %v; want %q", c.want, back, err, c.in)
		}
	}
}

func TestDesanitize(t *testing.T) {
	ok := []struct{ in, want string }{
		{"a+b", "a b"},     // URLDecoder: + is a space
		{"%e5%90%8d", "名"}, // lower-case hex
		{"%C3", "\uFFFD"},  // truncated UTF-8
		{"plain", "plain"},
	}
	for _, c := range ok {
		if got, err := Desanitize(c.in); err != nil || got != c.want {
			t.Errorf("Desanitize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"%", "%4", "a%zz", "%G0"} {
		if _, err := Desanitize(bad); err == nil {
			t.Errorf("Desanitize(%q) accepted", bad)
		}
	}
}
