package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/tollgate/tollgate/internal/principal"
)

func franzMechanism(mech string, a fscram.Auth) sasl.Mechanism {
	if mech == MechanismScramSHA512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

func xdgHash(mech string) xscram.HashGeneratorFcn {
	if mech == MechanismScramSHA512 {
		return xscram.SHA512
	}
	return xscram.SHA256
}

// exchange drives a full SCRAM exchange between the franz-go client and a
// server; it returns the server-first message and the final error.
func franzExchange(t *testing.T, srv Server, mech sasl.Mechanism) (serverFirst string, err error) {
	t.Helper()
	sess, first, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ch, done, err := srv.Step(first)
	if err != nil {
		return "", err
	}
	if done {
		t.Fatal("done after client-first")
	}
	_, final, err := sess.Challenge(ch)
	if err != nil {
		t.Fatalf("client rejected server-first %q: %v", ch, err)
	}
	ch2, done, err := srv.Step(final)
	if err != nil {
		return string(ch), err
	}
	if !done {
		t.Fatal("not done after client-final")
	}
	if ok, _, err := sess.Challenge(ch2); err != nil || !ok {
		t.Fatalf("client rejected server-final %q: %v", ch2, err)
	}
	return string(ch), nil
}

func TestScramFullExchange(t *testing.T) {
	store := testStore(t)
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		for _, tc := range []struct{ user, pass, zid string }{
			{"alice", "alice-secret", ""},
			{"alice", "alice-secret", "alice"},
			{"we=ird,name", "pw,with=odd chars", ""},
			{"we=ird,name", "pw,with=odd chars", "we=ird,name"},
		} {
			t.Run(mech+"/franz/"+tc.user+"/"+tc.zid, func(t *testing.T) {
				srv, err := NewServer(mech, store)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := franzExchange(t, srv, franzMechanism(mech, fscram.Auth{User: tc.user, Pass: tc.pass, Zid: tc.zid})); err != nil {
					t.Fatal(err)
				}
				if got := srv.Principal(); got != (principal.Principal{Type: "User", Name: tc.user}) {
					t.Fatalf("principal %v", got)
				}
				if _, _, err := srv.Step([]byte("c=biws")); err == nil {
					t.Fatal("Step after completion succeeded")
				}
			})
			t.Run(mech+"/xdg/"+tc.user+"/"+tc.zid, func(t *testing.T) {
				client, err := xdgHash(mech).NewClientUnprepped(tc.user, tc.pass, tc.zid)
				if err != nil {
					t.Fatal(err)
				}
				conv := client.NewConversation()
				srv, _ := NewServer(mech, store)
				c1, _ := conv.Step("")
				s1, done, err := srv.Step([]byte(c1))
				if err != nil || done {
					t.Fatalf("first: %v %v", done, err)
				}
				c2, err := conv.Step(string(s1))
				if err != nil {
					t.Fatal(err)
				}
				s2, done, err := srv.Step([]byte(c2))
				if err != nil || !done {
					t.Fatalf("final: %v %v", done, err)
				}
				if _, err := conv.Step(string(s2)); err != nil || !conv.Valid() {
					t.Fatalf("client did not verify the server: %v", err)
				}
				if srv.Principal().Name != tc.user {
					t.Fatalf("principal %v", srv.Principal())
				}
			})
		}
	}
}

// RFC 7677 §3's SCRAM-SHA-256 example, byte for byte.
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := scramCredentialFromSalt(MechanismScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	store := NewMemoryStore()
	if err := store.SetScram("user", cred); err != nil {
		t.Fatal(err)
	}
	srv, _ := NewServer(MechanismScramSHA256, store, withNonceGenerator(func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }))
	s1, _, err := srv.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(s1) != want {
		t.Fatalf("server-first %q, want %q", s1, want)
	}
	s2, done, err := srv.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("final: %v %v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(s2) != want {
		t.Fatalf("server-final %q, want %q", s2, want)
	}
}

