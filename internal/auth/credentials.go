package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tollgate/tollgate/internal/principal"
)

// SCRAM iteration bounds: Kafka's ScramMechanism minimum and maximum, and
// the default kafka-configs uses.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 4096
)

// saltLen is the length of the random salt NewScramCredential draws.
const saltLen = 32

// ScramCredential is what the server keeps for one user and one SCRAM
// mechanism (RFC 5802 §3): the salt, the iteration count and the two keys
// derived from the salted password. The password cannot be recovered from
// it. StoredKey lets the server verify a client proof; ServerKey lets it
// prove itself to the client.
type ScramCredential struct {
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// NewScramCredential salts (32 random bytes) and iterates password for
// mechanism. iterations 0 means DefaultIterations; otherwise it must be in
// [MinIterations, MaxIterations], as Kafka requires.
func NewScramCredential(mechanism, password string, iterations int) (ScramCredential, error) {
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if _, ok := scramHash(mechanism); !ok {
		return ScramCredential{}, fmt.Errorf("%w: %q is not a SCRAM mechanism", ErrUnsupportedMechanism, mechanism)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return ScramCredential{}, fmt.Errorf("auth: iterations %d out of range [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if password == "" {
		return ScramCredential{}, errors.New("auth: empty password")
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, err
	}
	return scramCredentialFromSalt(mechanism, password, salt, iterations)
}

func scramCredentialFromSalt(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	salted, err := saltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	h, _ := scramHash(mechanism)
	clientKey := hmacSum(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       salt,
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(h, salted, "Server Key"),
	}, nil
}

// saltedPassword is Hi(password, salt, i) = PBKDF2 with the mechanism's
// HMAC. Like Kafka, the password is used as UTF-8 bytes without SASLprep.
func saltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

func hmacSum(h func() hash.Hash, key []byte, data string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// validate checks the shape of a stored credential.
func (c ScramCredential) validate(mechanism string) error {
	h, ok := scramHash(mechanism)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
	case c.Mechanism != "" && c.Mechanism != mechanism:
		return fmt.Errorf("auth: credential is for %s, not %s", c.Mechanism, mechanism)
	case c.Iterations < MinIterations || c.Iterations > MaxIterations:
		return fmt.Errorf("auth: iterations %d out of range [%d, %d]", c.Iterations, MinIterations, MaxIterations)
	case len(c.Salt) == 0:
		return errors.New("auth: empty salt")
	case len(c.StoredKey) != h().Size() || len(c.ServerKey) != h().Size():
		return fmt.Errorf("auth: %s keys must be %d bytes", mechanism, h().Size())
	}
	return nil
}

// Verify reports whether password is the one c was made from, by
// recomputing the StoredKey (constant-time compare). This is how PLAIN is
// checked without plaintext at rest.
func (c ScramCredential) Verify(password string) bool {
	if c.validate(c.Mechanism) != nil {
		return false
	}
	got, err := scramCredentialFromSalt(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got.StoredKey, c.StoredKey) == 1
}

// Format renders c the way Kafka's ScramCredentialUtils.credentialToString
// does: salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>.
func (c ScramCredential) Format() string {
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("salt=%s,stored_key=%s,server_key=%s,iterations=%d",
		enc(c.Salt), enc(c.StoredKey), enc(c.ServerKey), c.Iterations)
}

// ParseScramCredential parses Kafka's credential string (see Format) for
// mechanism and validates it.
func ParseScramCredential(mechanism, s string) (ScramCredential, error) {
	c := ScramCredential{Mechanism: mechanism}
	seen := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || seen[k] {
			return ScramCredential{}, fmt.Errorf("auth: bad SCRAM credential field %q", f)
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return ScramCredential{}, fmt.Errorf("auth: SCRAM credential field %q: %v", k, err)
		}
	}
	if err := c.validate(mechanism); err != nil {
		return ScramCredential{}, err
	}
	return c, nil
}

// CredentialLookup is what the SASL servers check credentials against. The
// durable store, MemoryStore and NewLookup implement it. Implementations
// must be safe for concurrent use.
type CredentialLookup interface {
	// Scram returns the user's credential for a SCRAM mechanism.
	Scram(user, mechanism string) (ScramCredential, bool)
	// Plain checks a PLAIN user name and password and returns the
	// principal they authenticate as.
	Plain(user, password string) (principal.Principal, bool)
}

// ScramStore is the SCRAM half of a CredentialLookup.
type ScramStore interface {
	Scram(user, mechanism string) (ScramCredential, bool)
}

// PlainViaScram checks a PLAIN password against the user's SCRAM-SHA-512
// credential, or SCRAM-SHA-256 if there is none, by recomputing it. An
// unknown user costs the same work as a known one: the password is checked
// against a decoy credential of the mechanism and iteration count a known
// user's check takes (see Decoys; shaped like s's credentials when s is a
// ShapeCounter).
func PlainViaScram(s ScramStore, user, password string) (principal.Principal, bool) {
	return plainViaScram(s, serverOptions{}.decoys(lookup{users: s}), user, password)
}

func plainViaScram(s ScramStore, d *Decoys, user, password string) (principal.Principal, bool) {
	var c ScramCredential
	ok := false
	if s != nil {
		for _, mech := range []string{MechanismScramSHA512, MechanismScramSHA256} {
			if c, ok = s.Scram(user, mech); ok && c.validate(mech) == nil {
				c.Mechanism = mech
				break
			}
			ok = false
		}
	}
	if !ok {
		decoy := d.Plain(user)
		_ = decoy.Verify(password)
		return principal.Principal{}, false
	}
	if !c.Verify(password) {
		return principal.Principal{}, false
	}
	return principal.Principal{Type: "User", Name: user}, true
}

// NewLookup combines a SCRAM credential source and API keys into a
// CredentialLookup: PLAIN with user APIKeyUser is checked against keys
// (when keys is non-nil), any other PLAIN user against its SCRAM
// credential. Either argument may be nil. Unknown users are checked
// against decoys of a per-process secret; see NewLookupDecoys.
func NewLookup(users ScramStore, keys APIKeys) CredentialLookup {
	return lookup{users: users, keys: keys}
}

// NewLookupDecoys is NewLookup whose unknown users are checked against d
// (a persistent secret, shaped like the credentials the gateway holds).
func NewLookupDecoys(users ScramStore, keys APIKeys, d *Decoys) CredentialLookup {
	return lookup{users: users, keys: keys, decoys: d}
}

type lookup struct {
	users  ScramStore
	keys   APIKeys
	decoys *Decoys
}

// Decoys returns the decoys of NewLookupDecoys (nil otherwise).
func (l lookup) Decoys() *Decoys { return l.decoys }

// ScramShapes counts the users' credentials when they can be counted.
func (l lookup) ScramShapes(add func(string, ScramShape, int)) {
	if sc, ok := l.users.(ShapeCounter); ok {
		sc.ScramShapes(add)
	}
}

func (l lookup) Scram(user, mechanism string) (ScramCredential, bool) {
	if l.users == nil {
		return ScramCredential{}, false
	}
	return l.users.Scram(user, mechanism)
}

func (l lookup) Plain(user, password string) (principal.Principal, bool) {
	if user == APIKeyUser && l.keys != nil {
		return VerifyAPIKey(l.keys, password)
	}
	return plainViaScram(l.users, serverOptions{}.decoys(l), user, password)
}

// MemoryStore is an in-memory CredentialLookup and APIKeys, safe for
// concurrent use. LoadCredentialFile fills one from a file.
type MemoryStore struct {
	mu     sync.RWMutex
	scram  map[string]map[string]ScramCredential // user → mechanism → credential
	keys   map[string]APIKey                     // id → key
	shapes map[string]map[ScramShape]int         // census of scram; nil: to count again
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{scram: map[string]map[string]ScramCredential{}, keys: map[string]APIKey{}}
}

// SetScram stores a user's credential for c.Mechanism.
func (m *MemoryStore) SetScram(user string, c ScramCredential) error {
	if user == "" {
		return errors.New("auth: empty user name")
	}
	if user == APIKeyUser {
		return fmt.Errorf("auth: user name %q is reserved for API keys", APIKeyUser)
	}
	if err := c.validate(c.Mechanism); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scram[user] == nil {
		m.scram[user] = map[string]ScramCredential{}
	}
	m.scram[user][c.Mechanism] = c
	m.shapes = nil
	return nil
}

// ScramShapes implements ShapeCounter. The census is kept until the next
// change, so that an unknown user's login does not walk every user.
func (m *MemoryStore) ScramShapes(add func(string, ScramShape, int)) {
	m.mu.RLock()
	shapes := m.shapes
	m.mu.RUnlock()
	if shapes == nil {
		m.mu.Lock()
		if m.shapes == nil {
			m.shapes = map[string]map[ScramShape]int{}
			for _, byMech := range m.scram {
				for mech, c := range byMech {
					if m.shapes[mech] == nil {
						m.shapes[mech] = map[ScramShape]int{}
					}
					m.shapes[mech][ShapeOf(c)]++
				}
			}
		}
		shapes = m.shapes
		m.mu.Unlock()
	}
	for mech, byShape := range shapes {
		for sh, n := range byShape {
			add(mech, sh, n)
		}
	}
}

// SetPassword stores SCRAM-SHA-256 and SCRAM-SHA-512 credentials made
// from password (iterations 0: DefaultIterations).
func (m *MemoryStore) SetPassword(user, password string, iterations int) error {
	for _, mech := range []string{MechanismScramSHA256, MechanismScramSHA512} {
		c, err := NewScramCredential(mech, password, iterations)
		if err != nil {
			return err
		}
		if err := m.SetScram(user, c); err != nil {
			return err
		}
	}
	return nil
}

// DeleteUser removes all of a user's credentials.
func (m *MemoryStore) DeleteUser(user string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.scram, user)
	m.shapes = nil
}

