package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNoIdentity is a login whose principal Tollgate cannot read from the
// client's first message in pass-through mode: it is refused, never bound
// as ANONYMOUS.
var ErrNoIdentity = errors.New("the principal of this login cannot be read")

// DefaultSubClaim is Kafka's sasl.oauthbearer.sub.claim.name default.
const DefaultSubClaim = "sub"

// PassthroughIdentity returns the principal name of a pass-through login
// from the client's first SASL message. The upstream brokers authenticate;
// Tollgate only needs to know whom to account the connection to once the
// broker's exchange has completed:
//
//   - PLAIN: the authcid (for APIKeyUser that is "token", not an identity);
//   - SCRAM-SHA-256/512: the decoded saslname of the client-first message;
//   - OAUTHBEARER: the claim named claim ("" is Kafka's default, "sub") of
//     the bearer JWT in the client initial response, decoded without
//     verifying the signature (the broker verifies it, and Tollgate binds
//     the name only once the broker has accepted the token).
//
// It fails closed with an error wrapping ErrNoIdentity whenever the name
// cannot be read for sure: a malformed message, a SCRAM client-first with
// the reserved m= extension, a SCRAM delegation-token login (tokenauth=true:
// the name is a token id, and the broker's SCRAM exchange never says whose
// token it is), an authorization id other than the user, a token without
// the claim. It does not check credentials.
func PassthroughIdentity(mechanism string, msg []byte, claim string) (string, error) {
	if claim == "" {
		claim = DefaultSubClaim
	}
	switch mechanism {
	case MechanismPlain:
		m, err := parsePlain(msg)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoIdentity, err)
		}
		if m.AuthzID != "" && m.AuthzID != m.User {
			return "", fmt.Errorf("%w: authorization id %q differs from the user", ErrNoIdentity, m.AuthzID)
		}
		return m.User, nil
	case MechanismScramSHA256, MechanismScramSHA512:
		m, err := parseScramClientFirst(msg)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoIdentity, err)
		}
		if m.TokenAuth() {
			return "", fmt.Errorf("%w: a delegation-token login (tokenauth) names a token, not its owner", ErrNoIdentity)
		}
		if m.AuthzID != "" && m.AuthzID != m.User {
			return "", fmt.Errorf("%w: authorization id %q differs from the user", ErrNoIdentity, m.AuthzID)
		}
		return m.User, nil
	case MechanismOAuthBearer:
		m, err := parseOAuthBearerInitial(msg)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoIdentity, err)
		}
		sub, err := jwtClaim(m.Token, claim)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoIdentity, err)
		}
		if m.AuthzID != "" && m.AuthzID != sub {
			return "", fmt.Errorf("%w: authorization id %q differs from the token's %s", ErrNoIdentity, m.AuthzID, claim)
		}
		return sub, nil
	}
	return "", fmt.Errorf("%w: %w: %q", ErrNoIdentity, ErrUnsupportedMechanism, mechanism)
}

// CarriesIdentity reports whether the client's SASL message at step (its
// index among the exchange's SaslAuthenticate requests) names the
// principal, and so must go through PassthroughIdentity: the first
// message of PLAIN and SCRAM, and every OAUTHBEARER message but the %x01
// that acknowledges an error challenge — Kafka's OAuthBearerSaslServer
// evaluates any other message as a new initial response, so the token the
// broker finally accepts may not be the first one sent.
func CarriesIdentity(mechanism string, step int, msg []byte) bool {
	if mechanism == MechanismOAuthBearer {
		return len(msg) != 1 || msg[0] != 0x01
	}
	return step == 0
}

