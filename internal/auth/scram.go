package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"

	xscram "github.com/xdg-go/scram"

	"github.com/tollgate/tollgate/internal/principal"
)

// scramClientFirst is a parsed SCRAM client-first message (RFC 5802 §7 as
// restricted by Kafka's ScramMessages.ClientFirstMessage).
type scramClientFirst struct {
	GS2Header  string // "n,," or "n,a=<saslname>,"
	AuthzID    string // decoded
	User       string // decoded saslname
	Nonce      string
	Extensions [][2]string // in order, after the nonce
	Bare       string      // client-first-message-bare
}

// TokenAuth reports Kafka's delegation-token extension (KIP-48), which,
// like Kafka, is read with Boolean.parseBoolean.
func (m scramClientFirst) TokenAuth() bool {
	for _, kv := range m.Extensions {
		if kv[0] == "tokenauth" && strings.EqualFold(kv[1], "true") {
			return true
		}
	}
	return false
}

// parseScramClientFirst parses a client-first message with Kafka's grammar:
//
//	n,[a=saslname],n=saslname,r=printable(,ALPHA=value)*
//
// Channel binding ("y", "p=") and the reserved "m=" attribute are refused.
func parseScramClientFirst(msg []byte) (scramClientFirst, error) {
	var m scramClientFirst
	s := string(msg)
	if !strings.HasPrefix(s, "n,") {
		return m, errors.New("invalid SCRAM client first message: gs2 header must start with \"n,\" (no channel binding)")
	}
	rest := s[2:]
	i := strings.IndexByte(rest, ',')
	if i < 0 {
		return m, errors.New("invalid SCRAM client first message: truncated gs2 header")
	}
	if authz := rest[:i]; authz != "" {
		v, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return m, errors.New("invalid SCRAM client first message: bad authzid")
		}
		name, err := decodeSaslName(v)
		if err != nil {
			return m, fmt.Errorf("invalid SCRAM client first message: authzid: %w", err)
		}
		m.AuthzID = name
	}
	m.GS2Header = s[:2+i+1]
	m.Bare = rest[i+1:]
	fields := strings.Split(m.Bare, ",")
	if len(fields) < 2 {
		return m, errors.New("invalid SCRAM client first message: truncated")
	}
	if strings.HasPrefix(fields[0], "m=") {
		return m, errors.New("invalid SCRAM client first message: mandatory extensions (m=) are not supported")
	}
	v, ok := strings.CutPrefix(fields[0], "n=")
	if !ok {
		return m, errors.New("invalid SCRAM client first message: missing n=")
	}
	name, err := decodeSaslName(v)
	if err != nil {
		return m, fmt.Errorf("invalid SCRAM client first message: username: %w", err)
	}
	m.User = name
	if m.Nonce, ok = strings.CutPrefix(fields[1], "r="); !ok || !isPrintable(m.Nonce) {
		return m, errors.New("invalid SCRAM client first message: bad nonce")
	}
	if m.Extensions, err = parseExtensions(fields[2:]); err != nil {
		return m, fmt.Errorf("invalid SCRAM client first message: %w", err)
	}
	return m, nil
}

// scramClientFinal is a parsed SCRAM client-final message.
type scramClientFinal struct {
	ChannelBinding []byte // decoded c=
	Nonce          string
	Extensions     [][2]string
	Proof          []byte
	WithoutProof   string
}

// parseScramClientFinal parses `c=base64,r=printable(,ALPHA=value)*,p=base64`.
func parseScramClientFinal(msg []byte) (scramClientFinal, error) {
	var m scramClientFinal
	s := string(msg)
	fields := strings.Split(s, ",")
	if len(fields) < 3 {
		return m, errors.New("invalid SCRAM client final message: truncated")
	}
	cb, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return m, errors.New("invalid SCRAM client final message: missing c=")
	}
	var err error
	if m.ChannelBinding, err = decodeBase64(cb); err != nil || len(m.ChannelBinding) == 0 {
		return m, errors.New("invalid SCRAM client final message: bad channel binding")
	}
	if m.Nonce, ok = strings.CutPrefix(fields[1], "r="); !ok || !isPrintable(m.Nonce) {
		return m, errors.New("invalid SCRAM client final message: bad nonce")
	}
	last := fields[len(fields)-1]
	p, ok := strings.CutPrefix(last, "p=")
	if !ok {
		return m, errors.New("invalid SCRAM client final message: missing proof")
	}
	if m.Proof, err = decodeBase64(p); err != nil || len(m.Proof) == 0 {
		return m, errors.New("invalid SCRAM client final message: bad proof")
	}
	if m.Extensions, err = parseExtensions(fields[2 : len(fields)-1]); err != nil {
		return m, fmt.Errorf("invalid SCRAM client final message: %w", err)
	}
	m.WithoutProof = s[:len(s)-len(last)-1]
	return m, nil
}

