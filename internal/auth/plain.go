package auth

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/principal"
)

// plainMessage is a parsed SASL/PLAIN client message.
type plainMessage struct {
	AuthzID  string
	User     string
	Password string
}

// parsePlain parses `authzid NUL authcid NUL passwd` with Kafka's rules
// (PlainSaslServer.extractTokens): exactly three tokens, non-empty user and
// password. It does not check the authzid against the user.
func parsePlain(msg []byte) (plainMessage, error) {
	if !utf8.Valid(msg) {
		return plainMessage{}, errors.New("invalid SASL/PLAIN response: not UTF-8")
	}
	parts := bytes.SplitN(msg, []byte{0}, 4)
	if len(parts) != 3 {
		return plainMessage{}, fmt.Errorf("invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))
	}
	m := plainMessage{AuthzID: string(parts[0]), User: string(parts[1]), Password: string(parts[2])}
	if m.User == "" {
		return plainMessage{}, errors.New("authentication failed: username not specified")
	}
	if m.Password == "" {
		return plainMessage{}, errors.New("authentication failed: password not specified")
	}
	return m, nil
}

type plainServer struct {
	creds      CredentialLookup
	stepped    bool
	principal  principal.Principal
	credential string
}

func (s *plainServer) Mechanism() string { return MechanismPlain }

func (s *plainServer) Principal() principal.Principal { return s.principal }

func (s *plainServer) Step(tok []byte) ([]byte, bool, error) {
	if s.stepped {
		return nil, false, genericFailure(MechanismPlain, "SASL/PLAIN exchange already complete")
	}
	s.stepped = true
	m, err := parsePlain(tok)
	if err != nil {
		return nil, false, genericFailure(MechanismPlain, err.Error())
	}
	// Kafka checks the authzid after the password; checking it first costs
	// nothing in secrecy (it does not depend on the user existing) and
	// spares a password hash for a request that fails anyway.
	if m.AuthzID != "" && m.AuthzID != m.User {
		return nil, false, &AuthError{Message: msgAuthzidMismatch}
	}
	p, ok := s.creds.Plain(m.User, m.Password)
	if !ok {
		return nil, false, errPlainCredentials
	}
	s.principal = p
	s.credential = "user:" + m.User
	if m.User == APIKeyUser {
		id, _ := ParseAPIKey(m.Password)
		s.credential = "apikey:" + id
	}
	return []byte{}, true, nil
}
