package control

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
)

// franzLogin drives a franz-go SCRAM client conversation against auth's
// SCRAM server over lookup, in process.
func franzLogin(t *testing.T, lookup auth.CredentialLookup, mechanism, user, password string) error {
	t.Helper()
	var mech sasl.Mechanism
	a := fscram.Auth{User: user, Pass: password}
	if mechanism == auth.MechanismScramSHA512 {
		mech = a.AsSha512Mechanism()
	} else {
		mech = a.AsSha256Mechanism()
	}
	srv, err := auth.NewServer(mechanism, lookup)
	if err != nil {
		t.Fatal(err)
	}
	sess, tok, err := mech.Authenticate(context.Background(), "tollgate:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		challenge, done, err := srv.Step(tok)
		if err != nil {
			return err
		}
		clientDone, next, err := sess.Challenge(challenge)
		if err != nil {
			return err
		}
		if done {
			if !clientDone {
				return errors.New("server done, client not")
			}
			if p := srv.Principal(); p.Name != user {
				return errors.New("authenticated as " + p.String())
			}
			return nil
		}
		tok = next
	}
	return errors.New("exchange did not finish")
}

func TestAPIKeys(t *testing.T) {
	f := newCredFixture(t)
	ctx := context.Background()
	plain, key, err := f.c.CreateAPIKey(ctx, admin, "svc-orders")
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := auth.ParseAPIKey(plain); !ok || id != key.ID || key.Identity != "svc-orders" || key.Revoked {
		t.Fatalf("created %q %+v", plain, key)
	}
	lookup := f.c.Lookup()
	if p, ok := lookup.Plain(auth.APIKeyUser, plain); !ok || p.String() != "User:svc-orders" {
		t.Fatalf("PLAIN token login: %v %v", p, ok)
	}
	if _, ok := lookup.Plain(auth.APIKeyUser, plain[:len(plain)-1]+"a"); ok && !strings.HasSuffix(plain, "a") {
		t.Fatal("a wrong key authenticates")
	}
	plain2, key2, err := f.c.CreateAPIKey(ctx, admin, "svc-orders")
	if err != nil || key2.ID == key.ID || plain2 == plain {
		t.Fatalf("second key: %v %+v", err, key2)
	}
	keys, err := f.c.ListAPIKeys()
	if err != nil || len(keys) != 2 {
		t.Fatalf("list: %v %v", keys, err)
	}

	// Revoked: no more logins; the other key of the identity still works.
	if err := f.c.RevokeAPIKey(ctx, admin, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup.Plain(auth.APIKeyUser, plain); ok {
		t.Fatal("revoked key authenticates")
	}
	if _, ok := lookup.Plain(auth.APIKeyUser, plain2); !ok {
		t.Fatal("the other key stopped working")
	}
	if err := f.c.RevokeAPIKey(ctx, admin, key.ID); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
	if err := f.c.RevokeAPIKey(ctx, admin, "nosuchkeyxxxxxxx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	keys, _ = f.c.ListAPIKeys()
	for _, k := range keys {
		if k.Revoked != (k.ID == key.ID) {
			t.Fatalf("list after revoke: %+v", keys)
		}
	}

	// Authorization: quota admins only.
	if _, _, err := f.c.CreateAPIKey(ctx, alice, "x"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("alice creates: %v", err)
	}
	if err := f.c.RevokeAPIKey(ctx, anon, key2.ID); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("anonymous revokes: %v", err)
	}
	if _, ok := lookup.Plain(auth.APIKeyUser, plain2); !ok {
		t.Fatal("a denied revocation took effect")
	}
	for _, bad := range []string{"", "ANONYMOUS", "a\nb", strings.Repeat("x", 2000), "\xff"} {
		if _, _, err := f.c.CreateAPIKey(ctx, admin, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("identity %q: %v", bad, err)
		}
	}

	// Audit: ids and identities, never the key or its hash.
	evs := f.events(t)
	var got []string
	for _, e := range evs {
		res := e["target"].(map[string]any)["resource"].(map[string]any)
		got = append(got, e["action"].(string)+":"+e["outcome"].(string)+":"+res["name"].(string))
	}
	want := []string{
		"apikey_create:applied:" + key.ID,
		"apikey_create:applied:" + key2.ID,
		"apikey_revoke:applied:" + key.ID,
		"apikey_revoke:applied:" + key.ID,
		"apikey_revoke:rejected:nosuchkeyxxxxxxx",
		"apikey_create:denied:",
		"apikey_revoke:denied:" + key2.ID,
	}
	if len(got) < len(want)+5 || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant first\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	first := evs[0]["changes"].([]any)[0].(map[string]any)
	if first["key"] != "identity" || first["new"] != "svc-orders" || first["old"] != nil {
		t.Fatalf("create event changes: %v", evs[0]["changes"])
	}
	revoke := evs[2]["changes"].([]any)
	if len(revoke) != 2 || revoke[0].(map[string]any)["old"] != "svc-orders" || revoke[1].(map[string]any)["old"] != "false" || revoke[1].(map[string]any)["new"] != "true" {
		t.Fatalf("revoke event changes: %v", revoke)
	}
	data, _ := os.ReadFile(f.auditPath)
	for _, secret := range []string{plain, plain2, strings.SplitN(plain, "_", 3)[2]} {
		if strings.Contains(string(data), secret) {
			t.Fatal("audit log contains an API key")
		}
	}
}

func TestAPIKeysAuditRequired(t *testing.T) {
	f := newCredFixture(t)
	ctx := context.Background()
	plain, key, err := f.c.CreateAPIKey(ctx, admin, "keep")
	if err != nil {
		t.Fatal(err)
	}
	f.c.Audit = audit.NewLogger(audit.Config{Outputs: []audit.Output{{Sink: failingSink{errors.New("disk full")}, Required: true}}})
	if _, _, err := f.c.CreateAPIKey(ctx, admin, "new"); err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) {
		t.Fatalf("create with a failing required sink: %v", err)
	}
	if err := f.c.RevokeAPIKey(ctx, admin, key.ID); err == nil {
		t.Fatal("revoked with a failing required sink")
	}
	keys, _ := f.c.ListAPIKeys()
	if len(keys) != 1 || keys[0].Revoked {
		t.Fatalf("store changed without audit: %+v", keys)
	}
	if _, ok := f.c.Lookup().Plain(auth.APIKeyUser, plain); !ok {
		t.Fatal("key stopped working")
	}
	for _, e := range f.c.Audit.Recent(0) {
		if e.Outcome != audit.Rejected || e.Supersedes == "" {
			t.Fatalf("ring: %+v", e)
		}
	}
}
