package cli

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/httpapi"
	"github.com/tollgate/tollgate/internal/quota"
)

// `tollgate tenants` against the admin HTTP API over a real store: the
// quota admin creates, alters, lists, describes and deletes; another key
// reads but is refused changes; mistakes in the flags are refused before
// anything is sent.
func TestTenantsCLI(t *testing.T) {
	s, creds := adminStore(t)
	admin, reader := newKey(t, creds, "admin"), newKey(t, creds, "reader")
	eng, err := quota.NewEngine(quota.EngineConfig{SharedDeadline: true})
	if err != nil {
		t.Fatal(err)
	}
	tn := &control.Tenants{Store: s, Audit: creds.Audit, Authz: creds.Authz, OnChange: func(ts *quota.TenantSet) { eng.SetTenants(ts, time.Now()) }}
	if err := tn.Load(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Handler(httpapi.Sources{Engine: eng, Tenants: tn, Access: httpapi.Access{Keys: creds, Authz: creds.Authz}}))
	t.Cleanup(srv.Close)
	run := func(key string, args ...string) (int, string, string) {
		return runWith(map[string]string{"TOLLGATE_API_KEY": key}, func(ctx context.Context, env *Env) int {
			return runTenants(ctx, env, append(args, "--admin-url", srv.URL))
		})
	}
	for _, c := range []struct {
		key  string
		args []string
		code int
		out  string
	}{
		{admin, []string{"list"}, 0, "No tenants."},
		{admin, []string{"create", "team-a", "--principal", "alice", "--principal", "CN=bob,O=Example", "--principal-prefix", "svc-a-",
			"--principal-rule", `RULE:^(.*)@A$/team-a/`, "--admin", "carol", "--add-config", "producer_byte_rate=1048576,shadow=1"}, 0, "Created tenant team-a."},
		{reader, []string{"create", "team-b"}, 1, "may not change tenants"},
		{admin, []string{"create", "team-b", "--principal", "alice"}, 1, "alice"},
		{admin, []string{"alter", "team-a", "--add-principal", "dan", "--remove-principal", "alice", "--add-config", "consumer_byte_rate=2097152",
			"--delete-config", "shadow"}, 0, "Altered tenant team-a."},
		{admin, []string{"alter", "team-a", "--remove-admin", "nobody"}, 1, "not there to remove"},
		{reader, []string{"list"}, 0, "team-a  api     CN=bob,O=Example dan svc-a-* RULE:^(.*)@A$/team-a/  producer_byte_rate=1048576,consumer_byte_rate=2097152  carol   produce 0% fetch 0%"},
		{reader, []string{"describe", "team-a"}, 0, "Tenant team-a (declared in the admin API)"},
		{reader, []string{"describe", "nope"}, 1, "does not exist"},
		{admin, []string{"delete", "team-a"}, 0, "Deleted tenant team-a."},
		{admin, []string{"create"}, 2, "give the tenant's name"},
		{admin, []string{"list", "x"}, 2, "unexpected argument"},
		{admin, []string{"create", "t", "--add-config", "request_percentage=5"}, 2, "unknown key request_percentage"},
		{admin, []string{"create", "t", "--add-config", "producer_byte_rate"}, 2, "not K=V"},
		{admin, []string{"frobnicate"}, 2, "unknown command"},
	} {
		code, out, errs := run(c.key, c.args...)
		if code != c.code || !strings.Contains(out+errs, c.out) {
			t.Errorf("tenants %v: %d\n%s%s\nwant %d with %q", c.args, code, out, errs, c.code, c.out)
		}
	}
}
