package store

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func scramSet(user, mech, cred string) ScramChange {
	return ScramChange{User: user, Mechanism: mech, Credential: cred}
}

func scramDel(user, mech string) ScramChange {
	return ScramChange{User: user, Mechanism: mech, Delete: true}
}

func TestScramCredentials(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	res, err := s.AlterScramFunc([]ScramChange{
		scramSet("alice", "SCRAM-SHA-256", "c1"),
		scramSet("alice", "SCRAM-SHA-512", "c2"),
		scramSet("<default>", "SCRAM-SHA-256", "c3"),
		scramSet("日本語 ,=", "SCRAM-SHA-512", "c4"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Changed || r.Old != nil || r.New == nil {
			t.Fatalf("first set: %+v", r)
		}
	}
	s.Close()
	s = open(t, dir)
	all, err := s.ScramCredentials()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]ScramEntry{
		{"<default>", "SCRAM-SHA-256", "c3"},
		{"alice", "SCRAM-SHA-256", "c1"},
		{"alice", "SCRAM-SHA-512", "c2"},
		{"日本語 ,=", "SCRAM-SHA-512", "c4"},
	})
	if fmt.Sprint(all) != want {
		t.Fatalf("after reopen:\n got %v\nwant %v", all, want)
	}
	if c, ok, err := s.ScramCredential("alice", "SCRAM-SHA-512"); err != nil || !ok || c != "c2" {
		t.Fatalf("ScramCredential: %q %v %v", c, ok, err)
	}
	if _, ok, err := s.ScramCredential("alice", "SCRAM-SHA-1"); err != nil || ok {
		t.Fatalf("unknown mechanism found: %v %v", ok, err)
	}
	if _, ok, err := s.ScramCredential("bob", "SCRAM-SHA-256"); err != nil || ok {
		t.Fatalf("unknown user found: %v %v", ok, err)
	}

	// Same value: no write. Replace, delete, delete of nothing, in order.
	res, err = s.AlterScramFunc([]ScramChange{
		scramSet("alice", "SCRAM-SHA-256", "c1"),
		scramSet("alice", "SCRAM-SHA-512", "c2b"),
		scramDel("alice", "SCRAM-SHA-256"),
		scramDel("alice", "SCRAM-SHA-256"),
		scramDel("nobody", "SCRAM-SHA-256"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Changed || *r.Old != "c1" || *r.New != "c1" {
		t.Fatalf("same value: %+v", r)
	}
	if r := res[1]; !r.Changed || *r.Old != "c2" || *r.New != "c2b" {
		t.Fatalf("replace: %+v", r)
	}
	if r := res[2]; !r.Changed || *r.Old != "c1" || r.New != nil {
		t.Fatalf("delete: %+v", r)
	}
	for _, r := range res[3:] {
		if r.Changed || r.Old != nil || r.New != nil {
			t.Fatalf("delete of nothing: %+v", r)
		}
	}
	// The user's last credential removed: the user is gone.
	if _, err := s.AlterScramFunc([]ScramChange{scramDel("alice", "SCRAM-SHA-512")}, nil); err != nil {
		t.Fatal(err)
	}
	all, _ = s.ScramCredentials()
	for _, e := range all {
		if e.User == "alice" {
			t.Fatalf("alice still listed: %v", all)
		}
	}

	// Invalid input changes nothing, the whole call included.
	for _, bad := range []ScramChange{
		scramSet("", "SCRAM-SHA-256", "x"),
		scramSet("u", "", "x"),
		scramSet("u", "SCRAM-SHA-256", ""),
		scramSet(strings.Repeat("u", 40000), "SCRAM-SHA-256", "x"),
	} {
		if _, err := s.AlterScramFunc([]ScramChange{scramSet("w", "SCRAM-SHA-256", "w"), bad}, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, ok, _ := s.ScramCredential("w", "SCRAM-SHA-256"); ok {
			t.Fatalf("partial commit with %+v", bad)
		}
	}
}

func TestScramHook(t *testing.T) {
	s := open(t, t.TempDir())
	if _, err := s.AlterScramFunc([]ScramChange{scramSet("u", "SCRAM-SHA-256", "old")}, nil); err != nil {
		t.Fatal(err)
	}
	ch, cancel := s.Subscribe()
	defer cancel()
	boom := errors.New("audit down")
	var seen []ScramResult
	_, err := s.AlterScramFunc([]ScramChange{scramSet("u", "SCRAM-SHA-256", "new"), scramSet("v", "SCRAM-SHA-512", "v")}, func(r []ScramResult) error {
		seen = r
		return boom
	})
	if err != boom {
		t.Fatalf("hook error not returned as is: %v", err)
	}
	if len(seen) != 2 || *seen[0].Old != "old" || *seen[0].New != "new" || seen[1].Old != nil {
		t.Fatalf("hook saw %+v", seen)
	}
	if c, _, _ := s.ScramCredential("u", "SCRAM-SHA-256"); c != "old" {
		t.Fatalf("refused change committed: %q", c)
	}
	if _, ok, _ := s.ScramCredential("v", "SCRAM-SHA-512"); ok {
		t.Fatal("refused change committed")
	}
	select {
	case <-ch:
		t.Fatal("signal after a refused change")
	default:
	}
	if _, err := s.AlterScramFunc([]ScramChange{scramDel("u", "SCRAM-SHA-256")}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no signal after a SCRAM change")
	}
	// Deleting nothing changes nothing and signals nothing.
	if _, err := s.AlterScramFunc([]ScramChange{scramDel("u", "SCRAM-SHA-256")}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("signal after a no-op")
	default:
	}
}

func testKey(id, identity string, created time.Time) APIKey {
	return APIKey{ID: id, Identity: identity, Hash: bytes.Repeat([]byte{id[0]}, 32), Created: created}
}

func TestAPIKeys(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ch, cancel := s.Subscribe()
	defer cancel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, k := range []APIKey{
		testKey("bbbbbbbbbbbbbbbb", "alice", t0.Add(time.Second)),
		testKey("aaaaaaaaaaaaaaaa", "bob", t0.Add(time.Second)),
		testKey("cccccccccccccccc", "alice", t0),
	} {
		if err := s.PutAPIKeyFunc(k, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no signal after PutAPIKey")
	}
	if err := s.PutAPIKeyFunc(testKey("aaaaaaaaaaaaaaaa", "mallory", t0), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	if k, _, _ := s.APIKey("aaaaaaaaaaaaaaaa"); k.Identity != "bob" {
		t.Fatalf("duplicate replaced the key: %+v", k)
	}
	for _, bad := range []APIKey{
		{ID: "", Identity: "x", Hash: []byte{1}},
		{ID: strings.Repeat("x", 300), Identity: "x", Hash: []byte{1}},
		{ID: "dddddddddddddddd", Identity: "", Hash: []byte{1}},
		{ID: "dddddddddddddddd", Identity: "x"},
	} {
		if err := s.PutAPIKeyFunc(bad, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	boom := errors.New("audit down")
	if err := s.PutAPIKeyFunc(testKey("eeeeeeeeeeeeeeee", "eve", t0), func() error { return boom }); err != boom {
		t.Fatalf("hook error: %v", err)
	}
	if _, ok, _ := s.APIKey("eeeeeeeeeeeeeeee"); ok {
		t.Fatal("refused key stored")
	}

	s.Close()
	s = open(t, dir)
	keys, err := s.APIKeys()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	if got := strings.Join(ids, ","); got != "cccccccccccccccc,aaaaaaaaaaaaaaaa,bbbbbbbbbbbbbbbb" {
		t.Fatalf("order by created then id: %s", got)
	}
	k, ok, err := s.APIKey("bbbbbbbbbbbbbbbb")
	if err != nil || !ok || k.Identity != "alice" || !k.Created.Equal(t0.Add(time.Second)) || !bytes.Equal(k.Hash, bytes.Repeat([]byte{'b'}, 32)) || k.Revoked {
		t.Fatalf("round trip: %+v %v %v", k, ok, err)
	}

	// Revoke: the hook sees the key as it was; a refusal keeps it valid.
	if _, err := s.RevokeAPIKeyFunc("bbbbbbbbbbbbbbbb", func(old APIKey) error { return boom }); err != boom {
		t.Fatalf("hook error: %v", err)
	}
	if k, _, _ := s.APIKey("bbbbbbbbbbbbbbbb"); k.Revoked {
		t.Fatal("refused revocation committed")
	}
	var hooked APIKey
	old, err := s.RevokeAPIKeyFunc("bbbbbbbbbbbbbbbb", func(o APIKey) error { hooked = o; return nil })
	if err != nil || old.Revoked || hooked.ID != "bbbbbbbbbbbbbbbb" || hooked.Revoked {
		t.Fatalf("revoke: %+v %+v %v", old, hooked, err)
	}
	old, err = s.RevokeAPIKeyFunc("bbbbbbbbbbbbbbbb", nil)
	if err != nil || !old.Revoked {
		t.Fatalf("second revoke: %+v %v", old, err)
	}
	for _, id := range []string{"zzzzzzzzzzzzzzzz", "", strings.Repeat("z", 1000)} {
		if _, err := s.RevokeAPIKeyFunc(id, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoke %q: %v", id, err)
		}
		if _, ok, err := s.APIKey(id); ok || err != nil {
			t.Fatalf("APIKey(%q): %v %v", id, ok, err)
		}
	}

	// Durable without Close, as a crash leaves the file.
	cp := t.TempDir()
	copyFile(t, s.Path(), filepath.Join(cp, FileName))
	c := open(t, cp)
	if k, _, _ := c.APIKey("bbbbbbbbbbbbbbbb"); !k.Revoked {
		t.Fatal("revocation not durable")
	}
}
