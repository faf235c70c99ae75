package cluster

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"sync"
	"time"
)

// A Tollgate cluster trusts only its own instances: with a shared secret
// (cluster.secret_file) every record of the configuration topic and every
// report of the exchange topic is signed with HMAC-SHA-256, and what fails
// the check is refused and counted, never applied. The values of records
// that hold secrets (SCRAM stored keys, API-key hashes) are also encrypted
// with AES-256-GCM, so the topic never holds them in the clear.
//
// Keys are derived from the secret with HKDF-SHA-256, one per purpose; a
// key id (8 bytes, derived too) in every signature tells a record signed
// with another secret (rotation, a stranger) from a forged one.
//
// Rotation: the previous secret is accepted (never used to sign) for a
// grace period, while the instances restart with the new one; an instance
// with the new secret signs again every record whose latest version was
// signed with the previous one, so the topic holds no record of the old
// secret once the grace is over (docs/cluster.md).

// MinSecretBytes is the least a secret file must hold (after trimming
// surrounding whitespace): 32 bytes, the HMAC-SHA-256 key size.
const MinSecretBytes = 32

// SigHeader is the record header that carries a configuration record's
// signature.
const SigHeader = "tollgate-sig"

// sigVersion starts every signature; sigLen is its whole length: version,
// key id, signed timestamp (Unix ms), flags, MAC.
const (
	sigVersion = 1
	keyIDLen   = 8
	macLen     = sha256.Size
	sigLen     = 1 + keyIDLen + 8 + 1 + macLen
	// sigEncrypted: the record's value is nonce || AES-256-GCM ciphertext.
	sigEncrypted = 1
)

// reportSealMagic starts a signed report: magic, key id, MAC, then the
// report part exactly as DecodeReport reads it.
var reportSealMagic = [4]byte{'T', 'G', 'S', 1}

const reportSealLen = 4 + keyIDLen + macLen

// Domains keep one purpose's MAC from passing for another's.
const (
	domainRecord = "tollgate/cluster/config-record/v1"
	domainReport = "tollgate/cluster/exchange-report/v1"
)

// DefaultMaxSkew bounds, by default, how far a configuration record's
// signed time may be from the time the broker appended it, on a topic
// whose message.timestamp.type is LogAppendTime: a genuine record copied
// back into the topic later (a replay of a deleted API key) is refused
// (LogConfig.MaxSkew, cluster.max_clock_skew).
const DefaultMaxSkew = 5 * time.Minute

// Refusal reasons, the label values of tollgate_cluster_refused_total.
const (
	RefusedUnsigned     = "unsigned"      // no signature, and unsigned records are not accepted
	RefusedUnknownKey   = "unknown_key"   // signed with a secret this instance does not hold
	RefusedBadSignature = "bad_signature" // the MAC does not match: forged or altered
	RefusedExpiredKey   = "expired_key"   // signed with the previous secret after its grace
	RefusedStale        = "stale"         // older than what is applied, or appended long after it was signed
	RefusedMalformed    = "malformed"     // a signature or sealed value that does not parse
	RefusedNoSecret     = "no_secret"     // signed, but this instance has no cluster.secret_file
)

// RefusedReasons lists every reason, for metrics that start from 0.
var RefusedReasons = []string{RefusedUnsigned, RefusedUnknownKey, RefusedBadSignature, RefusedExpiredKey,
	RefusedStale, RefusedMalformed, RefusedNoSecret}

// sealKey is one secret's derived keys.
type sealKey struct {
	id  [keyIDLen]byte
	mac []byte
	enc cipher.AEAD
}