// Users lists the users with credentials, sorted.
func (m *MemoryStore) Users() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.scram))
}

// Scram implements CredentialLookup.
func (m *MemoryStore) Scram(user, mechanism string) (ScramCredential, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.scram[user][mechanism]
	return c, ok
}

// Plain implements CredentialLookup: API keys for user APIKeyUser, SCRAM
// credentials otherwise.
func (m *MemoryStore) Plain(user, password string) (principal.Principal, bool) {
	if user == APIKeyUser {
		return VerifyAPIKey(m, password)
	}
	return plainViaScram(m, serverOptions{}.decoys(m), user, password)
}

// AddAPIKey stores an API key (see NewAPIKey).
func (m *MemoryStore) AddAPIKey(k APIKey) error {
	if err := k.validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.keys[k.ID]; dup {
		return fmt.Errorf("auth: duplicate API key id %q", k.ID)
	}
	m.keys[k.ID] = k
	return nil
}

// RevokeAPIKey marks a key revoked; false if there is no such key.
func (m *MemoryStore) RevokeAPIKey(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[id]
	if ok {
		k.Revoked = true
		m.keys[id] = k
	}
	return ok
}

// ByID implements APIKeys.
func (m *MemoryStore) ByID(id string) (APIKey, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	k, ok := m.keys[id]
	return k, ok
}

// APIKeys lists the stored keys sorted by id.
func (m *MemoryStore) APIKeys() []APIKey {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]APIKey, 0, len(m.keys))
	for _, k := range m.keys {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b APIKey) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Replace swaps in the contents of other (a reloaded file), so that
// holders of m see the new credentials at once. other must not be used
// afterwards.
func (m *MemoryStore) Replace(other *MemoryStore) {
	other.mu.Lock()
	scram, keys := other.scram, other.keys
	other.scram, other.keys = nil, nil
	other.mu.Unlock()
	m.mu.Lock()
	m.scram, m.keys, m.shapes = scram, keys, nil
	m.mu.Unlock()
}
