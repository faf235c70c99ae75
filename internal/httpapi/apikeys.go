package httpapi

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
)

// APIKeyManager creates, lists and revokes API keys: a *control.Credentials,
// which authorizes the initiator as the Kafka API does (quota admins only)
// and audits every create and revoke, denied ones included. The admin port
// relies on it for that: do not hand it a manager that does not authorize.
type APIKeyManager interface {
	CreateAPIKey(ctx context.Context, who control.Initiator, identity string) (plaintext string, key auth.APIKey, err error)
	ListAPIKeys() ([]auth.APIKey, error)
	RevokeAPIKey(ctx context.Context, who control.Initiator, id string) error
}

func apiKeyJSON(k auth.APIKey) api.APIKey {
	return api.APIKey{ID: k.ID, Identity: k.Identity, Created: k.Created.UTC().Format(time.RFC3339), Revoked: k.Revoked}
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
// "token", the key as password, as User:<identity>; on this port with
// "Authorization: Bearer <key>".
//
// Creating and revoking need a quota admin (authorization.quota_admins),
// listing the read right; changes are audited with the caller's principal,
// listener admin-http, source the HTTP client's address, client id its
// User-Agent. POST must be sent as application/json, which a browser cannot
// do cross-origin without a CORS preflight (which this port never grants).
//
// Errors are {"error": "..."}: 400 malformed request or identity, 401
// ANONYMOUS may not do this (send a key), 403 the principal may not, 404 no
// such key, 415 not JSON, 503 no key manager configured, or the store or a
// required audit log failed (nothing was changed).
type apiKeys struct{ m APIKeyManager }

func (a apiKeys) ok(w http.ResponseWriter) bool {
	if a.m == nil {
		fail(w, http.StatusServiceUnavailable, "API keys are not managed by this gateway (no data directory)")
		return false
	}
	return true
}

func (a apiKeys) create(w http.ResponseWriter, r *http.Request) {
	if !a.ok(w) {
		return
	}
	identity, code, err := decodeCreate(r.Header.Get("Content-Type"), http.MaxBytesReader(w, r.Body, maxAPIKeyBody))
	if err != nil {
		fail(w, code, err.Error())
		return
	}
	who := initiatorOf(r)
	plaintext, key, err := a.m.CreateAPIKey(r.Context(), who, identity)
	if err != nil {
		controlError(w, who, "manage API keys", err)
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
		controlError(w, initiatorOf(r), "manage API keys", err)
		return
	}
	out := make([]api.APIKey, len(keys))
	for i, k := range keys {
		out[i] = apiKeyJSON(k)
	}
	writeJSON(w, http.StatusOK, api.APIKeys{APIKeys: out})
}

func (a apiKeys) revoke(w http.ResponseWriter, r *http.Request) {
	if !a.ok(w) {
		return
	}
	id := r.PathValue("id")
	who := initiatorOf(r)
	if err := a.m.RevokeAPIKey(r.Context(), who, id); err != nil {
		controlError(w, who, "manage API keys", err)
		return
	}
	out := api.APIKey{ID: id, Revoked: true}
	if keys, err := a.m.ListAPIKeys(); err == nil {
		for _, k := range keys {
			if k.ID == id {
				out = apiKeyJSON(k)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeCreate reads a create request: Content-Type application/json, one
// JSON object {"identity": "..."} and nothing else. code is the HTTP
// status of the error.
func decodeCreate(contentType string, body io.Reader) (identity string, code int, err error) {
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
		return "", http.StatusUnsupportedMediaType, errors.New(`send {"identity": "..."} as Content-Type: application/json`)
	}
	var req api.APIKeyCreate
	if err := decodeOne(body, &req); err != nil {
		return "", http.StatusBadRequest, err
	}
	if req.Identity == nil {
		return "", http.StatusBadRequest, errors.New(`identity is required: {"identity": "..."}`)
	}
	return *req.Identity, 0, nil
}
