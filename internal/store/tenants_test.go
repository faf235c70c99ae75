package store

import (
	"errors"
	"strings"
	"testing"
)

// Tenants are created, replaced and deleted as the mode says, each write
// durable across a reopen; the hook sees the tenant replaced and can veto
// the write; a corrupt or oversized name is refused.
func TestTenants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	burst := 0.0
	a := Tenant{Name: "team-a", Principals: []string{"alice"}, PrincipalPrefixes: []string{"svc-a-"}, PrincipalRules: []string{"RULE:^(.*)@A$/team-a/"},
		Ceilings: map[string]float64{"producer_byte_rate": 1 << 20}, Shadow: true, BurstSeconds: &burst, Admins: []string{"User:carol"}}
	if _, err := s.PutTenantFunc(a, ReplaceTenant, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("replace of a missing tenant: %v", err)
	}
	var sawOld *Tenant
	if _, err := s.PutTenantFunc(a, CreateTenant, func(old *Tenant) error { sawOld = old; return nil }); err != nil || sawOld != nil {
		t.Fatalf("create: %v (old %+v)", err, sawOld)
	}
	if _, err := s.PutTenantFunc(a, CreateTenant, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	b := a
	b.Ceilings = map[string]float64{"producer_byte_rate": 2 << 20}
	veto := errors.New("audit sink down")
	if _, err := s.PutTenantFunc(b, ReplaceTenant, func(*Tenant) error { return veto }); err != veto {
		t.Fatalf("vetoed replace: %v", err)
	}
	old, err := s.PutTenantFunc(b, ReplaceTenant, nil)
	if err != nil || old == nil || old.Ceilings["producer_byte_rate"] != 1<<20 {
		t.Fatalf("replace: %+v %v", old, err)
	}
	s.Close()
	s = open(t, dir)
	got, ok, err := s.Tenant("team-a")
	if err != nil || !ok || got.Ceilings["producer_byte_rate"] != 2<<20 || !got.Shadow || got.BurstSeconds == nil || *got.BurstSeconds != 0 ||
		got.PrincipalRules[0] != a.PrincipalRules[0] || got.Admins[0] != "User:carol" {
		t.Fatalf("after reopen: %+v %v %v", got, ok, err)
	}
	if _, err := s.PutTenantFunc(Tenant{Name: "b"}, CreateTenant, nil); err != nil {
		t.Fatal(err)
	}
	all, err := s.Tenants()
	if err != nil || len(all) != 2 || all[0].Name != "b" || all[1].Name != "team-a" {
		t.Fatalf("list: %+v %v", all, err)
	}
	if _, err := s.DeleteTenantFunc("nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if d, err := s.DeleteTenantFunc("team-a", nil); err != nil || d.Name != "team-a" {
		t.Fatalf("delete: %+v %v", d, err)
	}
	for _, name := range []string{"", strings.Repeat("x", 250)} {
		if _, err := s.PutTenantFunc(Tenant{Name: name}, CreateTenant, nil); err == nil {
			t.Errorf("name of %d bytes accepted", len(name))
		}
		if _, ok, err := s.Tenant(name); ok || err != nil {
			t.Errorf("get of a %d-byte name: %v %v", len(name), ok, err)
		}
	}
}
