package auth

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// storeWith holds n users whose credentials for mech have the given salt
// and iterations (as Kafka's tools or kadm would have made them).
func storeWith(t testing.TB, mech string, n int, salt func() []byte, iterations int) *MemoryStore {
	t.Helper()
	m := NewMemoryStore()
	for i := range n {
		c, err := scramCredentialFromSalt(mech, "pw", salt(), iterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetScram("user"+strconv.Itoa(i), c); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func randomSalt(n int) func() []byte {
	return func() []byte { b := make([]byte, n); rand.Read(b); return b }
}

// kafkaSalt is a salt as Kafka's ScramFormatter makes: a 130-bit random
// number in base 36, as bytes.
func kafkaSalt() []byte {
	b := make([]byte, 26)
	rand.Read(b)
	for i := range b {
		b[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[int(b[i])%36]
	}
	return b
}

// An unknown user's SCRAM credential has the shape most of the real ones
// of the mechanism have — salt length, alphabet, iteration count — and is
// the same for the same name and secret, whoever asks and when.
func TestDecoysShapedLikeTheStore(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		name  string
		store *MemoryStore
		want  ScramShape
	}{
		{"kadm (24-byte salts)", storeWith(t, MechanismScramSHA512, 3, randomSalt(24), 8192), ScramShape{24, 8192, false}},
		{"kafka-configs (base-36 salts)", storeWith(t, MechanismScramSHA512, 3, kafkaSalt, 4096), ScramShape{26, 4096, true}},
		{"Tollgate's own", storeWith(t, MechanismScramSHA512, 3, randomSalt(32), 4096), ScramShape{32, 4096, false}},
		{"empty", NewMemoryStore(), ScramShape{32, 4096, false}},
	} {
		d, err := NewDecoys(secret, tc.store)
		if err != nil {
			t.Fatal(err)
		}
		c := d.Scram("mallory", MechanismScramSHA512)
		if got := ShapeOf(c); got != tc.want || c.validate(MechanismScramSHA512) != nil {
			t.Errorf("%s: decoy shape %+v, want %+v", tc.name, got, tc.want)
		}
		again, _ := NewDecoys(secret, tc.store)
		if c2 := again.Scram("mallory", MechanismScramSHA512); !bytes.Equal(c.Salt, c2.Salt) || !bytes.Equal(c.StoredKey, c2.StoredKey) {
			t.Errorf("%s: not deterministic", tc.name)
		}
		if bytes.Equal(c.Salt, d.Scram("trudy", MechanismScramSHA512).Salt) {
			t.Errorf("%s: two names, one salt", tc.name)
		}
	}
	// The majority wins; the server shows it.
	m := storeWith(t, MechanismScramSHA256, 5, randomSalt(24), 8192)
	c, _ := NewScramCredential(MechanismScramSHA256, "pw", 4096)
	m.SetScram("odd", c)
	srv, _ := NewServer(MechanismScramSHA256, NewLookup(m, nil))
	ch, _, err := srv.Step([]byte("n,,n=mallory,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	if s, i := saltAndIters(t, string(ch)); len(s) != 24 || i != "8192" {
		t.Fatalf("server-first for an unknown user: %q", ch)
	}
}

// PLAIN for an unknown user checks the password against a decoy of the
// mechanism and iteration count a known user's check takes.
func TestPlainDecoyCostsTheSame(t *testing.T) {
	for _, tc := range []struct {
		name       string
		store      *MemoryStore
		mech       string
		iterations int
	}{
		{"SHA-256 users at 8192", storeWith(t, MechanismScramSHA256, 2, randomSalt(24), 8192), MechanismScramSHA256, 8192},
		{"SHA-512 users at 16384", storeWith(t, MechanismScramSHA512, 2, randomSalt(24), 16384), MechanismScramSHA512, 16384},
		{"no users", NewMemoryStore(), MechanismScramSHA512, DefaultIterations},
	} {
		d, _ := NewDecoys(bytes.Repeat([]byte{1}, 32), tc.store)
		if c := d.Plain("mallory"); c.Mechanism != tc.mech || c.Iterations != tc.iterations {
			t.Errorf("%s: decoy %s/%d, want %s/%d", tc.name, c.Mechanism, c.Iterations, tc.mech, tc.iterations)
		}
	}
	// Both: PLAIN takes SHA-512 for a user who has it.
	m := storeWith(t, MechanismScramSHA256, 2, randomSalt(24), 4096)
	c, _ := NewScramCredential(MechanismScramSHA512, "pw", 8192)
	m.SetScram("user0", c)
	d, _ := NewDecoys(bytes.Repeat([]byte{1}, 32), m)
	if c := d.Plain("mallory"); c.Mechanism != MechanismScramSHA512 || c.Iterations != 8192 {
		t.Errorf("mixed store: decoy %s/%d", c.Mechanism, c.Iterations)
	}
}

// The secret is made once, kept 0600, and read back after a restart; a
// file that is not a secret is an error, never overwritten.
func TestLoadOrCreateSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decoy.key")
	a, err := LoadOrCreateSecret(path)
	if err != nil || len(a) != SecretSize {
		t.Fatalf("%d bytes, %v", len(a), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	b, err := LoadOrCreateSecret(path)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatal("not the same secret the second time")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".secret-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	os.WriteFile(path, []byte("short"), 0o600)
	if _, err := LoadOrCreateSecret(path); err == nil {
		t.Fatal("a 5-byte file taken as the secret")
	}
	if got, _ := os.ReadFile(path); string(got) != "short" {
		t.Fatal("the file was overwritten")
	}
	if _, err := LoadOrCreateSecret(filepath.Join(dir, "missing", "decoy.key")); err == nil {
		t.Fatal("no error in a missing directory")
	}
	if _, err := NewDecoys([]byte("short"), nil); err == nil {
		t.Fatal("a short secret accepted")
	}
}

// decoyBenchConfigs are the mechanisms and iteration counts the PLAIN
// benchmarks compare known and unknown users under.
var decoyBenchConfigs = []struct {
	mech       string
	iterations int
}{{MechanismScramSHA256, 4096}, {MechanismScramSHA512, 4096}, {MechanismScramSHA256, 8192}}

// decoyBenchLookup is a lookup with decoys over three users of mech.
func decoyBenchLookup(b *testing.B, mech string, iterations int) CredentialLookup {
	m := storeWith(b, mech, 3, randomSalt(24), iterations)
	d, _ := NewDecoys(bytes.Repeat([]byte{1}, 32), m)
	return NewLookupDecoys(m, nil, d)
}

// PLAIN: known user (right and wrong password) and unknown user, side by
// side, for each mechanism and iteration count the store may hold. The
// unknown user's ns/op must match the known user's.
//
//	go test -run - -bench PlainKnownVsUnknown -benchtime 20x ./internal/auth
func BenchmarkPlainKnownVsUnknown(b *testing.B) {
	for _, cfg := range decoyBenchConfigs {
		l := decoyBenchLookup(b, cfg.mech, cfg.iterations)
		name := cfg.mech + "-" + strconv.Itoa(cfg.iterations)
		for _, u := range []struct{ name, user, pass string }{
			{"known", "user1", "pw"}, {"known-wrong-password", "user1", "nope"}, {"unknown", "mallory", "pw"},
		} {
			b.Run(name+"/"+u.name, func(b *testing.B) {
				for b.Loop() {
					l.Plain(u.user, u.pass)
				}
			})
		}
	}
}

// The same comparison with the two checks interleaved, so that both see
// the same machine load (a shared machine's noise otherwise dominates):
// known-ns/op and unknown-ns/op are reported side by side.
func BenchmarkPlainKnownVsUnknownInterleaved(b *testing.B) {
	for _, cfg := range decoyBenchConfigs {
		l := decoyBenchLookup(b, cfg.mech, cfg.iterations)
		b.Run(cfg.mech+"-"+strconv.Itoa(cfg.iterations), func(b *testing.B) {
			var known, unknown time.Duration
			first := true
			for b.Loop() {
				// Alternate which goes first: no order effect.
				for _, u := range [2]bool{first, !first} {
					t0 := time.Now()
					if u {
						l.Plain("user1", "nope")
						known += time.Since(t0)
					} else {
						l.Plain("mallory", "nope")
						unknown += time.Since(t0)
					}
				}
				first = !first
			}
			b.ReportMetric(float64(known.Nanoseconds())/float64(b.N), "known-ns/op")
			b.ReportMetric(float64(unknown.Nanoseconds())/float64(b.N), "unknown-ns/op")
		})
	}
}
