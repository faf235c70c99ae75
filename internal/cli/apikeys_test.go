package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/httpapi"
	"github.com/tollgate/tollgate/internal/store"
)

// apiKeysServer is Tollgate's admin HTTP API over a real store.
func apiKeysServer(t *testing.T) (*httptest.Server, *control.Credentials) {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	creds := &control.Credentials{Store: s, Audit: audit.NewLogger(audit.Config{})}
	srv := httptest.NewServer(httpapi.Handler(httpapi.Sources{APIKeys: creds.Operator()}))
	t.Cleanup(srv.Close)
	return srv, creds
}

func runKeys(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Timeout: 10 * time.Second}
	code := runAPIKeys(context.Background(), env, args)
	return code, out.String(), errb.String()
}

var keyRE = regexp.MustCompile(`(?m)^    (tg_[a-z2-7]+_[a-z2-7]+)$`)

func TestAPIKeysCLI(t *testing.T) {
	srv, creds := apiKeysServer(t)
	url := srv.URL

	code, out, errs := runKeys(t, "list", "--admin-url", url)
	if code != 0 || out != "No API keys.\n" {
		t.Fatalf("empty list: %d %q %q", code, out, errs)
	}

	code, out, errs = runKeys(t, "create", "--identity", "svc-orders", "--admin-url", url)
	if code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	m := keyRE.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "cannot be shown again") || !strings.Contains(out, `username "token"`) {
		t.Fatalf("create output:\n%s", out)
	}
	key := m[1]
	id, ok := auth.ParseAPIKey(key)
	if !ok || !strings.HasPrefix(out, "Created API key "+id+" for identity svc-orders.\n") {
		t.Fatalf("create output:\n%s", out)
	}
	if p, ok := creds.Lookup().Plain(auth.APIKeyUser, key); !ok || p.Name != "svc-orders" {
		t.Fatalf("printed key does not authenticate: %v %v", p, ok)
	}

	// The URL without a scheme, flags after the command's argument.
	host := strings.TrimPrefix(url, "http://")
	if code, _, errs := runKeys(t, "create", "--admin-url", host, "--identity", "billing"); code != 0 {
		t.Fatalf("create billing: %s", errs)
	}
	code, out, errs = runKeys(t, "list", "--admin-url", url)
	if code != 0 {
		t.Fatalf("list: %s", errs)
	}
	// Ordered by creation time, then id (keys created in the same second).
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+IDENTITY\s+CREATED\s+REVOKED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`(?m)^`+id+`\s+svc-orders\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+no$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^[a-z2-7]{16}\s+billing\s+\S+\s+no$`).MatchString(out) || strings.Contains(out, key) {
		t.Fatalf("list output:\n%s", out)
	}

	code, out, errs = runKeys(t, "revoke", id, "--admin-url", url)
	if code != 0 || out != "Revoked API key "+id+" (identity svc-orders).\n" {
		t.Fatalf("revoke: %d %q %q", code, out, errs)
	}
	if _, ok := creds.Lookup().Plain(auth.APIKeyUser, key); ok {
		t.Fatal("revoked key authenticates")
	}
	_, out, _ = runKeys(t, "list", "--admin-url", url)
	if !regexp.MustCompile(`(?m)^` + id + `\s+svc-orders\s+\S+\s+yes$`).MatchString(out) {
		t.Fatalf("list after revoke:\n%s", out)
	}

	// Errors: the API's message, exit 1; usage errors exit 2.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"revoke", "nosuchkeyxxxxxxx", "--admin-url", url}, 1, `tollgate apikeys revoke: API key "nosuchkeyxxxxxxx" does not exist (HTTP 404 Not Found)`},
		{[]string{"create", "--identity", "ANONYMOUS", "--admin-url", url}, 1, "(HTTP 400 Bad Request)"},
		{[]string{"create", "--admin-url", url}, 2, "--identity is required"},
		{[]string{"revoke", "--admin-url", url}, 2, "give the id of the key to revoke"},
		{[]string{"revoke", "a", "b", "--admin-url", url}, 2, "give the id of the key to revoke"},
		{[]string{"list", "extra", "--admin-url", url}, 2, `unexpected argument "extra"`},
		{[]string{"list", "--identity", "x", "--admin-url", url}, 2, "--identity applies to create only"},
		{[]string{"list", "--admin-url", "ftp://x"}, 2, "is not an http:// or https:// URL"},
		{[]string{"list", "--admin-url", "http://127.0.0.1:1"}, 1, "cannot reach Tollgate's admin port at http://127.0.0.1:1"},
		{[]string{"rotate"}, 2, `unknown command "rotate"`},
		{[]string{"list", "--bogus"}, 2, "flag provided but not defined: -bogus"},
	} {
		code, _, errs := runKeys(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if code, out, _ := runKeys(t, "--help"); code != 0 || !strings.Contains(out, "usage: tollgate apikeys") {
		t.Errorf("--help: %d %q", code, out)
	}
}

// A gateway without a key manager (no data directory) answers 503.
func TestAPIKeysCLIUnavailable(t *testing.T) {
	srv := httptest.NewServer(httpapi.Handler(httpapi.Sources{}))
	defer srv.Close()
	code, _, errs := runKeys(t, "list", "--admin-url", srv.URL)
	if code != 1 || !strings.Contains(errs, "HTTP 503 Service Unavailable") {
		t.Fatalf("%d %q", code, errs)
	}
}
