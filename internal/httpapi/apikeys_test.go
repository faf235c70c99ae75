package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/store"
)

func newCredentials(t *testing.T) *control.Credentials {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &control.Credentials{
		Store: s,
		Audit: audit.NewLogger(audit.Config{}),
		Authz: control.Admins{Principals: []string{"User:admin"}},
	}
}

// adminKey makes an API key for the quota admin User:admin directly in
// the store, as an admin would have.
var adminPrincipal = principal.Principal{Type: "User", Name: "admin"}

func adminKey(t *testing.T, creds *control.Credentials, identity string) string {
	t.Helper()
	who := control.Initiator{Principal: adminPrincipal, Listener: "test"}
	key, _, err := creds.CreateAPIKey(context.Background(), who, identity)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// access is the admin port's access with creds' keys and authorizer.
func access(creds *control.Credentials) Access {
	return Access{Keys: creds, Authz: creds.Authz, Audit: creds.Audit}
}

type call struct {
	method, path, ctype, body string
	key                       string // sent as a Bearer token when set
}

func do(t *testing.T, h http.Handler, c call) (int, map[string]any, string) {
	t.Helper()
	req := localRequest(c.method, c.path, strings.NewReader(c.body))
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header.Set("User-Agent", "apikeys-test")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil && rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("%s %s: not JSON: %v\n%s", c.method, c.path, err, rec.Body.String())
	}
	return rec.Code, body, rec.Body.String()
}

func TestAPIKeysEndpoints(t *testing.T) {
	creds := newCredentials(t)
	admin := adminKey(t, creds, "admin")
	h := Handler(Sources{APIKeys: creds, Access: access(creds)})
	const js = "application/json"

	code, created, raw := do(t, h, call{"POST", "/api/v1/apikeys", js, `{"identity": "svc-orders"}`, admin})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, _ := created["id"].(string)
	key, _ := created["key"].(string)
	if got, ok := auth.ParseAPIKey(key); !ok || got != id || created["identity"] != "svc-orders" || created["revoked"] != false || created["created"] == "" {
		t.Fatalf("create answer: %s", raw)
	}
	if _, has := created["hash"]; has {
		t.Fatalf("create answer shows the hash: %s", raw)
	}
	if p, ok := creds.Lookup().Plain(auth.APIKeyUser, key); !ok || p.Name != "svc-orders" {
		t.Fatalf("created key does not authenticate: %v %v", p, ok)
	}

	for _, tc := range []struct {
		name string
		c    call
		code int
		want []string // substrings of the body
	}{
		{"list", call{"GET", "/api/v1/apikeys", "", "", admin}, 200, []string{`"id": "` + id + `"`, `"identity": "svc-orders"`, `"revoked": false`}},
		{"no identity", call{"POST", "/api/v1/apikeys", js, `{}`, admin}, 400, []string{`"error": "identity is required`}},
		{"empty identity", call{"POST", "/api/v1/apikeys", js, `{"identity": ""}`, admin}, 400, []string{`identity is required`}},
		{"anonymous identity", call{"POST", "/api/v1/apikeys", js, `{"identity": "ANONYMOUS"}`, admin}, 400, []string{`unauthenticated principal`}},
		{"control character", call{"POST", "/api/v1/apikeys", js, `{"identity": "a\u0007b"}`, admin}, 400, []string{`control character`}},
		{"not JSON", call{"POST", "/api/v1/apikeys", js, `identity=x`, admin}, 400, []string{`request body:`}},
		{"unknown field", call{"POST", "/api/v1/apikeys", js, `{"identity": "x", "admin": true}`, admin}, 400, []string{`unknown field`}},
		{"two values", call{"POST", "/api/v1/apikeys", js, `{"identity": "x"} {"identity": "y"}`, admin}, 400, []string{`more than one JSON value`}},
		{"form post", call{"POST", "/api/v1/apikeys", "application/x-www-form-urlencoded", `identity=x`, admin}, 415, []string{`application/json`}},
		{"text/plain post", call{"POST", "/api/v1/apikeys", "text/plain", `{"identity": "x"}`, admin}, 415, []string{`application/json`}},
		{"json with charset", call{"POST", "/api/v1/apikeys", "application/json; charset=utf-8", `{"identity": "other"}`, admin}, 201, []string{`"identity": "other"`, `"key": "tg_`}},
		{"revoke unknown", call{"DELETE", "/api/v1/apikeys/nosuchkeyxxxxxxx", "", "", admin}, 404, []string{`"error": "API key \"nosuchkeyxxxxxxx\" does not exist"`}},
		{"revoke", call{"DELETE", "/api/v1/apikeys/" + id, "", "", admin}, 200, []string{`"id": "` + id + `"`, `"identity": "svc-orders"`, `"revoked": true`}},
		{"revoke again", call{"DELETE", "/api/v1/apikeys/" + id, "", "", admin}, 200, []string{`"revoked": true`}},
		{"list after revoke", call{"GET", "/api/v1/apikeys", "", "", admin}, 200, []string{`"revoked": true`, `"identity": "other"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, raw := do(t, h, tc.c)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %s", code, tc.code, raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(raw, w) {
					t.Errorf("body lacks %s:\n%s", w, raw)
				}
			}
			if strings.Contains(raw, `"hash"`) || (tc.c.method != "POST" && strings.Contains(raw, `"key"`)) {
				t.Errorf("a secret in the answer:\n%s", raw)
			}
		})
	}
	if _, ok := creds.Lookup().Plain(auth.APIKeyUser, key); ok {
		t.Fatal("revoked key authenticates")
	}

	// Audited as the key's identity, from the client's address.
	var creates int
	for _, e := range creds.Audit.Recent(0) {
		if e.Initiator.Listener == "test" {
			continue // adminKey's
		}
		if e.Initiator.Principal != "User:admin" || e.Initiator.Listener != "admin-http" ||
			!strings.HasPrefix(e.Initiator.Source, "192.0.2.1:") || e.Initiator.ClientID != "apikeys-test" {
			t.Errorf("event initiator: %+v", e.Initiator)
		}
		if e.Action == audit.ActionAPIKeyCreate && e.Outcome == audit.Applied {
			creates++
		}
	}
	if creates != 2 {
		t.Errorf("%d applied create events, want 2", creates)
	}
}

func TestAPIKeysUnavailable(t *testing.T) {
	h := Handler(Sources{Access: Access{Authz: control.Admins{Principals: []string{"ANONYMOUS"}}}})
	for _, c := range []call{
		{"GET", "/api/v1/apikeys", "", "", ""},
		{"POST", "/api/v1/apikeys", "application/json", `{"identity": "x"}`, ""},
		{"DELETE", "/api/v1/apikeys/abc", "", "", ""},
	} {
		if code, body, raw := do(t, h, c); code != http.StatusServiceUnavailable || body["error"] == nil {
			t.Errorf("%s %s without a manager: %d %s", c.method, c.path, code, raw)
		}
	}
	// The store failing (closed) answers 503, not 500 or a success.
	creds := newCredentials(t)
	admin := adminKey(t, creds, "admin")
	h = Handler(Sources{APIKeys: creds, Access: access(creds)})
	creds.Store.Close()
	if code, _, raw := do(t, h, call{"POST", "/api/v1/apikeys", "application/json", `{"identity": "x"}`, admin}); code != http.StatusServiceUnavailable {
		t.Errorf("create on a closed store: %d %s", code, raw)
	}
	if code, _, raw := do(t, h, call{"GET", "/api/v1/apikeys", "", "", admin}); code != http.StatusServiceUnavailable {
		t.Errorf("list on a closed store: %d %s", code, raw)
	}
}
