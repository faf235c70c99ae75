package api

import (
	"strings"
	"testing"
)

func TestCheckIdentity(t *testing.T) {
	for _, c := range []struct {
		identity, want string
	}{
		{"alice", ""},
		{"CN=a,O=b", ""},
		{"", "identity is required"},
		{strings.Repeat("a", MaxIdentityLen+1), "1025 bytes long, more than 1024"},
		{"a\xffb", "not valid UTF-8"},
		{"ANONYMOUS", "unauthenticated principal"},
		{"a\u0007b", "control character U+0007"},
	} {
		err := CheckIdentity(c.identity)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.identity, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.identity, err, c.want)
		}
	}
}
