package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// librdkafka before 2.6.1 repeats its client nonce in front of the combined
// nonce in client-final (librdkafka#4895). Tollgate accepts a nonce that
// ends with the combined one, as Kafka 3.8.1 to 3.9 did, and still checks
// the proof over the messages as exchanged.
func TestScramLegacyLibrdkafkaNonce(t *testing.T) {
	store := NewMemoryStore()
	if err := store.SetPassword("alice", "secret", 4096); err != nil {
		t.Fatal(err)
	}
	run := func(password string) error {
		srv, err := NewServer(MechanismScramSHA256, NewLookup(store, nil))
		if err != nil {
			t.Fatal(err)
		}
		cnonce := "fyko+d2lbbFgONRv9qkxdawL"
		bare := "n=alice,r=" + cnonce
		sf, _, err := srv.Step([]byte("n,," + bare))
		if err != nil {
			t.Fatal(err)
		}
		var nonce, salt string
		var iters int
		for _, f := range strings.Split(string(sf), ",") {
			switch {
			case strings.HasPrefix(f, "r="):
				nonce = f[2:]
			case strings.HasPrefix(f, "s="):
				salt = f[2:]
			case strings.HasPrefix(f, "i="):
				for _, c := range f[2:] {
					iters = iters*10 + int(c-'0')
				}
			}
		}
		rawSalt, _ := base64.StdEncoding.DecodeString(salt)
		salted, _ := pbkdf2.Key(sha256.New, password, rawSalt, iters, sha256.Size)
		mac := func(key []byte, msg string) []byte {
			h := hmac.New(sha256.New, key)
			h.Write([]byte(msg))
			return h.Sum(nil)
		}
		clientKey := mac(salted, "Client Key")
		storedKey := sha256.Sum256(clientKey)
		withoutProof := "c=biws,r=" + cnonce + nonce // the legacy, doubled nonce
		sig := mac(storedKey[:], bare+","+string(sf)+","+withoutProof)
		proof := make([]byte, len(sig))
		for i := range sig {
			proof[i] = clientKey[i] ^ sig[i]
		}
		final, done, err := srv.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
		if err != nil {
			return err
		}
		wantSig := mac(mac(salted, "Server Key"), bare+","+string(sf)+","+withoutProof)
		if !done || string(final) != "v="+base64.StdEncoding.EncodeToString(wantSig) || srv.Principal().Name != "alice" {
			t.Fatalf("done %v, final %q, principal %v", done, final, srv.Principal())
		}
		return nil
	}
	if err := run("secret"); err != nil {
		t.Fatalf("legacy nonce with the right password: %v", err)
	}
	if err := run("wrong"); err == nil {
		t.Fatal("legacy nonce with a wrong password accepted")
	}
}
