package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/principal"
)

// APIKeyUser is the SASL/PLAIN user name that says "the password is an API
// key" (the managed-Kafka convention). The principal is then the key's
// identity, so all keys of one identity share its quotas.
const APIKeyUser = "token"

// API key plaintext layout: "tg_" + id + "_" + secret, id and secret in
// lower-case unpadded base32.
const (
	apiKeyPrefix    = "tg_"
	apiKeyIDBytes   = 10 // 16 base32 characters
	apiKeySecretLen = 32 // 52 base32 characters
)

var apiKeyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var (
	apiKeyIDChars     = apiKeyEncoding.EncodedLen(apiKeyIDBytes)
	apiKeySecretChars = apiKeyEncoding.EncodedLen(apiKeySecretLen)
)

// APIKey is a stored API key. Only the SHA-256 of the plaintext is kept:
// the secret is 256 random bits, so a fast hash is enough (no salt or
// stretching is needed against guessing).
type APIKey struct {
	ID       string
	Identity string // the principal name the key authenticates as
	Hash     []byte // SHA-256 of the whole plaintext key
	Created  time.Time
	Revoked  bool
}

func (k APIKey) validate() error {
	switch {
	case !validAPIKeyID(k.ID):
		return errors.New("auth: malformed API key id")
	case k.Identity == "":
		return errors.New("auth: API key without identity")
	case len(k.Hash) != sha256.Size:
		return errors.New("auth: API key hash must be a SHA-256")
	}
	return nil
}

// APIKeys finds a stored API key by id. Implementations must be safe for
// concurrent use.
type APIKeys interface {
	ByID(id string) (APIKey, bool)
}

// NewAPIKey makes a key for identity. The plaintext is returned once, to
// be shown to its owner; only key (with the hash) is stored.
func NewAPIKey(identity string) (plaintext string, key APIKey, err error) {
	if identity == "" {
		return "", APIKey{}, errors.New("auth: API key without identity")
	}
	buf := make([]byte, apiKeyIDBytes+apiKeySecretLen)
	if _, err := rand.Read(buf); err != nil {
		return "", APIKey{}, err
	}
	id := apiKeyEncoding.EncodeToString(buf[:apiKeyIDBytes])
	plaintext = apiKeyPrefix + id + "_" + apiKeyEncoding.EncodeToString(buf[apiKeyIDBytes:])
	return plaintext, APIKey{
		ID:       id,
		Identity: identity,
		Hash:     HashAPIKey(plaintext),
		Created:  time.Now().UTC().Truncate(time.Second),
	}, nil
}

// HashAPIKey is the stored form of a plaintext key.
func HashAPIKey(plaintext string) []byte {
	h := sha256.Sum256([]byte(plaintext))
	return h[:]
}

// ParseAPIKey returns the id in a plaintext key, if it has the layout of
// one.
func ParseAPIKey(plaintext string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(plaintext, apiKeyPrefix)
	if !ok {
		return "", false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || !validAPIKeyID(id) || len(secret) != apiKeySecretChars || !isBase32(secret) {
		return "", false
	}
	return id, true
}

func validAPIKeyID(id string) bool { return len(id) == apiKeyIDChars && isBase32(id) }

func isBase32(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// VerifyAPIKey checks a presented plaintext key: well-formed, known,
// matching hash (constant-time), not revoked. The principal is the key's
// identity.
func VerifyAPIKey(keys APIKeys, presented string) (principal.Principal, bool) {
	id, ok := ParseAPIKey(presented)
	if !ok || keys == nil {
		return principal.Principal{}, false
	}
	sum := HashAPIKey(presented)
	k, found := keys.ByID(id)
	want := k.Hash
	if !found || len(want) != sha256.Size {
		want = make([]byte, sha256.Size) // compare anyway: same work either way
		found = false
	}
	match := subtle.ConstantTimeCompare(sum, want) == 1
	if !found || !match || k.Revoked || k.ID != id || k.Identity == "" {
		return principal.Principal{}, false
	}
	return principal.Principal{Type: "User", Name: k.Identity}, true
}
