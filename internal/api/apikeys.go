package api

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