func deriveKey(secret []byte) (*sealKey, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("cluster: a secret must be at least %d bytes, got %d", MinSecretBytes, len(secret))
	}
	derive := func(info string) []byte {
		k, err := hkdf.Key(sha256.New, secret, nil, "tollgate cluster "+info, 32)
		if err != nil {
			panic(err) // only for lengths HKDF-SHA-256 cannot give
		}
		return k
	}
	block, err := aes.NewCipher(derive("encrypt v1"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &sealKey{mac: derive("sign v1"), enc: aead}
	copy(k.id[:], derive("key id v1"))
	return k, nil
}

// Keyring holds the secrets of a Tollgate cluster: the current one signs
// and is accepted; the previous one is accepted until its grace ends;
// unsigned records and reports are accepted only while migrating to
// signing (AcceptUnsigned), until the same deadline.
type Keyring struct {
	cur, prev *sealKey
	unsigned  bool
	until     time.Time
	now       func() time.Time

	macs sync.Pool // hash.Hash of the current key's MAC
}

// KeyringConfig makes a Keyring.
type KeyringConfig struct {
	Secret []byte // required, at least MinSecretBytes
	// Previous, if set, is the secret before the last rotation: accepted
	// until GraceUntil.
	Previous []byte
	// AcceptUnsigned accepts unsigned records and reports until
	// GraceUntil: a Tollgate cluster that turns signing on.
	AcceptUnsigned bool
	GraceUntil     time.Time
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// NewKeyring derives the keys of cfg's secrets.
func NewKeyring(cfg KeyringConfig) (*Keyring, error) {
	cur, err := deriveKey(cfg.Secret)
	if err != nil {
		return nil, err
	}
	k := &Keyring{cur: cur, unsigned: cfg.AcceptUnsigned, until: cfg.GraceUntil, now: cfg.Now}
	if k.now == nil {
		k.now = time.Now
	}
	if cfg.Previous != nil {
		if k.prev, err = deriveKey(cfg.Previous); err != nil {
			return nil, fmt.Errorf("cluster: previous secret: %w", err)
		}
		if k.prev.id == cur.id {
			k.prev = nil // the same secret: nothing to rotate
		}
	}
	k.macs.New = func() any { return hmac.New(sha256.New, cur.mac) }
	return k, nil
}

// ReadSecret reads a secret file: its bytes with surrounding whitespace
// trimmed, at least MinSecretBytes of them.
func ReadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinSecretBytes {
		return nil, fmt.Errorf("%s holds %d bytes; a cluster secret needs at least %d (for example: head -c 32 /dev/urandom | base64 > %s)",
			path, len(b), MinSecretBytes, path)
	}
	return b, nil
}

// graceOver reports whether the previous secret and unsigned input are no
// longer accepted.
func (k *Keyring) graceOver() bool { return !k.now().Before(k.until) }

// keyFor returns the key a signature's id names, or the refusal.
func (k *Keyring) keyFor(id []byte) (key *sealKey, previous bool, refused string) {
	switch {
	case bytes.Equal(id, k.cur.id[:]):
		return k.cur, false, ""
	case k.prev != nil && bytes.Equal(id, k.prev.id[:]):
		if k.graceOver() {
			return nil, true, RefusedExpiredKey
		}
		return k.prev, true, ""
	}
	return nil, false, RefusedUnknownKey
}

// acceptUnsigned returns "" when unsigned input is accepted now, the
// refusal otherwise.
func (k *Keyring) acceptUnsigned() string {
	if k.unsigned && !k.graceOver() {
		return ""
	}
	return RefusedUnsigned
}

// hasher returns a MAC of sk: the current key's from its pool (release
// puts it back), the previous one's made afresh (it is only read during a
// rotation's grace).
func (k *Keyring) hasher(sk *sealKey, previous bool) hash.Hash {
	if previous {
		return hmac.New(sha256.New, sk.mac)
	}
	return k.macs.Get().(hash.Hash)
}

// release returns a hasher's MAC to the pool it came from.
func (k *Keyring) release(h hash.Hash, previous bool) {
	if !previous {
		k.macs.Put(h)
	}
}

// recordMAC computes a configuration record's MAC with key.
func recordMAC(h hash.Hash, dst []byte, key, value []byte, ts int64, flags byte) []byte {
	h.Reset()
	var n [binary.MaxVarintLen64 + 9]byte
	h.Write([]byte(domainRecord))
	h.Write(binary.AppendUvarint(n[:0], uint64(len(key))))
	h.Write(key)
	b := binary.BigEndian.AppendUint64(n[:0], uint64(ts))
	b = append(b, flags)
	h.Write(b)
	if value == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		h.Write(binary.AppendUvarint(n[:0], uint64(len(value))))
		h.Write(value)
	}
	return h.Sum(dst)
}

// SignRecord returns the value to store for a configuration record and
// its signature header: value encrypted first when secret (nil stays nil:
// a tombstone), then key, stored value, signed time and flags under the
// current key's MAC.
func (k *Keyring) SignRecord(key, value []byte, secret bool, ts int64) (stored, sig []byte) {
	var flags byte
	stored = value
	if secret && value != nil {
		flags |= sigEncrypted
		stored = k.cur.seal(key, value)
	}
	sig = make([]byte, 0, sigLen)
	sig = append(sig, sigVersion)
	sig = append(sig, k.cur.id[:]...)
	sig = binary.BigEndian.AppendUint64(sig, uint64(ts))
	sig = append(sig, flags)
	h := k.macs.Get().(hash.Hash)
	sig = recordMAC(h, sig, key, stored, ts, flags)
	k.macs.Put(h)
	return stored, sig
}

