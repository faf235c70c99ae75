package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"errors"
	"fmt"
	"sync"

	"github.com/tollgate/tollgate/internal/principal"
)

// SASL mechanism names as they appear in SaslHandshake.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// Mechanisms returns the mechanisms NewServer implements, in the order a
// SaslHandshake response lists them.
func Mechanisms() []string {
	return []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}
}

// Server is the server side of one SASL exchange on one connection. It is
// not safe for concurrent use; a session drives it from one goroutine.
type Server interface {
	// Mechanism is the SASL mechanism name.
	Mechanism() string
	// Step consumes the client's next token and returns the token to send
	// back. done reports that the exchange succeeded; challenge must still
	// be sent (PLAIN: empty; SCRAM: the server-final message). A non-nil
	// error is always an *AuthError and ends the exchange.
	Step(clientToken []byte) (challenge []byte, done bool, err error)
	// Principal is the authenticated principal once Step returned done; the
	// zero Principal before.
	Principal() principal.Principal
}

// Credential names the credential a completed exchange used ("user:<name>"
// or "apikey:<id>"), for closing its connections when it is withdrawn.
func Credential(s Server) string {
	switch s := s.(type) {
	case *plainServer:
		return s.credential
	case *scramServer:
		if s.principal.Name != "" {
			return "user:" + s.user
		}
	}
	return ""
}

// ErrAuthenticationFailed matches (errors.Is) every error Step returns.
var ErrAuthenticationFailed = errors.New("SASL authentication failed")

// ErrUnsupportedMechanism is returned by NewServer for a mechanism it does
// not implement (answer UNSUPPORTED_SASL_MECHANISM, 33).
var ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")

// AuthError is a failed SASL exchange. Message is what the client is told
// (SaslAuthenticate ErrorMessage, with ErrorCode 58); Detail is for the
// server's log only. Failures that depend on whether the user exists carry
// no Detail, so unknown user and wrong password are the same error.
type AuthError struct {
	Message string
	Detail  string
	limited bool // a refusal by a LoginLimiter
}

func (e *AuthError) Error() string {
	if e.Detail == "" {
		return e.Message
	}
	return e.Message + " (" + e.Detail + ")"
}

// Is makes errors.Is(err, ErrAuthenticationFailed) true, and
// errors.Is(err, ErrTooManyFailedLogins) for a LoginLimiter's refusal.
func (e *AuthError) Is(target error) bool {
	return target == ErrAuthenticationFailed || target == ErrTooManyFailedLogins && e.limited
}

// ClientMessage is the message to send the client for an error Step
// returned: the AuthError's Message, or Kafka's generic failure text.
func ClientMessage(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return "Authentication failed"
}

// Kafka's client-visible failure messages.
const (
	// PlainServerCallbackHandler.
	msgInvalidUsernameOrPassword = "Authentication failed: Invalid username or password"
	// ScramSaslServer.
	msgInvalidUserCredentials = "Authentication failed: Invalid user credentials"
	// PlainSaslServer and ScramSaslServer.
	msgAuthzidMismatch = "Authentication failed: Client requested an authorization id that is different from username"
)

// The credential failures: one value each, no Detail, whatever the cause.
var (
	errPlainCredentials = &AuthError{Message: msgInvalidUsernameOrPassword}
	errScramCredentials = &AuthError{Message: msgInvalidUserCredentials}
)

// genericFailure is SaslServerAuthenticator's message for a SaslException
// (a malformed exchange), with the detail kept for the log.
func genericFailure(mechanism, detail string) *AuthError {
	return &AuthError{
		Message: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism,
		Detail:  detail,
	}
}

// ServerOption configures NewServer.
type ServerOption func(*serverOptions)

type serverOptions struct {
	fakeSecret []byte
	fakeShape  *ScramShape
	nonce      func() string // tests
}

// WithFakeSecret sets the secret from which SCRAM derives the salt and keys
// it presents for unknown users, so that probing a name shows the same
// salt every time, as for a real user. It overrides the lookup's Decoys
// (NewLookupDecoys), which is how the gateway passes its persistent one;
// without either, a random per-process secret is used.
func WithFakeSecret(secret []byte) ServerOption {
	return func(o *serverOptions) { o.fakeSecret = append([]byte(nil), secret...) }
}

// WithFakeShape fixes the salt length and iteration count presented for
// unknown SCRAM users. By default they follow the credentials the lookup
// holds (see Decoys), or 32 and DefaultIterations, what
// NewScramCredential produces.
func WithFakeShape(saltLen, iterations int) ServerOption {
	return func(o *serverOptions) {
		if saltLen > 0 && iterations >= MinIterations && iterations <= MaxIterations {
			o.fakeShape = &ScramShape{SaltLen: saltLen, Iterations: iterations}
		}
	}
}

// decoys is what unknown users are checked against: the options' secret
// and shape if given, else the lookup's Decoys, else the process secret;
// shaped like the lookup's credentials when it can count them.
func (o serverOptions) decoys(creds CredentialLookup) *Decoys {
	if d, ok := creds.(interface{ Decoys() *Decoys }); ok && len(o.fakeSecret) == 0 && o.fakeShape == nil {
		if d := d.Decoys(); d != nil {
			return d
		}
	}
	secret := o.fakeSecret
	if len(secret) == 0 {
		secret = processSecret()
	}
	d := &Decoys{secret: secret, fixed: o.fakeShape}
	if sc, ok := creds.(ShapeCounter); ok {
		d.shapes = []ShapeCounter{sc}
	}
	return d
}

// withNonceGenerator fixes the server nonce (tests).
func withNonceGenerator(f func() string) ServerOption {
	return func(o *serverOptions) { o.nonce = f }
}

var processSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
})

// NewServer starts the server side of one SASL exchange with the given
// mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), checking credentials
// against creds.
func NewServer(mechanism string, creds CredentialLookup, opts ...ServerOption) (Server, error) {
	if creds == nil {
		return nil, errors.New("auth: nil CredentialLookup")
	}
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch mechanism {
	case MechanismPlain:
		return &plainServer{creds: creds}, nil
	case MechanismScramSHA256, MechanismScramSHA512:
		return newScramServer(mechanism, creds, o), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
}

// deriveBytes expands HMAC-SHA512(secret, label || counter) to n bytes.
func deriveBytes(secret []byte, label string, n int) []byte {
	out := make([]byte, 0, n)
	for ctr := byte(0); len(out) < n; ctr++ {
		m := hmac.New(sha512.New, secret)
		m.Write([]byte(label))
		m.Write([]byte{0, ctr})
		out = append(out, m.Sum(nil)...)
	}
	return out[:n]
}
