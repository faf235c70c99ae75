package auth

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Decoys are what a login for a user who does not exist is checked
// against, so that it cannot be told from a login for one who does:
//
//   - SCRAM: the server-first message shows a salt and an iteration count
//     for every name. An unknown user's are derived from a secret and the
//     name — the same every time, and across restarts when the secret is
//     kept (LoadOrCreateSecret) — and shaped like the real users': the
//     salt length, alphabet and iteration count most of the stored
//     credentials of that mechanism have.
//   - PLAIN: checking a password costs one PBKDF2 at the credential's
//     iteration count. An unknown user's password is checked against a
//     decoy credential of the mechanism and iteration count a known user's
//     check would take, so it costs the same.
type Decoys struct {
	secret []byte
	shapes []ShapeCounter
	fixed  *ScramShape // WithFakeShape: this shape whatever the census
}

// ScramShape is what a SCRAM credential shows of itself before the proof:
// the salt's length and alphabet, and the iteration count.
type ScramShape struct {
	SaltLen    int
	Iterations int
	// Base36 is a salt of lowercase letters and digits only, as Kafka's
	// own tools make (ScramFormatter); otherwise any bytes.
	Base36 bool
}

// ShapeCounter is implemented by credential sources that can count their
// SCRAM credentials by shape (MemoryStore, control.Credentials).
type ShapeCounter interface {
	// ScramShapes calls add once per mechanism and shape, with the
	// number of credentials that have it.
	ScramShapes(add func(mechanism string, s ScramShape, n int))
}

// defaultShape is the shape of a credential NewScramCredential makes.
var defaultShape = ScramShape{SaltLen: saltLen, Iterations: DefaultIterations}

// ShapeOf returns c's shape.
func ShapeOf(c ScramCredential) ScramShape {
	return ScramShape{SaltLen: len(c.Salt), Iterations: c.Iterations, Base36: isBase36(c.Salt)}
}

func isBase36(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return len(b) > 0
}

// NewDecoys returns the decoys derived from secret (at least 16 bytes),
// shaped like the credentials shapes count.
func NewDecoys(secret []byte, shapes ...ShapeCounter) (*Decoys, error) {
	if len(secret) < 16 {
		return nil, errors.New("auth: decoy secret shorter than 16 bytes")
	}
	return &Decoys{secret: bytes.Clone(secret), shapes: shapes}, nil
}

// census counts the known credentials by mechanism and shape.
func (d *Decoys) census() map[string]map[ScramShape]int {
	out := map[string]map[ScramShape]int{}
	for _, s := range d.shapes {
		s.ScramShapes(func(mech string, sh ScramShape, n int) {
			if out[mech] == nil {
				out[mech] = map[ScramShape]int{}
			}
			out[mech][sh] += n
		})
	}
	return out
}

// typical is the most common shape (ties: the longer salt, then more
// iterations, so the choice does not depend on map order).
func typical(shapes map[ScramShape]int) (ScramShape, bool) {
	var best ScramShape
	n := 0
	for s, c := range shapes {
		if c > n || c == n && (s.SaltLen > best.SaltLen || s.SaltLen == best.SaltLen && s.Iterations > best.Iterations) {
			best, n = s, c
		}
	}
	return best, n > 0
}

// Scram is the credential an unknown user is shown for mechanism:
// deterministic in the secret, the mechanism and the name.
func (d *Decoys) Scram(user, mechanism string) ScramCredential {
	shape, ok := typical(d.census()[mechanism])
	if !ok {
		shape = defaultShape
	}
	return d.credential(user, mechanism, shape)
}

// Plain is the credential an unknown user's PLAIN password is checked
// against: the mechanism a known user's check takes (SCRAM-SHA-512 when
// users have it, as PlainViaScram prefers it) and its typical shape.
func (d *Decoys) Plain(user string) ScramCredential {
	c := d.census()
	for _, mech := range []string{MechanismScramSHA512, MechanismScramSHA256} {
		if shape, ok := typical(c[mech]); ok {
			return d.credential(user, mech, shape)
		}
	}
	return d.credential(user, MechanismScramSHA512, defaultShape)
}

func (d *Decoys) credential(user, mechanism string, shape ScramShape) ScramCredential {
	if d.fixed != nil {
		shape = *d.fixed
	}
	h, ok := scramHash(mechanism)
	if !ok {
		mechanism = MechanismScramSHA512
		h, _ = scramHash(mechanism)
	}
	size := h().Size()
	label := mechanism + "\x00" + user
	salt := deriveBytes(d.secret, "salt\x00"+label, max(shape.SaltLen, 1))
	if shape.Base36 {
		const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
		for i, b := range salt {
			salt[i] = digits[int(b)%len(digits)]
		}
	}
	iters := shape.Iterations
	if iters < MinIterations || iters > MaxIterations {
		iters = DefaultIterations
	}
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       salt,
		Iterations: iters,
		StoredKey:  deriveBytes(d.secret, "stored\x00"+label, size),
		ServerKey:  deriveBytes(d.secret, "server\x00"+label, size),
	}
}

// SecretSize is the length of the secret LoadOrCreateSecret makes.
const SecretSize = 32

// LoadOrCreateSecret returns the secret kept in path, creating it (random,
// SecretSize bytes, mode 0600, written to a temporary file, fsync'd and
// renamed into place) if there is none. A file of another size is an
// error, never replaced: it may be another program's.
func LoadOrCreateSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil && len(b) == SecretSize:
		return b, nil
	case err == nil:
		return nil, fmt.Errorf("auth: %s holds %d bytes, not a %d-byte secret", path, len(b), SecretSize)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("auth: %w", err)
	}
	b = make([]byte, SecretSize)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("auth: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("auth: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	// Link rather than rename: of two processes starting on the same
	// directory, the second keeps the first's secret.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateSecret(path)
		}
		return nil, fmt.Errorf("auth: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return b, nil
}
