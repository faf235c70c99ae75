package auth

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/principal"
)

func TestAPIKeys(t *testing.T) {
	store := NewMemoryStore()
	k1plain, k1, err := NewAPIKey("team-a")
	if err != nil {
		t.Fatal(err)
	}
	k2plain, k2, _ := NewAPIKey("team-a") // a second key of the same identity
	k3plain, k3, _ := NewAPIKey("team-b")
	for _, k := range []APIKey{k1, k2, k3} {
		if err := store.AddAPIKey(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.AddAPIKey(k1); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if !regexp.MustCompile(`^tg_[a-z2-7]{16}_[a-z2-7]{52}$`).MatchString(k1plain) {
		t.Fatalf("plaintext layout %q", k1plain)
	}
	if strings.Contains(k1plain, string(k1.Hash)) || k1.Created.IsZero() || k1.Revoked {
		t.Fatalf("stored key %+v", k1)
	}
	if id, ok := ParseAPIKey(k1plain); !ok || id != k1.ID {
		t.Fatalf("ParseAPIKey = %q, %v", id, ok)
	}
	if k1.ID == k2.ID || k1plain == k2plain {
		t.Fatal("keys not unique")
	}

	// wrong secret: same id, one character of the secret changed.
	flip := []byte(k1plain)
	if flip[len(flip)-1] == 'a' {
		flip[len(flip)-1] = 'b'
	} else {
		flip[len(flip)-1] = 'a'
	}
	// other id: a valid-looking key whose id is not stored.
	unknown := "tg_" + strings.Repeat("a", 16) + "_" + k1plain[len(k1plain)-52:]
	// swapped: key 3's secret under key 1's id.
	swapped := "tg_" + k1.ID + "_" + k3plain[len(k3plain)-52:]

	tests := []struct {
		name, key, want string
	}{
		{"key 1", k1plain, "team-a"},
		{"key 2, same identity", k2plain, "team-a"},
		{"key 3", k3plain, "team-b"},
		{"wrong secret", string(flip), ""},
		{"unknown id", unknown, ""},
		{"swapped secret", swapped, ""},
		{"no prefix", strings.TrimPrefix(k1plain, "tg_"), ""},
		{"truncated", k1plain[:len(k1plain)-1], ""},
		{"upper case", strings.ToUpper(k1plain), ""},
		{"empty", "", ""},
		{"garbage", "tg__", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := VerifyAPIKey(store, tt.key)
			if tt.want == "" {
				if ok {
					t.Fatalf("accepted as %v", p)
				}
				return
			}
			if !ok || p != (principal.Principal{Type: "User", Name: tt.want}) {
				t.Fatalf("got %v %v, want %s", p, ok, tt.want)
			}
			// Through SASL/PLAIN with user "token".
			srv, _ := NewServer(MechanismPlain, store)
			if _, done, err := srv.Step([]byte("\x00token\x00" + tt.key)); err != nil || !done || srv.Principal().Name != tt.want {
				t.Fatalf("PLAIN: %v %v %v", done, err, srv.Principal())
			}
		})
	}

	// Revocation takes effect at once; other keys of the identity stay.
	if !store.RevokeAPIKey(k1.ID) || store.RevokeAPIKey("nope") {
		t.Fatal("RevokeAPIKey")
	}
	if _, ok := VerifyAPIKey(store, k1plain); ok {
		t.Fatal("revoked key accepted")
	}
	if p, ok := VerifyAPIKey(store, k2plain); !ok || p.Name != "team-a" {
		t.Fatal("other key of the identity lost")
	}
	if _, ok := VerifyAPIKey(nil, k2plain); ok {
		t.Fatal("nil APIKeys accepted")
	}
	if _, _, err := NewAPIKey(""); err == nil {
		t.Fatal("empty identity accepted")
	}
	if err := store.AddAPIKey(APIKey{ID: "short", Identity: "x", Hash: make([]byte, 32)}); err == nil {
		t.Fatal("malformed id accepted")
	}
}

func TestNewLookup(t *testing.T) {
	users := testStore(t)
	keys := NewMemoryStore()
	plain, k, _ := NewAPIKey("svc")
	if err := keys.AddAPIKey(k); err != nil {
		t.Fatal(err)
	}
	l := NewLookup(users, keys)
	if p, ok := l.Plain("alice", "alice-secret"); !ok || p.Name != "alice" {
		t.Fatal("password via SCRAM credential")
	}
	if p, ok := l.Plain(APIKeyUser, plain); !ok || p.Name != "svc" {
		t.Fatal("API key")
	}
	if _, ok := l.Plain("alice", "nope"); ok {
		t.Fatal("wrong password")
	}
	if _, ok := l.Scram("alice", MechanismScramSHA256); !ok {
		t.Fatal("Scram not delegated")
	}
	// Without API keys, "token" is an ordinary (unknown) user.
	if _, ok := NewLookup(users, nil).Plain(APIKeyUser, plain); ok {
		t.Fatal("API key accepted without APIKeys")
	}
	// Without users, only API keys work.
	l = NewLookup(nil, keys)
	if _, ok := l.Plain("alice", "alice-secret"); ok {
		t.Fatal("password accepted without users")
	}
	if _, ok := l.Scram("alice", MechanismScramSHA256); ok {
		t.Fatal("Scram without users")
	}
	if _, ok := l.Plain(APIKeyUser, plain); !ok {
		t.Fatal("API key without users")
	}
}

func TestMemoryStore(t *testing.T) {
	m := testStore(t)
	if got := strings.Join(m.Users(), ","); got != "alice,bob,carol,we=ird,name" {
		t.Fatalf("users %q", got)
	}
	if err := m.SetPassword(APIKeyUser, "x", 0); err == nil {
		t.Fatal("reserved user name accepted")
	}
	if err := m.SetScram("", ScramCredential{}); err == nil {
		t.Fatal("empty user accepted")
	}
	if err := m.SetScram("x", ScramCredential{Mechanism: MechanismScramSHA256, Iterations: 4096}); err == nil {
		t.Fatal("invalid credential accepted")
	}
	m.DeleteUser("bob")
	if _, ok := m.Plain("bob", "bob-secret"); ok {
		t.Fatal("deleted user still logs in")
	}
	other := NewMemoryStore()
	_ = other.SetPassword("dave", "dave-pw", 0)
	m.Replace(other)
	if _, ok := m.Plain("alice", "alice-secret"); ok {
		t.Fatal("Replace kept old users")
	}
	if _, ok := m.Plain("dave", "dave-pw"); !ok {
		t.Fatal("Replace lost new users")
	}
}

func TestCredentialFile(t *testing.T) {
	alice, err := NewCredentialFileUser("alice", "alice-pw", 8192)
	if err != nil {
		t.Fatal(err)
	}
	odd, _ := NewCredentialFileUser("o,d=d", "pw", 0)
	plain, key, _ := NewAPIKey("team-a")
	revokedPlain, revoked, _ := NewAPIKey("team-a")
	revoked.Revoked = true
	f := CredentialFile{
		Users:   []CredentialFileUser{alice, odd},
		APIKeys: []CredentialFileAPIKey{NewCredentialFileAPIKey(key), NewCredentialFileAPIKey(revoked)},
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "alice-pw") || strings.Contains(string(data), plain) {
		t.Fatal("plaintext in the credential file")
	}
	path := filepath.Join(t.TempDir(), "credentials.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := LoadCredentialFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if _, ok := store.Plain("alice", "alice-pw"); !ok {
		t.Fatal("alice via PLAIN")
	}
	if c, ok := store.Scram("alice", MechanismScramSHA256); !ok || c.Iterations != 8192 {
		t.Fatal("alice SCRAM-SHA-256")
	}
	if _, ok := store.Plain("o,d=d", "pw"); !ok {
		t.Fatal("odd name")
	}
	if p, ok := store.Plain(APIKeyUser, plain); !ok || p.Name != "team-a" {
		t.Fatal("API key from file")
	}
	if _, ok := store.Plain(APIKeyUser, revokedPlain); ok {
		t.Fatal("revoked key from file accepted")
	}
	// The file authenticates a real SCRAM exchange.
	srv, _ := NewServer(MechanismScramSHA512, store)
	if _, err := franzExchangeSHA512(t, srv, "alice", "alice-pw"); err != nil {
		t.Fatal(err)
	}

	if s, err := ParseCredentialFile(nil); err != nil || len(s.Users()) != 0 {
		t.Fatalf("empty file: %v", err)
	}
	sha := alice.Scram[MechanismScramSHA256]
	bad := []string{
		"users: [{name: a, scram: {SCRAM-SHA-256: '" + sha + "'}}, {name: a, scram: {SCRAM-SHA-256: '" + sha + "'}}]", // duplicate
		"users: [{name: a}]", // no credentials
		"users: [{name: a, scram: {SCRAM-SHA-1: '" + sha + "'}}]",   // unknown mechanism
		"users: [{name: a, scram: {SCRAM-SHA-512: '" + sha + "'}}]", // wrong key length
		"users: [{name: token, scram: {SCRAM-SHA-256: '" + sha + "'}}]",
		"users: [{name: a, password: x}]", // unknown field: no plaintext
		"api_keys: [{id: x, identity: y, sha256: zz}]",
		"api_keys: [{id: " + key.ID + ", identity: '', sha256: " + strings.Repeat("00", 32) + "}]",
		"nonsense: true",
	}
	for _, b := range bad {
		if _, err := ParseCredentialFile([]byte(b)); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
	if _, err := LoadCredentialFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file accepted")
	}
	if _, err := NewCredentialFileUser(APIKeyUser, "x", 0); err == nil {
		t.Fatal("reserved name accepted")
	}
}

func franzExchangeSHA512(t *testing.T, srv Server, user, pass string) (string, error) {
	t.Helper()
	return franzExchange(t, srv, franzMechanism(MechanismScramSHA512, fscramAuth(user, pass)))
}
