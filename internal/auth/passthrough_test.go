package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

// unsecuredJWT builds header.payload. (no signature) from a JSON payload.
func unsecuredJWT(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(payload)) + "."
}

func firstMessage(t *testing.T, m sasl.Mechanism) []byte {
	t.Helper()
	_, first, err := m.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	return first
}

func TestUserFromClientMessage(t *testing.T) {
	xdgFirst := func(user string) []byte {
		c, _ := xscram.SHA512.NewClientUnprepped(user, "pw", "")
		m, _ := c.NewConversation().Step("")
		return []byte(m)
	}
	signed := strings.TrimSuffix(unsecuredJWT(`{"sub":"carol","exp":1}`), ".") + ".c2lnbmF0dXJl"
	tests := []struct {
		name, mech string
		msg        []byte
		want       string // "" = error
	}{
		{"plain franz", MechanismPlain, firstMessage(t, plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()), "alice"},
		{"plain authzid", MechanismPlain, []byte("alice\x00alice\x00pw"), "alice"},
		{"plain api key", MechanismPlain, []byte("\x00token\x00tg_x"), "token"},
		{"plain truncated", MechanismPlain, []byte("\x00alice"), ""},
		{"plain empty", MechanismPlain, nil, ""},
		{"scram-256 franz", MechanismScramSHA256, firstMessage(t, fscram.Auth{User: "bob", Pass: "pw"}.AsSha256Mechanism()), "bob"},
		{"scram-512 franz escaped", MechanismScramSHA512, firstMessage(t, fscram.Auth{User: "b=o,b", Pass: "pw", Zid: "b=o,b"}.AsSha512Mechanism()), "b=o,b"},
		{"scram-512 xdg", MechanismScramSHA512, xdgFirst("dave"), "dave"},
		{"scram token", MechanismScramSHA256, firstMessage(t, fscram.Auth{User: "tokenid", Pass: "hmac", IsToken: true}.AsSha256Mechanism()), "tokenid"},
		{"scram truncated", MechanismScramSHA256, []byte("n,,n=bob"), ""},
		{"scram final instead of first", MechanismScramSHA256, []byte("c=biws,r=abc,p=AAAA"), ""},
		{"oauth franz", MechanismOAuthBearer, firstMessage(t, oauth.Auth{Token: unsecuredJWT(`{"sub":"erin","iat":1}`)}.AsMechanism()), "erin"},
		{"oauth extensions and authzid", MechanismOAuthBearer, firstMessage(t, oauth.Auth{Zid: "frank", Token: unsecuredJWT(`{"sub":"frank"}`), Extensions: map[string]string{"traceId": "abc", "x": "y z"}}.AsMechanism()), "frank"},
		{"oauth signed token", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + signed + "\x01\x01"), "carol"},
		{"oauth lower-case scheme", MechanismOAuthBearer, []byte("n,,\x01auth=bearer " + unsecuredJWT(`{"sub":"g"}`) + "\x01\x01"), "g"},
		{"oauth no sub", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"iss":"x"}`) + "\x01\x01"), ""},
		{"oauth numeric sub", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"sub":42}`) + "\x01\x01"), ""},
		{"oauth not a jwt", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer opaque\x01\x01"), ""},
		{"oauth bad payload", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer a.!!!.b\x01\x01"), ""},
		{"oauth basic scheme", MechanismOAuthBearer, []byte("n,,\x01auth=Basic " + unsecuredJWT(`{"sub":"g"}`) + "\x01\x01"), ""},
		{"oauth no auth", MechanismOAuthBearer, []byte("n,,\x01x=y\x01\x01"), ""},
		{"oauth truncated", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"sub":"g"}`)), ""},
		{"oauth client's error reply", MechanismOAuthBearer, []byte("\x01"), ""},
		{"gssapi", "GSSAPI", []byte("whatever"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UserFromClientMessage(tt.mech, tt.msg)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := UserFromClientMessage("GSSAPI", nil); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("GSSAPI: %v", err)
	}
}
