package cli

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/httpapi"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/store"
)

// apiKeysServer is Tollgate's admin HTTP API over a real store, with the
// access of a production config: User:admin is the quota admin. It
// returns the admin's key.
func apiKeysServer(t *testing.T) (*httptest.Server, *control.Credentials, string) {
	t.Helper()
	_, creds := adminStore(t)
	admin := newKey(t, creds, "admin")
	srv := httptest.NewServer(httpapi.Handler(httpapi.Sources{APIKeys: creds, Access: httpapi.Access{Keys: creds, Authz: creds.Authz}}))
	t.Cleanup(srv.Close)
	return srv, creds, admin
}

// runKeysEnv runs `tollgate apikeys` with an environment.
func runKeysEnv(t *testing.T, environ map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runWith(environ, func(ctx context.Context, env *Env) int { return runAPIKeys(ctx, env, args) })
}

var keyRE = regexp.MustCompile(`(?m)^    (tg_[a-z2-7]+_[a-z2-7]+)$`)

func TestAPIKeysCLI(t *testing.T) {
	srv, creds, admin := apiKeysServer(t)
	url := srv.URL
	runKeys := func(t *testing.T, args ...string) (int, string, string) {
		t.Helper()
		return runKeysEnv(t, map[string]string{"TOLLGATE_API_KEY": admin}, args...)
	}

	code, out, errs := runKeys(t, "list", "--admin-url", url)
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, " admin ") {
		t.Fatalf("list with the admin's key only: %d %q %q", code, out, errs)
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
	if len(lines) != 4 || !regexp.MustCompile(`^ID\s+IDENTITY\s+CREATED\s+REVOKED$`).MatchString(lines[0]) ||
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
	srv := httptest.NewServer(httpapi.Handler(httpapi.Sources{Access: httpapi.Access{Authz: control.Admins{AllowAnonymousDescribe: true}}}))
	defer srv.Close()
	code, _, errs := runKeysEnv(t, nil, "list", "--admin-url", srv.URL)
	if code != 1 || !strings.Contains(errs, "HTTP 503 Service Unavailable") {
		t.Fatalf("%d %q", code, errs)
	}
}

// The key comes from --api-key or $TOLLGATE_API_KEY (the flag wins); none,
// or a key that is not a quota admin's, gets the API's refusal with a hint.
func TestAPIKeysCLIKey(t *testing.T) {
	srv, creds, admin := apiKeysServer(t)
	reader, _, err := creds.CreateAPIKey(context.Background(), control.Initiator{Principal: principal.Principal{Name: "admin"}}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no key", nil, []string{"list"}, 1, "authentication required to read this gateway's state: send Authorization: Bearer <API key> (or a client certificate) (HTTP 401 Unauthorized); set $TOLLGATE_API_KEY (or --api-key) to an API key"},
		{"wrong key", map[string]string{"TOLLGATE_API_KEY": "tg_nope"}, []string{"list"}, 1, "unknown, revoked or malformed (HTTP 401 Unauthorized); check the key"},
		{"reader creates", map[string]string{"TOLLGATE_API_KEY": reader}, []string{"create", "--identity", "x"}, 1, "User:alice may not create API keys (HTTP 403 Forbidden)"},
		{"reader lists", map[string]string{"TOLLGATE_API_KEY": reader}, []string{"list"}, 0, ""},
		{"flag wins", map[string]string{"TOLLGATE_API_KEY": "tg_nope"}, []string{"list", "--api-key", admin}, 0, ""},
		{"admin creates", nil, []string{"create", "--identity", "y", "--api-key", admin}, 0, ""},
		{"white space", nil, []string{"list", "--api-key", admin + "\n"}, 2, "contains white space"},
		{"ca file over http", nil, []string{"list", "--admin-ca-file", "ca.pem"}, 2, "need an https:// --admin-url"},
		{"file for list", nil, []string{"list", "--file", "x.yaml"}, 2, "--file applies to create only"},
	} {
		code, _, errs := runKeysEnv(t, tc.env, append(tc.args, "--admin-url", srv.URL)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, code, errs, tc.code, tc.want)
		}
	}
	keys, _ := creds.ListAPIKeys()
	if len(keys) != 3 {
		t.Errorf("%d keys, want admin, alice and y", len(keys))
	}
}

// https: the port's certificate is verified against --admin-ca-file.
func TestAPIKeysCLIHTTPS(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	creds := &control.Credentials{Store: s, Audit: audit.NewLogger(audit.Config{}), Authz: control.Admins{Principals: []string{"ANONYMOUS"}}}
	srv := httptest.NewTLSServer(httpapi.Handler(httpapi.Sources{APIKeys: creds, Access: httpapi.Access{Keys: creds, Authz: creds.Authz}}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runKeysEnv(t, nil, "list", "--admin-url", srv.URL); code != 1 || !strings.Contains(errs, "certificate") {
		t.Errorf("without the CA: %d %q", code, errs)
	}
	if code, out, errs := runKeysEnv(t, nil, "create", "--identity", "z", "--admin-url", srv.URL, "--admin-ca-file", ca); code != 0 || !strings.Contains(out, "identity z") {
		t.Errorf("with the CA: %d %q %q", code, out, errs)
	}
}

// The first admin key, offline: written hashed into a credentials file,
// which then authenticates it.
func TestAPIKeysCLIFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "credentials.yaml")
	if code, _, errs := runKeysEnv(t, nil, "create", "--identity", "ops-admin", "--file", file); code != 0 {
		t.Fatalf("create --file: %s", errs)
	}
	code, out, errs := runKeysEnv(t, nil, "create", "--identity", "second", "--file", file)
	if code != 0 || !strings.Contains(out, "Written (hashed) to "+file) {
		t.Fatalf("second create --file: %d %q %q", code, out, errs)
	}
	key := keyRE.FindStringSubmatch(out)[1]
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), key) {
		t.Fatal("the file holds the key itself")
	}
	ms, err := auth.LoadCredentialFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := auth.VerifyAPIKey(ms, key); !ok || p.Name != "second" {
		t.Fatalf("the printed key does not verify against the file: %v %v", p, ok)
	}
	if strings.Count(string(data), "identity:") != 2 {
		t.Fatalf("the first key was lost:\n%s", data)
	}
	// The admin API's messages (api.CheckIdentity).
	for _, id := range []string{"ANONYMOUS", "a\x07b"} {
		if code, _, errs := runKeysEnv(t, nil, "create", "--identity", id, "--file", file); code != 1 || !strings.Contains(errs, api.CheckIdentity(id).Error()) {
			t.Errorf("identity %q: %d %q", id, code, errs)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("users: [{name: x}]\n"), 0o600)
	if code, _, errs := runKeysEnv(t, nil, "create", "--identity", "x", "--file", bad); code != 1 || !strings.Contains(errs, "bad.yaml") {
		t.Errorf("a broken file: %d %q", code, errs)
	}
}

func TestAdminClientWarnsOfPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		url  string
		warn bool
	}{
		{"http://10.0.0.1:9644", true},
		{"http://admin.example.com:9644", true},
		{"http://127.0.0.1:9644", false},
		{"localhost:9644", false},
		{"http://[::1]:9644", false},
		{"https://10.0.0.1:9644", false},
	} {
		var errb bytes.Buffer
		f := adminFlags{url: tc.url, apiKey: "tg_x"}
		if _, err := f.client(&Env{Stderr: &errb}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(errb.String(), "over plain HTTP"); got != tc.warn {
			t.Errorf("%s: warned %v", tc.url, got)
		}
	}
}
