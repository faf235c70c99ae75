package api

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// APIKey is an API key as the API shows it: never the key's hash, and the
// key itself (Key) only in the answer that creates it.
type APIKey struct {
	ID       string `json:"id"`
	Identity string `json:"identity"`
	Key      string `json:"key,omitempty"`
	Created  string `json:"created"` // RFC 3339, UTC
	Revoked  bool   `json:"revoked"`
}

// APIKeyCreate is POST /api/v1/apikeys's body: {"identity": "..."}
// (required: nil is a missing identity).
type APIKeyCreate struct {
	Identity *string `json:"identity"`
}

// APIKeys is GET /api/v1/apikeys's answer.
type APIKeys struct {
	APIKeys []APIKey `json:"apikeys"`
}

// MaxIdentityLen bounds an API key's identity (its principal name).
const MaxIdentityLen = 1024

// anonymous is Kafka's principal name for unauthenticated connections
// (principal.Anonymous: this package imports nothing of the project).
const anonymous = "ANONYMOUS"

// CheckIdentity says what is wrong with an API key's identity, or nil: not
// empty, at most MaxIdentityLen bytes of UTF-8 without control characters,
// not ANONYMOUS. The control plane's CreateAPIKey and the CLI's offline
// `tollgate apikeys create --file` both check with it.
func CheckIdentity(identity string) error {
	switch {
	case identity == "":
		return errors.New("identity is required (the principal name the key authenticates as)")
	case len(identity) > MaxIdentityLen:
		return fmt.Errorf("identity is %d bytes long, more than %d", len(identity), MaxIdentityLen)
	case !utf8.ValidString(identity):
		return errors.New("identity is not valid UTF-8")
	case identity == anonymous:
		return errors.New("identity " + anonymous + " is the unauthenticated principal")
	}
	for _, r := range identity {
		if unicode.IsControl(r) {
			return fmt.Errorf("identity contains the control character %U", r)
		}
	}
	return nil
}
