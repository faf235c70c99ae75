package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate/tollgate/internal/principal"
)

func TestParsePlain(t *testing.T) {
	tests := []struct {
		name    string
		msg     string
		want    plainMessage
		wantErr string
	}{
		{"no authzid", "\x00alice\x00pw", plainMessage{"", "alice", "pw"}, ""},
		{"authzid", "alice\x00alice\x00pw", plainMessage{"alice", "alice", "pw"}, ""},
		{"other authzid parses", "bob\x00alice\x00pw", plainMessage{"bob", "alice", "pw"}, ""},
		{"utf8", "\x00jürgen\x00pässwörd", plainMessage{"", "jürgen", "pässwörd"}, ""},
		{"password with spaces", "\x00u\x00 p w ", plainMessage{"", "u", " p w "}, ""},
		{"empty", "", plainMessage{}, "expected 3 tokens, got 1"},
		{"one NUL", "\x00alice", plainMessage{}, "expected 3 tokens, got 2"},
		{"four tokens", "\x00alice\x00pw\x00x", plainMessage{}, "expected 3 tokens, got 4"},
		{"trailing NUL", "\x00alice\x00pw\x00", plainMessage{}, "expected 3 tokens, got 4"},
		{"empty user", "\x00\x00pw", plainMessage{}, "username not specified"},
		{"empty password", "\x00alice\x00", plainMessage{}, "password not specified"},
		{"bad utf8", "\x00al\xffice\x00pw", plainMessage{}, "not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePlain([]byte(tt.msg))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestPlainServer(t *testing.T) {
	store := testStore(t)
	plaintext, key, err := NewAPIKey("team-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AddAPIKey(key); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		msg     string
		want    string // principal name; "" when an error is expected
		wantMsg string // client message of the error
	}{
		{"ok", "\x00alice\x00alice-secret", "alice", ""},
		{"ok with authzid", "alice\x00alice\x00alice-secret", "alice", ""},
		{"ok escaped-looking name", "\x00we=ird,name\x00pw,with=odd chars", "we=ird,name", ""},
		{"ok sha-256 only user", "\x00carol\x00only-256", "carol", ""},
		{"api key", "\x00token\x00" + plaintext, "team-a", ""},
		{"api key authzid token", "token\x00token\x00" + plaintext, "team-a", ""},
		{"wrong password", "\x00alice\x00nope", "", msgInvalidUsernameOrPassword},
		{"unknown user", "\x00mallory\x00alice-secret", "", msgInvalidUsernameOrPassword},
		{"other user's password", "\x00alice\x00bob-secret", "", msgInvalidUsernameOrPassword},
		{"authzid differs", "bob\x00alice\x00alice-secret", "", msgAuthzidMismatch},
		{"malformed", "alice\x00alice-secret", "", genericFailure(MechanismPlain, "").Message},
		{"empty user", "\x00\x00x", "", genericFailure(MechanismPlain, "").Message},
		{"bad api key", "\x00token\x00tg_nope", "", msgInvalidUsernameOrPassword},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := NewServer(MechanismPlain, store)
			if err != nil {
				t.Fatal(err)
			}
			ch, done, err := srv.Step([]byte(tt.msg))
			if tt.want == "" {
				if err == nil || done {
					t.Fatalf("Step succeeded, want error %q", tt.wantMsg)
				}
				if !errors.Is(err, ErrAuthenticationFailed) || ClientMessage(err) != tt.wantMsg {
					t.Fatalf("err = %v (client message %q), want %q", err, ClientMessage(err), tt.wantMsg)
				}
				if srv.Principal() != (principal.Principal{}) {
					t.Fatalf("principal set after failure: %v", srv.Principal())
				}
				return
			}
			if err != nil || !done || ch == nil || len(ch) != 0 {
				t.Fatalf("Step = %q, %v, %v; want empty non-nil challenge, done", ch, done, err)
			}
			if got := srv.Principal(); got != (principal.Principal{Type: "User", Name: tt.want}) {
				t.Fatalf("principal = %v, want User:%s", got, tt.want)
			}
			if _, _, err := srv.Step([]byte(tt.msg)); err == nil {
				t.Fatal("second Step succeeded")
			}
		})
	}
}

// An unknown user and a wrong password must be indistinguishable.
func TestPlainSameErrorUnknownUser(t *testing.T) {
	store := testStore(t)
	step := func(msg string) error {
		srv, _ := NewServer(MechanismPlain, store)
		_, _, err := srv.Step([]byte(msg))
		return err
	}
	wrong, unknown := step("\x00alice\x00wrong"), step("\x00nobody\x00wrong")
	if wrong == nil || wrong != unknown || wrong.Error() != unknown.Error() || wrong.Error() != "Authentication failed: Invalid username or password" {
		t.Fatalf("wrong password: %v; unknown user: %v", wrong, unknown)
	}
}

// The franz-go PLAIN client's message is accepted.
func TestPlainFranzClient(t *testing.T) {
	store := testStore(t)
	_, first, err := plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism().Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := NewServer(MechanismPlain, store)
	if _, done, err := srv.Step(first); err != nil || !done || srv.Principal().Name != "bob" {
		t.Fatalf("done=%v err=%v principal=%v", done, err, srv.Principal())
	}
}

func TestNewServerMechanisms(t *testing.T) {
	store := testStore(t)
	for _, m := range Mechanisms() {
		srv, err := NewServer(m, store)
		if err != nil || srv.Mechanism() != m {
			t.Fatalf("NewServer(%s) = %v, %v", m, srv, err)
		}
	}
	for _, m := range []string{"GSSAPI", "OAUTHBEARER", "plain", "SCRAM-SHA-1", ""} {
		if _, err := NewServer(m, store); !errors.Is(err, ErrUnsupportedMechanism) {
			t.Fatalf("NewServer(%q) err = %v", m, err)
		}
	}
	if _, err := NewServer(MechanismPlain, nil); err == nil {
		t.Fatal("nil lookup accepted")
	}
}
