package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/store"
)

// adminStore is a real store and its credentials with the access of a
// production config: User:admin is the quota admin.
func adminStore(t *testing.T) (*store.Store, *control.Credentials) {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &control.Credentials{Store: s, Audit: audit.NewLogger(audit.Config{}), Authz: control.Admins{Principals: []string{"admin"}}}
}

// newKey is an API key for identity, made by User:admin.
func newKey(t *testing.T, creds *control.Credentials, identity string) string {
	t.Helper()
	k, _, err := creds.CreateAPIKey(context.Background(), control.Initiator{Principal: principal.Principal{Type: "User", Name: "admin"}}, identity)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// runWith runs a command with an environment: its exit code, stdout and
// stderr.
func runWith(environ map[string]string, run func(context.Context, *Env) int) (int, string, string) {
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Timeout: 10 * time.Second, Getenv: func(k string) string { return environ[k] }}
	code := run(context.Background(), env)
	return code, out.String(), errb.String()
}