// Our stored keys equal the ones xdg-go/scram derives.
func TestScramCredentialMatchesXDG(t *testing.T) {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		c, err := NewScramCredential(mech, "hunter2", 4096)
		if err != nil {
			t.Fatal(err)
		}
		client, _ := xdgHash(mech).NewClientUnprepped("u", "hunter2", "")
		want := client.GetStoredCredentials(xscram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations})
		if !bytes.Equal(c.StoredKey, want.StoredKey) || !bytes.Equal(c.ServerKey, want.ServerKey) {
			t.Fatalf("%s: keys differ from xdg-go/scram", mech)
		}
		if len(c.Salt) != 32 || !c.Verify("hunter2") || c.Verify("hunter3") {
			t.Fatalf("%s: salt %d bytes, verify broken", mech, len(c.Salt))
		}
	}
}

func TestScramWrongPasswordAndUnknownUser(t *testing.T) {
	store := testStore(t)
	secret := []byte("fixed test secret")
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			run := func(user, pass string) (string, error) {
				srv, _ := NewServer(mech, store, WithFakeSecret(secret))
				first, err := franzExchange(t, srv, franzMechanism(mech, fscram.Auth{User: user, Pass: pass}))
				if srv.Principal() != (principal.Principal{}) {
					t.Fatalf("principal set after failure")
				}
				return first, err
			}
			realFirst, wrong := run("alice", "not-alice-secret")
			fakeFirst, unknown := run("mallory", "whatever")
			fakeFirst2, _ := run("mallory", "other")
			otherFake, _ := run("trudy", "whatever")
			if wrong == nil || unknown == nil {
				t.Fatalf("wrong=%v unknown=%v", wrong, unknown)
			}
			if wrong != unknown || wrong.Error() != unknown.Error() || ClientMessage(wrong) != "Authentication failed: Invalid user credentials" {
				t.Fatalf("errors differ: %v vs %v", wrong, unknown)
			}
			// Same shape: salt of the same length, same iterations.
			rs, ri := saltAndIters(t, realFirst)
			fs, fi := saltAndIters(t, fakeFirst)
			if len(rs) != len(fs) || ri != fi {
				t.Fatalf("fake server-first %q does not look like real %q", fakeFirst, realFirst)
			}
			// Deterministic per user, different between users.
			fs2, _ := saltAndIters(t, fakeFirst2)
			os, _ := saltAndIters(t, otherFake)
			if !bytes.Equal(fs, fs2) || bytes.Equal(fs, os) {
				t.Fatal("fake salt is not deterministic per user")
			}
			// A different server secret gives a different fake salt.
			srv, _ := NewServer(mech, store, WithFakeSecret([]byte("another secret")))
			ch, _, _ := srv.Step([]byte("n,,n=mallory,r=abc"))
			if s, _ := saltAndIters(t, string(ch)); bytes.Equal(s, fs) {
				t.Fatal("fake salt does not depend on the secret")
			}
		})
	}
	// A user with only SCRAM-SHA-256 is unknown to SCRAM-SHA-512, and
	// looks the same as any unknown user.
	srv, _ := NewServer(MechanismScramSHA512, store)
	if _, err := franzExchange(t, srv, fscram.Auth{User: "carol", Pass: "only-256"}.AsSha512Mechanism()); err != errScramCredentials {
		t.Fatalf("carol over SHA-512: %v", err)
	}
	srv, _ = NewServer(MechanismScramSHA256, store)
	if _, err := franzExchange(t, srv, fscram.Auth{User: "carol", Pass: "only-256"}.AsSha256Mechanism()); err != nil {
		t.Fatalf("carol over SHA-256: %v", err)
	}
}

func saltAndIters(t *testing.T, serverFirst string) ([]byte, string) {
	t.Helper()
	f := strings.Split(serverFirst, ",")
	if len(f) != 3 || !strings.HasPrefix(f[1], "s=") || !strings.HasPrefix(f[2], "i=") {
		t.Fatalf("bad server-first %q", serverFirst)
	}
	s, err := base64.StdEncoding.DecodeString(f[1][2:])
	if err != nil {
		t.Fatal(err)
	}
	return s, f[2][2:]
}