// parseExtensions parses Kafka's `ALPHA=value` extension fields; keys may
// not repeat.
func parseExtensions(fields []string) ([][2]string, error) {
	var out [][2]string
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" || !isAlpha(k) || !isValue(v) {
			return nil, fmt.Errorf("bad extension %q", f)
		}
		for _, kv := range out {
			if kv[0] == k {
				return nil, fmt.Errorf("repeated extension %q", k)
			}
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// decodeSaslName undoes RFC 5802 saslname escaping (=2C is ',', =3D is
// '='). Kafka allows only \x01-\x7F.
func decodeSaslName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty name")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", errors.New("'=' not followed by 2C or 3D")
			}
			i += 2
		case c == ',' || c == 0 || c > 0x7f:
			return "", fmt.Errorf("character %#x not allowed", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// encodeSaslName escapes '=' and ',' in a name (RFC 5802 saslname).
func encodeSaslName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

func isPrintable(s string) bool { // \x21-\x7E except ','
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func isValue(s string) bool { // \x01-\x7F except ','
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c > 0x7f || c == ',' {
			return false
		}
	}
	return true
}

func isAlpha(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// decodeBase64 is strict standard base64: only the RFC 4648 alphabet and
// canonical padding (Go's decoder alone skips \r and \n).
func decodeBase64(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '+' && c != '/' && c != '=' {
			return nil, errors.New("invalid base64")
		}
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}

// scramHash returns the hash of a SCRAM mechanism.
func scramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New, true
	case MechanismScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

type scramState uint8

const (
	scramWantFirst scramState = iota
	scramWantFinal
	scramDone
	scramFailed
)

// scramServer runs one SCRAM exchange. The message grammar, the Kafka
// rules (authzid, tokenauth) and unknown users are handled here; nonce
// generation, the server messages and the proof check are xdg-go/scram's.
type scramServer struct {
	mech      string
	hashSize  int
	creds     CredentialLookup
	opts      serverOptions
	state     scramState
	conv      *xscram.ServerConversation
	gs2Header string
	nonce     string // client + server nonce
	user      string
	cred      ScramCredential // the user's, or the fake one
	bare      string          // client-first-message-bare
	serverMsg string          // server-first-message
	known     bool
	principal principal.Principal
}

func newScramServer(mechanism string, creds CredentialLookup, o serverOptions) *scramServer {
	h, _ := scramHash(mechanism)
	return &scramServer{mech: mechanism, hashSize: h().Size(), creds: creds, opts: o}
}

func (s *scramServer) Mechanism() string { return s.mech }

func (s *scramServer) Principal() principal.Principal { return s.principal }

func (s *scramServer) Step(tok []byte) ([]byte, bool, error) {
	switch s.state {
	case scramWantFirst:
		out, err := s.first(tok)
		if err != nil {
			s.state = scramFailed
			return nil, false, err
		}
		s.state = scramWantFinal
		return out, false, nil
	case scramWantFinal:
		out, err := s.final(tok)
		if err != nil {
			s.state = scramFailed
			return nil, false, err
		}
		s.state = scramDone
		return out, true, nil
	}
	return nil, false, genericFailure(s.mech, "SCRAM exchange already complete")
}

func (s *scramServer) first(tok []byte) ([]byte, error) {
	m, err := parseScramClientFirst(tok)
	if err != nil {
		return nil, genericFailure(s.mech, err.Error())
	}
	if m.TokenAuth() {
		return nil, genericFailure(s.mech, "delegation token authentication (tokenauth) is not supported")
	}
	if m.AuthzID != "" && m.AuthzID != m.User {
		return nil, &AuthError{Message: msgAuthzidMismatch}
	}
	cred, ok := s.creds.Scram(m.User, s.mech)
	if ok && cred.validate(s.mech) != nil {
		ok = false
	}
	if !ok {
		cred = s.opts.decoys(s.creds).Scram(m.User, s.mech)
	}
	s.user, s.known, s.gs2Header, s.cred = m.User, ok, m.GS2Header, cred
	s.bare = strings.TrimPrefix(string(tok), m.GS2Header)

	hashGen := xscram.SHA256
	if s.mech == MechanismScramSHA512 {
		hashGen = xscram.SHA512
	}
	stored := xscram.StoredCredentials{
		KeyFactors: xscram.KeyFactors{Salt: string(cred.Salt), Iters: cred.Iterations},
		StoredKey:  cred.StoredKey,
		ServerKey:  cred.ServerKey,
	}
	srv, err := hashGen.NewServer(func(string) (xscram.StoredCredentials, error) { return stored, nil })
	if err != nil {
		return nil, genericFailure(s.mech, err.Error())
	}
	if s.opts.nonce != nil {
		srv = srv.WithNonceGenerator(s.opts.nonce)
	}
	s.conv = srv.NewConversation()
	out, err := s.conv.Step(string(tok))
	if err != nil {
		return nil, genericFailure(s.mech, err.Error())
	}
	nonce, _, _ := strings.Cut(strings.TrimPrefix(out, "r="), ",")
	s.nonce, s.serverMsg = nonce, out
	return []byte(out), nil
}

func (s *scramServer) final(tok []byte) ([]byte, error) {
	// Kafka answers every client-final failure with "Invalid user
	// credentials"; the detail, which never depends on the user existing,
	// goes to the log.
	m, err := parseScramClientFinal(tok)
	if err != nil {
		return nil, &AuthError{Message: msgInvalidUserCredentials, Detail: err.Error()}
	}
	if string(m.ChannelBinding) != s.gs2Header {
		return nil, &AuthError{Message: msgInvalidUserCredentials, Detail: "channel binding does not match the gs2 header"}
	}
	if m.Nonce != s.nonce {
		if !strings.HasSuffix(m.Nonce, s.nonce) {
			return nil, &AuthError{Message: msgInvalidUserCredentials, Detail: "invalid client nonce in the final client message"}
		}
		// librdkafka before 2.6.1 repeats its client nonce in front of
		// the combined nonce (librdkafka#4895). Kafka 3.8.1 to 3.9 took
		// a nonce that ends with the combined one; so does Tollgate: the
		// proof is still computed over the exact messages exchanged.
		return s.legacyFinal(tok, m)
	}
	if len(m.Proof) != s.hashSize {
		return nil, &AuthError{Message: msgInvalidUserCredentials, Detail: "proof has the wrong length"}
	}
	out, err := s.conv.Step(string(tok))
	if err != nil || !s.conv.Valid() || !s.known {
		return nil, errScramCredentials
	}
	s.principal = principal.Principal{Type: "User", Name: s.user}
	return []byte(out), nil
}

// legacyFinal verifies a client-final message whose nonce only ends with
// the expected one (RFC 5802 §3: ClientKey = ClientProof XOR
// HMAC(StoredKey, AuthMessage), valid when H(ClientKey) = StoredKey).
func (s *scramServer) legacyFinal(tok []byte, m scramClientFinal) ([]byte, error) {
	if len(m.Proof) != s.hashSize {
		return nil, &AuthError{Message: msgInvalidUserCredentials, Detail: "proof has the wrong length"}
	}
	withoutProof, _, ok := strings.Cut(string(tok), ",p=")
	if !ok {
		return nil, &AuthError{Message: msgInvalidUserCredentials, Detail: "no proof"}
	}
	h, _ := scramHash(s.mech)
	authMsg := []byte(s.bare + "," + s.serverMsg + "," + withoutProof)
	sig := hmac.New(h, s.cred.StoredKey)
	sig.Write(authMsg)
	clientKey := sig.Sum(nil)
	for i := range clientKey {
		clientKey[i] ^= m.Proof[i]
	}
	stored := h()
	stored.Write(clientKey)
	if !s.known || !hmac.Equal(stored.Sum(nil), s.cred.StoredKey) {
		return nil, errScramCredentials
	}
	srvSig := hmac.New(h, s.cred.ServerKey)
	srvSig.Write(authMsg)
	s.principal = principal.Principal{Type: "User", Name: s.user}
	return []byte("v=" + base64.StdEncoding.EncodeToString(srvSig.Sum(nil))), nil
}
