package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
)

// The tenant endpoints end to end over a real store: quota admins create,
// alter, replace and delete, readers list and describe (with usage), the
// rest is refused with the statuses the API documents.
func TestTenantsEndpoints(t *testing.T) {
	creds := newCredentials(t)
	admin := adminKey(t, creds, "admin")
	reader := adminKey(t, creds, "alice")
	eng, err := quota.NewEngine(quota.EngineConfig{SharedDeadline: true})
	if err != nil {
		t.Fatal(err)
	}
	tn := &control.Tenants{Store: creds.Store, Audit: creds.Audit, Authz: creds.Authz,
		OnChange: func(s *quota.TenantSet) { eng.SetTenants(s, time.Now()) }}
	if err := tn.SetFixed([]control.TenantSpec{{Name: "fixed", Principals: []string{"frank"}}}); err != nil {
		t.Fatal(err)
	}
	h := Handler(Sources{Engine: eng, Tenants: tn, Access: access(creds)})
	const js = "application/json"
	for _, c := range []struct {
		call
		code int
		want string
	}{
		{call{"POST", "/api/v1/tenants", js, `{"name": "team-a", "principals": ["bob"], "producer_byte_rate": 1048576, "admins": ["carol"]}`, admin}, 201, `"source": "api"`},
		{call{"POST", "/api/v1/tenants", js, `{"name": "team-a"}`, admin}, 409, "exists already"},
		{call{"POST", "/api/v1/tenants", js, `{"name": "b", "principals": ["bob"]}`, admin}, 400, "bob"},
		{call{"POST", "/api/v1/tenants", js, `{"name": "b", "color": "red"}`, admin}, 400, "unknown field"},
		{call{"POST", "/api/v1/tenants", "text/plain", `{}`, admin}, 415, "application/json"},
		{call{"POST", "/api/v1/tenants", js, `{"name": "b"}`, ""}, 401, "authentication required"},
		{call{"POST", "/api/v1/tenants", js, `{"name": "b"}`, reader}, 403, "may not change tenants"},
		{call{"POST", "/api/v1/tenants", js, `{"name": "b"}{}`, admin}, 400, "more than one"},
		{call{"POST", "/api/v1/tenants", js, `{"name": "` + strings.Repeat("x", 2<<20) + `"}`, admin}, 413, "larger than"},
		{call{"PATCH", "/api/v1/tenants/team-a", js, `{"add_principals": ["dan"], "set": {"shadow": 1}}`, admin}, 200, `"dan"`},
		{call{"PATCH", "/api/v1/tenants/team-a", js, `{"remove_principals": ["zed"]}`, admin}, 400, "not there"},
		{call{"PATCH", "/api/v1/tenants/nope", js, `{}`, admin}, 404, "does not exist"},
		{call{"PUT", "/api/v1/tenants/team-a", js, `{"name": "other"}`, admin}, 400, "cannot be renamed"},
		{call{"PUT", "/api/v1/tenants/team-a", js, `{"principals": ["bob"], "consumer_byte_rate": 2097152}`, admin}, 200, `"consumer_byte_rate": 2097152`},
		{call{"PUT", "/api/v1/tenants/fixed", js, `{"name": "fixed"}`, admin}, 409, "config file"},
		{call{"GET", "/api/v1/tenants", "", "", reader}, 200, `"source": "config"`},
		{call{"GET", "/api/v1/tenants/team-a", "", "", reader}, 200, `"members": []`},
		{call{"GET", "/api/v1/tenants/nope", "", "", reader}, 404, "does not exist"},
		{call{"GET", "/api/v1/resolve?user=bob", "", "", reader}, 200, `"name": "team-a"`},
		{call{"DELETE", "/api/v1/tenants/team-a", "", "", reader}, 403, "may not"},
		{call{"DELETE", "/api/v1/tenants/team-a", "", "", admin}, 200, `"deleted": true`},
		{call{"DELETE", "/api/v1/tenants/team-a", "", "", admin}, 404, "does not exist"},
	} {
		code, _, body := do(t, h, c.call)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %.60s: %d %s\nwant %d with %q", c.method, c.path, c.body, code, body, c.code, c.want)
		}
	}
	if n := len(tn.List()); n != 1 {
		t.Errorf("%d tenants left, want the config file's", n)
	}
	if _, ok := eng.TenantOf("bob"); ok {
		t.Error("the engine still has the deleted tenant")
	}
	var applied, denied int
	for _, e := range creds.Audit.Recent(100) {
		if strings.HasPrefix(e.Action, "tenant_") {
			switch e.Outcome {
			case "applied":
				applied++
			case "denied":
				denied++
			}
		}
	}
	if applied != 4 || denied != 3 {
		t.Errorf("audited %d applied and %d denied tenant changes, want 4 and 3", applied, denied)
	}
}