func TestScramRejects(t *testing.T) {
	store := testStore(t)
	const mech = MechanismScramSHA256
	// A valid client-first and a matching client-final, from the xdg
	// client, to be mangled.
	valid := func(t *testing.T, user, zid string) (srv Server, final string) {
		client, _ := xscram.SHA256.NewClientUnprepped(user, "alice-secret", zid)
		conv := client.NewConversation()
		srv, _ = NewServer(mech, store)
		c1, _ := conv.Step("")
		s1, _, err := srv.Step([]byte(c1))
		if err != nil {
			t.Fatal(err)
		}
		c2, err := conv.Step(string(s1))
		if err != nil {
			t.Fatal(err)
		}
		return srv, c2
	}
	firsts := []struct {
		name, msg, wantMsg string
	}{
		{"empty", "", ""},
		{"truncated gs2", "n,", ""},
		{"truncated user", "n,,n=alice", ""},
		{"empty nonce", "n,,n=alice,r=", ""},
		{"no user", "n,,r=abc", ""},
		{"empty user", "n,,n=,r=abc", ""},
		{"bad escape", "n,,n=al=ice,r=abc", ""},
		{"non-ascii user", "n,,n=jürgen,r=abc", ""},
		{"channel binding y", "y,,n=alice,r=abc", ""},
		{"channel binding p", "p=tls-unique,,n=alice,r=abc", ""},
		{"mandatory extension", "n,,m=x,n=alice,r=abc", ""},
		{"bad extension", "n,,n=alice,r=abc,9=x", ""},
		{"empty extension", "n,,n=alice,r=abc,", ""},
		{"repeated extension", "n,,n=alice,r=abc,x=1,x=2", ""},
		{"tokenauth", "n,,n=alice,r=abc,tokenauth=true", ""},
		{"tokenauth upper", "n,,n=alice,r=abc,tokenauth=TRUE", ""},
		{"authzid differs", "n,a=bob,n=alice,r=abc", msgAuthzidMismatch},
		{"authzid differs unknown user", "n,a=bob,n=nobody,r=abc", msgAuthzidMismatch},
	}
	for _, tt := range firsts {
		t.Run("first/"+tt.name, func(t *testing.T) {
			srv, _ := NewServer(mech, store)
			ch, done, err := srv.Step([]byte(tt.msg))
			if err == nil || done || ch != nil {
				t.Fatalf("accepted: %q %v", ch, done)
			}
			want := tt.wantMsg
			if want == "" {
				want = genericFailure(mech, "").Message
			}
			if !errors.Is(err, ErrAuthenticationFailed) || ClientMessage(err) != want {
				t.Fatalf("err %v, want message %q", err, want)
			}
			if _, _, err := srv.Step([]byte("c=biws,r=abc,p=AAAA")); err == nil {
				t.Fatal("Step after failure succeeded")
			}
		})
	}
	// Kafka's tokenauth=false is an ordinary login.
	t.Run("first/tokenauth false", func(t *testing.T) {
		srv, _ := NewServer(mech, store)
		if _, _, err := srv.Step([]byte("n,,n=alice,r=abc,tokenauth=false")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("franz IsToken", func(t *testing.T) {
		srv, _ := NewServer(mech, store)
		if _, err := franzExchange(t, srv, fscram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}.AsSha256Mechanism()); err == nil {
			t.Fatal("tokenauth accepted")
		}
	})

	finals := []struct {
		name   string
		mangle func(final string) string
	}{
		{"empty", func(string) string { return "" }},
		{"truncated before proof", func(f string) string { return f[:strings.LastIndex(f, ",p=")] }},
		{"truncated proof", func(f string) string { return f[:len(f)-8] }},
		{"bad nonce", func(f string) string { return strings.Replace(f, ",r=", ",r=x", 1) }},
		{"nonce prefix only", func(f string) string {
			i, j := strings.Index(f, ",r="), strings.Index(f, ",p=")
			return f[:i+3+5] + f[j:]
		}},
		{"wrong channel binding", func(f string) string { return strings.Replace(f, "c=biws", "c=eSws", 1) }},
		{"bad base64 proof", func(f string) string { return f[:strings.LastIndex(f, ",p=")] + ",p=!!!!" }},
		{"proof with newline", func(f string) string {
			i := strings.LastIndex(f, ",p=")
			return f[:i+5] + "\n" + f[i+5:]
		}},
		{"flipped proof", func(f string) string {
			i := strings.LastIndex(f, ",p=")
			p, _ := base64.StdEncoding.DecodeString(f[i+3:])
			p[0] ^= 1
			return f[:i+3] + base64.StdEncoding.EncodeToString(p)
		}},
		{"short proof", func(f string) string { return f[:strings.LastIndex(f, ",p=")] + ",p=AAAA" }},
		{"extra field", func(f string) string { return f + ",x=y" }},
	}
	for _, tt := range finals {
		t.Run("final/"+tt.name, func(t *testing.T) {
			srv, final := valid(t, "alice", "")
			ch, done, err := srv.Step([]byte(tt.mangle(final)))
			if err == nil || done || ch != nil {
				t.Fatalf("accepted %q", tt.mangle(final))
			}
			if ClientMessage(err) != msgInvalidUserCredentials {
				t.Fatalf("err %v", err)
			}
		})
	}
	t.Run("final/unmangled", func(t *testing.T) {
		srv, final := valid(t, "alice", "alice")
		if _, done, err := srv.Step([]byte(final)); err != nil || !done {
			t.Fatalf("%v %v", done, err)
		}
	})
	t.Run("final/extension", func(t *testing.T) {
		// Extensions between nonce and proof are part of the signed
		// message; an added one breaks the proof.
		srv, final := valid(t, "alice", "")
		i := strings.LastIndex(final, ",p=")
		if _, _, err := srv.Step([]byte(final[:i] + ",ext=1" + final[i:])); ClientMessage(err) != msgInvalidUserCredentials {
			t.Fatalf("err %v", err)
		}
	})
}

func TestScramCredentialFormat(t *testing.T) {
	c, err := NewScramCredential(MechanismScramSHA512, "pw", 8192)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Format()
	if !strings.HasPrefix(s, "salt=") || !strings.HasSuffix(s, ",iterations=8192") || !strings.Contains(s, ",stored_key=") || !strings.Contains(s, ",server_key=") {
		t.Fatalf("format %q", s)
	}
	back, err := ParseScramCredential(MechanismScramSHA512, s)
	if err != nil || !back.Verify("pw") || back.Iterations != 8192 {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{
		"",
		"salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096",   // short keys
		strings.Replace(s, "iterations=8192", "iterations=1000", 1),   // too few
		strings.Replace(s, "iterations=8192", "iterations=100000", 1), // too many
		strings.Replace(s, "iterations=8192", "iterations=x", 1),      // not a number
		s + ",extra=1",                                // unknown field
		s + ",iterations=4096",                        // repeated
		strings.Replace(s, "salt=", "salt=!", 1),      // bad base64
		strings.Replace(s, ",iterations=8192", "", 1), // missing
		"salt=,stored_key=" + s[strings.Index(s, "stored_key=")+len("stored_key="):], // empty salt
	} {
		if _, err := ParseScramCredential(MechanismScramSHA512, bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := ParseScramCredential(MechanismScramSHA256, s); err == nil {
		t.Error("SHA-512 keys accepted as SHA-256")
	}
	for _, tc := range []struct {
		mech string
		iter int
	}{{"SCRAM-SHA-1", 4096}, {MechanismScramSHA256, 4095}, {MechanismScramSHA256, 16385}} {
		if _, err := NewScramCredential(tc.mech, "pw", tc.iter); err == nil {
			t.Errorf("NewScramCredential(%s, %d) accepted", tc.mech, tc.iter)
		}
	}
	if _, err := NewScramCredential(MechanismScramSHA256, "", 0); err == nil {
		t.Error("empty password accepted")
	}
}

func fscramAuth(user, pass string) fscram.Auth { return fscram.Auth{User: user, Pass: pass} }
