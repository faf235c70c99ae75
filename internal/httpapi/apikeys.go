package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"time"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
)

// APIKeyManager creates, lists and revokes API keys: control.Credentials'
// Operator() (the admin port is trusted, see apiKeys) or, with Kafka-style
// authorization of the initiator, a *control.Credentials.
type APIKeyManager interface {
	CreateAPIKey(ctx context.Context, who control.Initiator, identity string) (plaintext string, key auth.APIKey, err error)
	ListAPIKeys() ([]auth.APIKey, error)
	RevokeAPIKey(ctx context.Context, who control.Initiator, id string) error
}

// HTTPAdmin is the principal the admin port's changes are made and
// audited as.
var HTTPAdmin = principal.Principal{Type: "User", Name: "http-admin"}

// ListenerAdminHTTP is the listener name of the admin port in audit events.
const ListenerAdminHTTP = "admin-http"

// APIKey is an API key as the API shows it: never the key's hash, and the
// key itself (Key) only in the answer that creates it.
type APIKey struct {
	ID       string `json:"id"`
	Identity string `json:"identity"`
	Key      string `json:"key,omitempty"`
	Created  string `json:"created"` // RFC 3339, UTC
	Revoked  bool   `json:"revoked"`
}

func apiKeyJSON(k auth.APIKey) APIKey {
	return APIKey{ID: k.ID, Identity: k.Identity, Created: k.Created.UTC().Format(time.RFC3339), Revoked: k.Revoked}
}

// maxAPIKeyBody bounds a create request's body.
const maxAPIKeyBody = 64 << 10

// apiKeys serves the API-key endpoints:
//
//	POST   /api/v1/apikeys       {"identity": "svc-orders"}
//	       → 201 {"id", "identity", "key", "created", "revoked": false}
//	GET    /api/v1/apikeys       → 200 {"apikeys": [{"id", "identity", "created", "revoked"}]}
//	DELETE /api/v1/apikeys/{id}  → 200 {"id", "identity", "created", "revoked": true}
//
// The key is in the POST answer only: Tollgate keeps its SHA-256, so it
// cannot be shown again. Clients authenticate with SASL/PLAIN, user name
// "token", the key as password, as User:<identity>.
//
// The admin port is the operator's interface, not a Kafka listener: it has
// no authentication of its own and listens on 127.0.0.1 by default, so
// whoever can reach it manages keys. Changes are audited as principal
// User:http-admin, listener admin-http, source the HTTP client's address,
// client id its User-Agent. Bind the port to a wider address only behind
// something that authenticates operators. POST must be sent as
// application/json, which a browser cannot do cross-origin without a CORS
// preflight (which this port never grants).
//
// Errors are {"error": "..."}: 400 malformed request or identity, 403 the
// manager's authorization refused, 404 no such key, 415 not JSON, 503 no
// key manager configured, or the store or a required audit log failed
// (nothing was changed).
type apiKeys struct{ m APIKeyManager }

func (a apiKeys) initiator(r *http.Request) control.Initiator {
	who := control.Initiator{Principal: HTTPAdmin, Listener: ListenerAdminHTTP}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		who.Source = ap
	}
	ua := r.UserAgent()
	if len(ua) > 256 {
		ua = ua[:256]
	}
	who.ClientID = ua
	return who
}

func (a apiKeys) ok(w http.ResponseWriter) bool {
	if a.m == nil {
		fail(w, http.StatusServiceUnavailable, "API keys are not managed by this gateway (no data directory)")
		return false
	}
	return true
}

func keyError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, control.ErrInvalid):
		fail(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, control.ErrNotFound):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, control.ErrNotAuthorized):
		fail(w, http.StatusForbidden, err.Error())
	default:
		fail(w, http.StatusServiceUnavailable, err.Error())
	}
}

func (a apiKeys) create(w http.ResponseWriter, r *http.Request) {
	if !a.ok(w) {
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		fail(w, http.StatusUnsupportedMediaType, `send {"identity": "..."} as Content-Type: application/json`)
		return
	}
	var body struct {
		Identity *string `json:"identity"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAPIKeyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		fail(w, http.StatusBadRequest, "request body: "+err.Error())
		return
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		fail(w, http.StatusBadRequest, "request body: more than one JSON value")
		return
	}
	if body.Identity == nil {
		fail(w, http.StatusBadRequest, `identity is required: {"identity": "..."}`)
		return
	}
	plaintext, key, err := a.m.CreateAPIKey(r.Context(), a.initiator(r), *body.Identity)
	if err != nil {
		keyError(w, err)
		return
	}
	out := apiKeyJSON(key)
	out.Key = plaintext
	writeJSON(w, http.StatusCreated, out)
}

func (a apiKeys) list(w http.ResponseWriter, r *http.Request) {
	if !a.ok(w) {
		return
	}
	keys, err := a.m.ListAPIKeys()
	if err != nil {
		keyError(w, err)
		return
	}
	out := make([]APIKey, len(keys))
	for i, k := range keys {
		out[i] = apiKeyJSON(k)
	}
	writeJSON(w, http.StatusOK, map[string]any{"apikeys": out})
}

func (a apiKeys) revoke(w http.ResponseWriter, r *http.Request) {
	if !a.ok(w) {
		return
	}
	id := r.PathValue("id")
	if err := a.m.RevokeAPIKey(r.Context(), a.initiator(r), id); err != nil {
		keyError(w, err)
		return
	}
	out := APIKey{ID: id, Revoked: true}
	if keys, err := a.m.ListAPIKeys(); err == nil {
		for _, k := range keys {
			if k.ID == id {
				out = apiKeyJSON(k)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
