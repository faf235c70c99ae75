package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

var (
	secretA = []byte("0123456789abcdef0123456789abcdef-a")
	secretB = []byte("0123456789abcdef0123456789abcdef-b")
)

// clock is an explicit clock for the grace period.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func keyring(t *testing.T, cfg KeyringConfig) *Keyring {
	t.Helper()
	k, err := NewKeyring(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRecordSignature: a record signed with the current secret verifies
// and opens; any change to its key, value, signed time or flags, a record
// signed with a stranger's secret, and an unsigned one are refused, each
// for its reason.
func TestRecordSignature(t *testing.T) {
	t.Parallel()
	k := keyring(t, KeyringConfig{Secret: secretA})
	key, value := []byte("\x01\x08api_keys\x00k1"), []byte("the hash")
	stored, sig := k.SignRecord(key, value, false, 1000)
	if !bytes.Equal(stored, value) || len(sig) != sigLen {
		t.Fatalf("plain record: stored %q sig %d bytes", stored, len(sig))
	}
	v, refused := k.VerifyRecord(key, stored, sig)
	if refused != "" || !bytes.Equal(v.Value, value) || v.SignedMs != 1000 || !v.Current {
		t.Fatalf("genuine record: %+v %q", v, refused)
	}
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	stranger := keyring(t, KeyringConfig{Secret: secretB})
	_, strangerSig := stranger.SignRecord(key, value, false, 1000)
	for _, c := range []struct {
		name            string
		key, value, sig []byte
		want            string
	}{
		{"value changed", key, []byte("another hash"), sig, RefusedBadSignature},
		{"key changed", []byte("\x01\x08api_keys\x00k2"), value, sig, RefusedBadSignature},
		{"tombstone for a signed value", key, nil, sig, RefusedBadSignature},
		{"signed time changed", key, value, flip(sig, 1+keyIDLen+7), RefusedBadSignature},
		{"flags changed", key, value, flip(sig, 1+keyIDLen+8), RefusedBadSignature},
		{"MAC changed", key, value, flip(sig, sigLen-1), RefusedBadSignature},
		{"another secret", key, value, strangerSig, RefusedUnknownKey},
		{"unsigned", key, value, nil, RefusedUnsigned},
		{"empty header", key, value, []byte{}, RefusedMalformed},
		{"short header", key, value, sig[:20], RefusedMalformed},
		{"unknown version", key, value, flip(sig, 0), RefusedMalformed},
	} {
		if _, got := k.VerifyRecord(c.key, c.value, c.sig); got != c.want {
			t.Errorf("%s: refused %q, want %q", c.name, got, c.want)
		}
	}
	// A tombstone is signed too.
	_, tsig := k.SignRecord(key, nil, true, 2000)
	if v, refused := k.VerifyRecord(key, nil, tsig); refused != "" || v.Value != nil {
		t.Errorf("tombstone: %+v %q", v, refused)
	}
}

// TestRecordSealed: a secret's value is not in the topic in the clear;
// it opens under its own key only.
func TestRecordSealed(t *testing.T) {
	t.Parallel()
	k := keyring(t, KeyringConfig{Secret: secretA})
	key, value := []byte("\x01\x11scram_credentials\x00alice"), []byte("StoredKey=c2VjcmV0LXN0b3JlZC1rZXk")
	stored, sig := k.SignRecord(key, value, true, 1000)
	if bytes.Contains(stored, value) || bytes.Contains(stored, []byte("c2VjcmV0")) {
		t.Fatalf("the sealed value holds the secret in the clear: %q", stored)
	}
	again, _ := k.SignRecord(key, value, true, 1000)
	if bytes.Equal(again, stored) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	v, refused := k.VerifyRecord(key, stored, sig)
	if refused != "" || !bytes.Equal(v.Value, value) {
		t.Fatalf("sealed record: %q %q", v.Value, refused)
	}
	// Re-signed under another key (someone holding only a MAC would still
	// not get it to open: the key is the seal's additional data).
	other := []byte("\x01\x11scram_credentials\x00mallory")
	_, osig := k.SignRecord(other, nil, false, 1000)
	osig = bytes.Clone(osig)
	osig[1+keyIDLen+8] = sigEncrypted
	copy(osig[sigLen-macLen:], recordMAC(hmac.New(sha256.New, k.cur.mac), nil, other, stored, 1000, sigEncrypted))
	if _, refused := k.VerifyRecord(other, stored, osig); refused != RefusedMalformed {
		t.Errorf("a sealed value moved under another key: refused %q, want %q", refused, RefusedMalformed)
	}
}

// TestKeyRotation: the previous secret is accepted until the grace ends,
// and is then refused as expired; unsigned input likewise when migrating.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_000_000, 0)}
	old := keyring(t, KeyringConfig{Secret: secretA})
	k := keyring(t, KeyringConfig{Secret: secretB, Previous: secretA, AcceptUnsigned: true, GraceUntil: c.t.Add(time.Hour), Now: c.now})
	key, value := []byte("k"), []byte("v")
	stored, sig := old.SignRecord(key, value, true, 1)
	v, refused := k.VerifyRecord(key, stored, sig)
	if refused != "" || v.Current || !bytes.Equal(v.Value, value) {
		t.Fatalf("previous secret within the grace: %+v %q", v, refused)
	}
	if v, refused := k.VerifyRecord(key, value, nil); refused != "" || v.Current {
		t.Fatalf("unsigned while migrating: %+v %q", v, refused)
	}
	part := old.SignReport([]byte("report"))
	if p, refused := k.OpenReport(part); refused != "" || string(p) != "report" {
		t.Fatalf("previous secret's report within the grace: %q %q", p, refused)
	}
	c.t = c.t.Add(time.Hour)
	if _, refused := k.VerifyRecord(key, stored, sig); refused != RefusedExpiredKey {
		t.Errorf("previous secret after the grace: refused %q", refused)
	}
	if _, refused := k.VerifyRecord(key, value, nil); refused != RefusedUnsigned {
		t.Errorf("unsigned after the grace: refused %q", refused)
	}
	if _, refused := k.OpenReport(part); refused != RefusedExpiredKey {
		t.Errorf("previous secret's report after the grace: refused %q", refused)
	}
	if _, refused := k.OpenReport([]byte("TGX\x01...")); refused != RefusedUnsigned {
		t.Errorf("unsigned report after the grace: refused %q", refused)
	}
	// The current secret is never affected by the grace.
	stored, sig = k.SignRecord(key, value, true, 2)
	if v, refused := k.VerifyRecord(key, stored, sig); refused != "" || !v.Current {
		t.Errorf("current secret: %+v %q", v, refused)
	}
}