// ExchangeComplete reports whether a broker's successful (error 0)
// SaslAuthenticate answer ends a pass-through login, as Kafka's servers
// end it: PLAIN after its one step; SCRAM with the server-final message
// (v=...), which the broker sends only after verifying the client's proof,
// to the client's second message (step 1); OAUTHBEARER with an empty
// answer — a non-empty one is OAuthBearerSaslServer's error challenge
// ({"status":"invalid_token"...}) to an invalid token, which the broker
// fails only once the client sends %x01. failed is true for an answer that
// can only be a failure (a SCRAM server-error e=...).
func ExchangeComplete(mechanism string, step int, serverMsg []byte) (complete, failed bool) {
	switch mechanism {
	case MechanismPlain:
		return true, false
	case MechanismScramSHA256, MechanismScramSHA512:
		switch {
		case strings.HasPrefix(string(serverMsg), "e="):
			return false, true
		case step == 1 && strings.HasPrefix(string(serverMsg), "v="):
			return true, false
		case step == 0 && strings.HasPrefix(string(serverMsg), "r="):
			return false, false
		}
		return false, true // not a SCRAM exchange this gateway can follow
	case MechanismOAuthBearer:
		return len(serverMsg) == 0, false
	}
	return false, true
}

// oauthBearerInitial is a parsed OAUTHBEARER client initial response
// (RFC 7628 §3.1, Kafka's OAuthBearerClientInitialResponse).
type oauthBearerInitial struct {
	AuthzID    string
	Scheme     string
	Token      string
	Extensions map[string]string
}

// parseOAuthBearerInitial parses
//
//	n,[a=saslname],\x01auth=Bearer <token>\x01[key=value\x01]...\x01
func parseOAuthBearerInitial(msg []byte) (oauthBearerInitial, error) {
	var m oauthBearerInitial
	s := string(msg)
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return m, errors.New("invalid OAUTHBEARER client first message: gs2 header must start with \"n,\"")
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return m, errors.New("invalid OAUTHBEARER client first message: truncated gs2 header")
	}
	if authz != "" {
		v, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return m, errors.New("invalid OAUTHBEARER client first message: bad authzid")
		}
		name, err := decodeSaslName(v)
		if err != nil {
			return m, fmt.Errorf("invalid OAUTHBEARER client first message: authzid: %w", err)
		}
		m.AuthzID = name
	}
	if !strings.HasPrefix(rest, "\x01") || !strings.HasSuffix(rest, "\x01\x01") || len(rest) < 3 {
		return m, errors.New("invalid OAUTHBEARER client first message: bad key-value framing")
	}
	body := rest[1 : len(rest)-2] // key=value pairs separated by \x01
	m.Extensions = map[string]string{}
	auth := ""
	for kv := range strings.SplitSeq(body, "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" || !isAlpha(k) || !isOAuthValue(v) {
			return m, fmt.Errorf("invalid OAUTHBEARER client first message: bad key-value pair %q", kv)
		}
		if _, dup := m.Extensions[k]; dup || (k == "auth" && auth != "") {
			return m, fmt.Errorf("invalid OAUTHBEARER client first message: repeated key %q", k)
		}
		if k == "auth" {
			auth = v
			continue
		}
		m.Extensions[k] = v
	}
	if auth == "" {
		return m, errors.New("invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !isWord(scheme) || !isTokenChars(token) {
		return m, errors.New("invalid OAUTHBEARER client first message: invalid 'auth' format")
	}
	if !strings.EqualFold(scheme, "bearer") {
		return m, fmt.Errorf("invalid scheme in OAUTHBEARER client first message: %s", scheme)
	}
	m.Scheme, m.Token = scheme, token
	return m, nil
}

func isOAuthValue(s string) bool { // [\x21-\x7E \t\r\n]+
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return s != ""
}

func isWord(s string) bool { // [\w]+
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isASCIIAlnum(c) && c != '_' {
			return false
		}
	}
	return s != ""
}

func isTokenChars(s string) bool { // [-_.a-zA-Z0-9]+
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isASCIIAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return s != ""
}

// jwtClaim returns a string claim of a compact JWS (header.payload.sig,
// the signature possibly empty as in unsecured JWTs) without verifying it.
func jwtClaim(token, claim string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("bearer token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", fmt.Errorf("bearer token payload: %w", err)
	}
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", fmt.Errorf("bearer token payload: %w", err)
	}
	raw, ok := claims[claim]
	if !ok {
		return "", fmt.Errorf("bearer token has no %q claim", claim)
	}
	var sub string
	if err := json.Unmarshal(raw, &sub); err != nil || strings.TrimSpace(sub) == "" {
		return "", fmt.Errorf("bearer token %q claim is not a non-empty string", claim)
	}
	return sub, nil
}
