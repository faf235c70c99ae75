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

func TestPassthroughIdentity(t *testing.T) {
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
		claim      string
	}{
		{"plain franz", MechanismPlain, firstMessage(t, plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()), "alice", ""},
		{"plain authzid", MechanismPlain, []byte("alice\x00alice\x00pw"), "alice", ""},
		{"plain api key", MechanismPlain, []byte("\x00token\x00tg_x"), "token", ""},
		{"plain truncated", MechanismPlain, []byte("\x00alice"), "", ""},
		{"plain empty", MechanismPlain, nil, "", ""},
		{"scram-256 franz", MechanismScramSHA256, firstMessage(t, fscram.Auth{User: "bob", Pass: "pw"}.AsSha256Mechanism()), "bob", ""},
		{"scram-512 franz escaped", MechanismScramSHA512, firstMessage(t, fscram.Auth{User: "b=o,b", Pass: "pw", Zid: "b=o,b"}.AsSha512Mechanism()), "b=o,b", ""},
		{"scram-512 xdg", MechanismScramSHA512, xdgFirst("dave"), "dave", ""},
		// A delegation token names a token id, and the broker never says
		// whose it is: refused, not bound to the id.
		{"scram token", MechanismScramSHA256, firstMessage(t, fscram.Auth{User: "tokenid", Pass: "hmac", IsToken: true}.AsSha256Mechanism()), "", ""},
		{"scram reserved m=", MechanismScramSHA256, []byte("n,,m=ext,n=bob,r=abc"), "", ""},
		{"scram authzid of another user", MechanismScramSHA256, []byte("n,a=admin,n=bob,r=abc"), "", ""},
		{"plain authzid of another user", MechanismPlain, []byte("admin\x00bob\x00pw"), "", ""},
		{"scram truncated", MechanismScramSHA256, []byte("n,,n=bob"), "", ""},
		{"scram final instead of first", MechanismScramSHA256, []byte("c=biws,r=abc,p=AAAA"), "", ""},
		{"oauth franz", MechanismOAuthBearer, firstMessage(t, oauth.Auth{Token: unsecuredJWT(`{"sub":"erin","iat":1}`)}.AsMechanism()), "erin", ""},
		{"oauth extensions and authzid", MechanismOAuthBearer, firstMessage(t, oauth.Auth{Zid: "frank", Token: unsecuredJWT(`{"sub":"frank"}`), Extensions: map[string]string{"traceId": "abc", "x": "y z"}}.AsMechanism()), "frank", ""},
		{"oauth signed token", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + signed + "\x01\x01"), "carol", ""},
		{"oauth lower-case scheme", MechanismOAuthBearer, []byte("n,,\x01auth=bearer " + unsecuredJWT(`{"sub":"g"}`) + "\x01\x01"), "g", ""},
		{"oauth no sub", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"iss":"x"}`) + "\x01\x01"), "", ""},
		{"oauth configured claim", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"sub":"svc-123","preferred_username":"hank"}`) + "\x01\x01"), "hank", "preferred_username"},
		{"oauth configured claim missing", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"sub":"hank"}`) + "\x01\x01"), "", "preferred_username"},
		{"oauth authzid of another principal", MechanismOAuthBearer, []byte("n,a=admin,\x01auth=Bearer " + unsecuredJWT(`{"sub":"ivy"}`) + "\x01\x01"), "", ""},
		{"oauth numeric sub", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"sub":42}`) + "\x01\x01"), "", ""},
		{"oauth not a jwt", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer opaque\x01\x01"), "", ""},
		{"oauth bad payload", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer a.!!!.b\x01\x01"), "", ""},
		{"oauth basic scheme", MechanismOAuthBearer, []byte("n,,\x01auth=Basic " + unsecuredJWT(`{"sub":"g"}`) + "\x01\x01"), "", ""},
		{"oauth no auth", MechanismOAuthBearer, []byte("n,,\x01x=y\x01\x01"), "", ""},
		{"oauth truncated", MechanismOAuthBearer, []byte("n,,\x01auth=Bearer " + unsecuredJWT(`{"sub":"g"}`)), "", ""},
		{"oauth client's error reply", MechanismOAuthBearer, []byte("\x01"), "", ""},
		{"gssapi", "GSSAPI", []byte("whatever"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PassthroughIdentity(tt.mech, tt.msg, tt.claim)
			if tt.want == "" {
				if err == nil || !errors.Is(err, ErrNoIdentity) {
					t.Fatalf("got %q, %v; want an ErrNoIdentity", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := PassthroughIdentity("GSSAPI", nil, ""); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("GSSAPI: %v", err)
	}
}

// A pass-through login completes only when the broker's exchange has:
// Kafka's servers answer an invalid OAUTHBEARER token with error 0 and a
// JSON error challenge, and a SCRAM client-first with the server-first
// message; neither is a login.
func TestExchangeComplete(t *testing.T) {
	for _, tt := range []struct {
		name, mech       string
		step             int
		msg              string
		complete, failed bool
	}{
		{"plain ok", MechanismPlain, 0, "", true, false},
		{"oauth valid token", MechanismOAuthBearer, 0, "", true, false},
		{"oauth invalid token challenge", MechanismOAuthBearer, 0, `{"status":"invalid_token"}`, false, false},
		{"scram server-first", MechanismScramSHA256, 0, "r=abc,s=c2FsdA==,i=4096", false, false},
		{"scram server-final", MechanismScramSHA512, 1, "v=c2lnbmF0dXJl", true, false},
		{"scram server-final too early", MechanismScramSHA256, 0, "v=c2lnbmF0dXJl", false, true},
		{"scram server-first too late", MechanismScramSHA256, 1, "r=abc,s=c2FsdA==,i=4096", false, true},
		{"scram server-error", MechanismScramSHA256, 1, "e=invalid-proof", false, true},
		{"unknown mechanism", "GSSAPI", 0, "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, f := ExchangeComplete(tt.mech, tt.step, []byte(tt.msg))
			if c != tt.complete || f != tt.failed {
				t.Fatalf("ExchangeComplete = %v, %v; want %v, %v", c, f, tt.complete, tt.failed)
			}
		})
	}
}

func TestCarriesIdentity(t *testing.T) {
	for _, tt := range []struct {
		mech string
		step int
		msg  string
		want bool
	}{
		{MechanismPlain, 0, "\x00a\x00b", true},
		{MechanismScramSHA256, 0, "n,,n=a,r=x", true},
		{MechanismScramSHA256, 1, "c=biws,r=x,p=AA==", false},
		{MechanismOAuthBearer, 0, "n,,\x01auth=Bearer a.b.c\x01\x01", true},
		{MechanismOAuthBearer, 1, "\x01", false},
		// After an error challenge Kafka's server evaluates any other
		// message as a new token: its identity is the one that counts.
		{MechanismOAuthBearer, 1, "n,,\x01auth=Bearer d.e.f\x01\x01", true},
	} {
		if got := CarriesIdentity(tt.mech, tt.step, []byte(tt.msg)); got != tt.want {
			t.Errorf("CarriesIdentity(%s, %d, %q) = %v, want %v", tt.mech, tt.step, tt.msg, got, tt.want)
		}
	}
}