// TestReportSignature: a signed report opens to the part it wraps; a
// changed byte anywhere, a stranger's secret, an unsigned part are
// refused.
func TestReportSignature(t *testing.T) {
	t.Parallel()
	k := keyring(t, KeyringConfig{Secret: secretA})
	r := Report{Instance: "tg-a", Incarnation: 1, Seq: 1, SentMs: 5,
		Usage: []quota.Delta{{Key: model.ProducerByteRate, User: "alice", Value: 10, Total: 10}}}
	part := r.Encode()[0]
	b := k.SignReport(part)
	got, refused := k.OpenReport(b)
	if refused != "" || !bytes.Equal(got, part) {
		t.Fatalf("genuine report: %q", refused)
	}
	for i := 4; i < len(b); i++ {
		c := bytes.Clone(b)
		c[i] ^= 0x20
		if _, refused := k.OpenReport(c); refused == "" {
			t.Fatalf("byte %d changed: accepted", i)
		}
	}
	if _, refused := keyring(t, KeyringConfig{Secret: secretB}).OpenReport(b); refused != RefusedUnknownKey {
		t.Errorf("stranger's report: %q", refused)
	}
	if _, refused := k.OpenReport(part); refused != RefusedUnsigned {
		t.Errorf("unsigned report: %q", refused)
	}
	if _, refused := k.OpenReport(b[:10]); refused != RefusedMalformed {
		t.Errorf("short report: %q", refused)
	}
}

// TestExchangeRefusesForgedReports: reports that fail the check announce
// no instance and charge no usage; they are counted by reason. A signed
// report of a real instance is applied.
func TestExchangeRefusesForgedReports(t *testing.T) {
	t.Parallel()
	e, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	k := keyring(t, KeyringConfig{Secret: secretA})
	x := NewExchange(ExchangeConfig{Self: Member{ID: "self", Incarnation: 1}, SessionTimeout: time.Hour, Ledger: e, Logger: quiet(), Keys: k})
	now := time.Now()
	stranger := keyring(t, KeyringConfig{Secret: secretB})
	for i := range 50 {
		r := Report{Instance: fmt.Sprintf("fake-%d", i), Incarnation: 1, Seq: 1, SentMs: now.UnixMilli(),
			Usage: []quota.Delta{{Key: model.ProducerByteRate, User: "victim", Value: 1e9, Total: 1e9}}}
		part := r.Encode()[0]
		x.handle(part, now)                      // unsigned
		x.handle(stranger.SignReport(part), now) // another secret
		forged := k.SignReport(part)
		forged[len(forged)-1] ^= 1 // altered after signing
		x.handle(forged, now)
	}
	if n := len(x.Members()); n != 1 {
		t.Fatalf("forged reports made %d members", n)
	}
	s := x.Stats()
	if s.Refused[RefusedUnsigned] != 50 || s.Refused[RefusedUnknownKey] != 50 || s.Refused[RefusedBadSignature] != 50 || s.Rejected != 150 {
		t.Fatalf("refusals: %+v", s)
	}
	r := Report{Instance: "tg-b", Incarnation: 1, Seq: 1, SentMs: now.UnixMilli()}
	x.handle(k.SignReport(r.Encode()[0]), now)
	if n := len(x.Members()); n != 2 {
		t.Fatalf("a signed report of a real instance: %d members", n)
	}
	// An instance without a secret refuses what a signing one sends.
	plain := NewExchange(ExchangeConfig{Self: Member{ID: "self", Incarnation: 1}, SessionTimeout: time.Hour, Ledger: e, Logger: quiet()})
	plain.handle(k.SignReport(r.Encode()[0]), now)
	if s := plain.Stats(); s.Refused[RefusedNoSecret] != 1 || len(plain.Members()) != 1 {
		t.Fatalf("no secret: %+v", s)
	}
}

func TestReadSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, append(append([]byte("  "), secretA...), '\n'), 0o600)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	if b, err := ReadSecret(good); err != nil || !bytes.Equal(b, secretA) {
		t.Errorf("good: %q %v", b, err)
	}
	if _, err := ReadSecret(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short: %v", err)
	}
	if _, err := ReadSecret(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file read")
	}
}
