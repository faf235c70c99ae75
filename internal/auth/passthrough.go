package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// UserFromClientMessage returns the user name in a client's first SASL
// message, for pass-through mode, where the upstream brokers authenticate
// and Tollgate only needs to know whom to account the connection to:
//
//   - PLAIN: the authcid (for APIKeyUser that is "token", not an identity);
//   - SCRAM-SHA-256/512: the decoded saslname of the client-first message
//     (with tokenauth=true this is a delegation token id);
//   - OAUTHBEARER: the "sub" claim of the bearer JWT in the client initial
//     response, decoded without verifying the signature (the upstream
//     verifies it).
//
// It does not check credentials. Malformed or truncated messages are
// errors.
func UserFromClientMessage(mechanism string, msg []byte) (string, error) {
	switch mechanism {
	case MechanismPlain:
		m, err := parsePlain(msg)
		if err != nil {
			return "", err
		}
		return m.User, nil
	case MechanismScramSHA256, MechanismScramSHA512:
		m, err := parseScramClientFirst(msg)
		if err != nil {
			return "", err
		}
		return m.User, nil
	case MechanismOAuthBearer:
		m, err := parseOAuthBearerInitial(msg)
		if err != nil {
			return "", err
		}
		return jwtSubject(m.Token)
	}
	return "", fmt.Errorf("%w: %q", ErrUnsupportedMechanism, mechanism)
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

// jwtSubject returns the "sub" claim of a compact JWS (header.payload.sig,
// the signature possibly empty as in unsecured JWTs) without verifying it.
func jwtSubject(token string) (string, error) {
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
	raw, ok := claims["sub"]
	if !ok {
		return "", errors.New("bearer token has no sub claim")
	}
	var sub string
	if err := json.Unmarshal(raw, &sub); err != nil || strings.TrimSpace(sub) == "" {
		return "", errors.New("bearer token sub claim is not a non-empty string")
	}
	return sub, nil
}