// Verified is what checking a configuration record found.
type Verified struct {
	Value    []byte // the plain value (decrypted when it was sealed)
	SignedMs int64  // the signed time; 0 for an accepted unsigned record
	// Current: signed with the current secret; false for a record signed
	// with the previous one or accepted unsigned, which is signed again.
	Current bool
}

// VerifyRecord checks one configuration record (sig is its SigHeader
// header, nil when it has none) and returns its plain value, or the
// reason it is refused.
func (k *Keyring) VerifyRecord(key, stored, sig []byte) (Verified, string) {
	if sig == nil {
		if r := k.acceptUnsigned(); r != "" {
			return Verified{}, r
		}
		return Verified{Value: stored}, ""
	}
	if len(sig) != sigLen || sig[0] != sigVersion {
		return Verified{}, RefusedMalformed
	}
	sk, previous, refused := k.keyFor(sig[1 : 1+keyIDLen])
	if refused != "" {
		return Verified{}, refused
	}
	ts := int64(binary.BigEndian.Uint64(sig[1+keyIDLen:]))
	flags := sig[1+keyIDLen+8]
	if flags&^sigEncrypted != 0 {
		return Verified{}, RefusedMalformed
	}
	var want [macLen]byte
	h := k.hasher(sk, previous)
	defer k.release(h, previous)
	if !hmac.Equal(recordMAC(h, want[:0], key, stored, ts, flags), sig[sigLen-macLen:]) {
		return Verified{}, RefusedBadSignature
	}
	v := Verified{Value: stored, SignedMs: ts, Current: !previous}
	if flags&sigEncrypted != 0 {
		if stored == nil {
			return Verified{}, RefusedMalformed
		}
		plain, err := sk.open(key, stored)
		if err != nil {
			return Verified{}, RefusedMalformed
		}
		v.Value = plain
	}
	return v, ""
}

// seal encrypts value with the record's key as additional data: a sealed
// value moved under another key does not open.
func (sk *sealKey) seal(key, value []byte) []byte {
	out := make([]byte, sk.enc.NonceSize(), sk.enc.NonceSize()+len(value)+sk.enc.Overhead())
	if _, err := rand.Read(out); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return sk.enc.Seal(out, out, value, key)
}

func (sk *sealKey) open(key, stored []byte) ([]byte, error) {
	ns := sk.enc.NonceSize()
	if len(stored) < ns+sk.enc.Overhead() {
		return nil, errors.New("cluster: sealed value too short")
	}
	return sk.enc.Open(nil, stored[:ns], stored[ns:], key)
}

func reportMAC(h hash.Hash, dst, part []byte) []byte {
	h.Reset()
	h.Write([]byte(domainReport))
	h.Write(part)
	return h.Sum(dst)
}

// SignReport wraps an encoded report part in its signature.
func (k *Keyring) SignReport(part []byte) []byte {
	b := make([]byte, 0, reportSealLen+len(part))
	b = append(b, reportSealMagic[:]...)
	b = append(b, k.cur.id[:]...)
	h := k.macs.Get().(hash.Hash)
	b = reportMAC(h, b, part)
	k.macs.Put(h)
	return append(b, part...)
}

// OpenReport checks a received part's signature and returns the report
// part it wraps, or the reason it is refused.
func (k *Keyring) OpenReport(b []byte) ([]byte, string) {
	if !bytes.HasPrefix(b, reportSealMagic[:]) {
		if r := k.acceptUnsigned(); r != "" {
			return nil, r
		}
		return b, ""
	}
	if len(b) < reportSealLen {
		return nil, RefusedMalformed
	}
	sk, previous, refused := k.keyFor(b[4 : 4+keyIDLen])
	if refused != "" {
		return nil, refused
	}
	part := b[reportSealLen:]
	var want [macLen]byte
	h := k.hasher(sk, previous)
	defer k.release(h, previous)
	if !hmac.Equal(reportMAC(h, want[:0], part), b[4+keyIDLen:reportSealLen]) {
		return nil, RefusedBadSignature
	}
	return part, ""
}

// isSealedReport reports whether b carries a report signature (an
// instance without a secret refuses it: its cluster signs).
func isSealedReport(b []byte) bool { return bytes.HasPrefix(b, reportSealMagic[:]) }
