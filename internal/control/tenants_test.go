package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fp(v float64) *float64 { return &v }

// withTenants gives the fixture a tenant manager on the same store and
// audit log, wired into the client quotas; sets records what the engine
// would get.
func (f *fixture) withTenants(t *testing.T, fixed ...TenantSpec) (*Tenants, *[]*quota.TenantSet) {
	t.Helper()
	var sets []*quota.TenantSet
	tn := &Tenants{Store: f.cq.Store, Audit: f.cq.Audit, Authz: f.cq.Authz, OnChange: func(s *quota.TenantSet) { sets = append(sets, s) }}
	if err := tn.SetFixed(fixed); err != nil {
		t.Fatal(err)
	}
	f.cq.Tenants = tn
	return tn, &sets
}

func user(name string) Initiator {
	return Initiator{Principal: principal.Principal{Type: "User", Name: name}, Listener: "SASL_SSL"}
}

func TestTenantSpecValidate(t *testing.T) {
	for _, c := range []struct {
		s    TenantSpec
		want string
	}{
		{TenantSpec{}, "needs a name"},
		{TenantSpec{Name: "a b"}, "letters, digits"},
		{TenantSpec{Name: "a/b"}, "letters, digits"},
		{TenantSpec{Name: strings.Repeat("a", 250)}, "bytes long"},
		{TenantSpec{Name: "t", Principals: []string{""}}, "empty entry"},
		{TenantSpec{Name: "t", Principals: []string{"a", "a"}}, "given twice"},
		{TenantSpec{Name: "t", Principals: []string{"a\nb"}}, "control character"},
		{TenantSpec{Name: "t", PrincipalPrefixes: []string{strings.Repeat("p", 1025)}}, "bytes"},
		{TenantSpec{Name: "t", PrincipalRules: []string{"RULE:(/x/"}}, "principal_rules"},
		{TenantSpec{Name: "t", PrincipalRules: []string{"RULE:^a$/t/,RULE:^b$/t/"}}, "want one per entry"},
		{TenantSpec{Name: "t", ProducerByteRate: fp(0)}, "greater than 0"},
		{TenantSpec{Name: "t", ConsumerByteRate: fp(1.5)}, "whole number"},
		{TenantSpec{Name: "t", BurstSeconds: fp(-1)}, "burst_seconds"},
		{TenantSpec{Name: "t", Admins: make([]string, maxTenantList+1)}, "more than"},
		{TenantSpec{Name: "t", Principals: manyNames(1000, 600)}, "more than 524288"},
	} {
		if err := ValidateTenant(c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s.Name, err, c.want)
		}
	}
	ok := TenantSpec{Name: "team-a.1_x", Principals: []string{"alice"}, PrincipalPrefixes: []string{"svc-a-"},
		PrincipalRules: []string{`RULE:^(.*)@A\.EXAMPLE$/team-a.1_x/`, "DEFAULT"}, ProducerByteRate: fp(1 << 20),
		ControllerMutationRate: fp(0.5), BurstSeconds: fp(0), Admins: []string{"User:carol"}}
	if err := ValidateTenant(ok); err != nil {
		t.Fatal(err)
	}
	if err := ValidateTenants([]TenantSpec{ok, {Name: "b", Principals: []string{"alice"}}}); err == nil || !strings.Contains(err.Error(), "alice") {
		t.Errorf("a principal in two tenants: %v", err)
	}
	if err := ValidateTenants([]TenantSpec{{Name: "b"}, {Name: "b"}}); err == nil {
		t.Error("a tenant declared twice accepted")
	}
}

// A principal mapping rule puts a principal in the tenant it maps it to.
func TestTenantRules(t *testing.T) {
	f := newFixture(t)
	tn, sets := f.withTenants(t, TenantSpec{Name: "team-a", PrincipalRules: []string{`RULE:^svc-([a-z]+)-.*$/team-$1/`}},
		TenantSpec{Name: "team-b", PrincipalRules: []string{`RULE:^svc-([a-z]+)-.*$/team-$1/`, `RULE:^(.*)@B$/team-b/L`}})
	for p, want := range map[string]string{"svc-a-ingest": "team-a", "svc-b-x": "team-b", "bob@B": "team-b", "svc-c-x": "", "alice": ""} {
		if got, _ := tn.Set().Of(p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
	if len(*sets) != 1 {
		t.Errorf("OnChange called %d times", len(*sets))
	}
}

// Changes through the API: authorized (quota admins), validated against
// the other tenants, refused for a config file's tenant, audited, applied.
func TestTenantsLifecycle(t *testing.T) {
	f := newFixture(t)
	tn, sets := f.withTenants(t, TenantSpec{Name: "fixed", Principals: []string{"frank"}, ProducerByteRate: fp(100)})
	ctx := context.Background()
	a := TenantSpec{Name: "team-a", Principals: []string{"alice"}, ProducerByteRate: fp(1 << 20), Admins: []string{"carol"}}
	if err := tn.CreateTenant(ctx, alice, a); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("alice creates: %v", err)
	}
	if err := tn.CreateTenant(ctx, admin, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := tn.Set().Of("alice"); got != "team-a" || len(*sets) != 2 {
		t.Fatalf("after create: %q, %d loads", got, len(*sets))
	}
	for _, c := range []struct {
		err  error
		kind error
	}{
		{tn.CreateTenant(ctx, admin, a), ErrConflict},
		{tn.CreateTenant(ctx, admin, TenantSpec{Name: "b", Principals: []string{"alice"}}), ErrInvalid},
		{tn.CreateTenant(ctx, admin, TenantSpec{Name: "b", Principals: []string{"frank"}}), ErrInvalid},
		{tn.CreateTenant(ctx, admin, TenantSpec{Name: "fixed"}), ErrConflict},
		{tn.ReplaceTenant(ctx, admin, TenantSpec{Name: "nope"}), ErrNotFound},
		{tn.DeleteTenant(ctx, admin, "fixed"), ErrConflict},
		{tn.DeleteTenant(ctx, admin, "nope"), ErrNotFound},
		{tn.AlterTenant(ctx, admin, "team-a", TenantAlter{RemovePrincipals: []string{"zed"}}), ErrInvalid},
		{tn.AlterTenant(ctx, admin, "team-a", TenantAlter{Set: map[string]float64{"request_percentage": 5}}), ErrInvalid},
		{tn.AlterTenant(ctx, admin, "team-a", TenantAlter{Set: map[string]float64{"shadow": 2}}), ErrInvalid},
		{tn.AlterTenant(ctx, user("carol"), "team-a", TenantAlter{AddPrincipals: []string{"mallory"}}), ErrNotAuthorized},
	} {
		if !errors.Is(c.err, c.kind) {
			t.Errorf("%v, want %v", c.err, c.kind)
		}
	}
	err := tn.AlterTenant(ctx, admin, "team-a", TenantAlter{AddPrincipals: []string{"bob"}, AddPrincipalPrefixes: []string{"svc-a-"},
		Set: map[string]float64{"consumer_byte_rate": 2 << 20, "shadow": 1, "burst_seconds": 0}, Delete: []string{"producer_byte_rate"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tn.Get("team-a")
	if got.ProducerByteRate != nil || *got.ConsumerByteRate != 2<<20 || !got.Shadow || *got.BurstSeconds != 0 || len(got.Principals) != 2 || got.Fixed {
		t.Fatalf("after alter: %+v", got)
	}
	if err := tn.DeleteTenant(ctx, admin, "team-a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := tn.Get("team-a"); ok {
		t.Fatal("deleted tenant still listed")
	}
	// The audit trail: denied, applied, rejected … in order, with the fields.
	var trail []string
	for _, ev := range f.events(t) {
		trail = append(trail, ev["action"].(string)+":"+ev["outcome"].(string))
	}
	want := "tenant_create:denied tenant_create:applied tenant_create:rejected tenant_create:rejected tenant_create:rejected tenant_create:rejected " +
		"tenant_alter:rejected tenant_delete:rejected tenant_delete:rejected tenant_alter:rejected tenant_alter:rejected tenant_alter:rejected " +
		"tenant_alter:denied tenant_alter:applied tenant_delete:applied"
	if strings.Join(trail, " ") != want {
		t.Errorf("audit trail\n got %s\nwant %s", strings.Join(trail, " "), want)
	}
	alter := f.events(t)[13]
	changes := map[string]any{}
	for _, c := range alter["changes"].([]any) {
		m := c.(map[string]any)
		changes[m["key"].(string)] = [2]any{m["old"], m["new"]}
	}
	if changes["principals"] != [2]any{`["alice"]`, `["alice","bob"]`} || changes["producer_byte_rate"] != [2]any{float64(1 << 20), nil} ||
		changes["shadow"] != [2]any{nil, float64(1)} || alter["target"].(map[string]any)["resource"].(map[string]any)["name"] != "team-a" {
		t.Errorf("alter event changes %v", changes)
	}
}

// A stored tenant that takes a principal a config file's tenant lists is
// left out (and said so), the rest stays in force.
func TestTenantsFileOverStore(t *testing.T) {
	f := newFixture(t)
	tn, _ := f.withTenants(t)
	ctx := context.Background()
	if err := tn.CreateTenant(ctx, admin, TenantSpec{Name: "s1", Principals: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	if err := tn.CreateTenant(ctx, admin, TenantSpec{Name: "s2", Principals: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	err := tn.SetFixed([]TenantSpec{{Name: "f", Principals: []string{"alice"}}})
	if err == nil || !strings.Contains(err.Error(), "alice") {
		t.Fatalf("SetFixed: %v", err)
	}
	if a, _ := tn.Set().Of("alice"); a != "f" {
		t.Errorf("alice in %q", a)
	}
	if b, _ := tn.Set().Of("bob"); b != "s2" {
		t.Errorf("bob in %q", b)
	}
}

// The delegation matrix through AlterClientQuotas: carol administers
// team-a (alice, the svc-a- principals; ceilings producer 1 MiB/s and
// mutations 10/s). What she may alter is applied, everything else is
// refused with 31 and audited as denied; a quota admin is unaffected.
func TestDelegatedAlter(t *testing.T) {
	f := newFixture(t)
	f.withTenants(t,
		TenantSpec{Name: "team-a", Principals: []string{"alice"}, PrincipalPrefixes: []string{"svc-a-"}, ProducerByteRate: fp(1 << 20),
			ControllerMutationRate: fp(10), Admins: []string{"carol"}},
		TenantSpec{Name: "team-b", Principals: []string{"bob"}, ProducerByteRate: fp(1 << 20)},
	)
	carol := user("carol")
	u := func(n string) comp { return named("user", n) }
	cases := []struct {
		name  string
		entry []comp
		want  int16
	}{
		{"own principal, under the ceiling", ent(u("alice")), 0},
		{"a prefix's principal with a client-id", ent(u("svc-a-etl"), named("client-id", "c")), 0},
		{"the principal's default client-id", ent(u("alice"), dflt("client-id")), 0},
		{"another tenant's principal", ent(u("bob")), 31},
		{"a principal of no tenant", ent(u("mallory")), 31},
		{"the default user", ent(dflt("user")), 31},
		{"a client-id alone", ent(named("client-id", "c")), 31},
		{"a client-id prefix", ent(named("client-id-prefix", "svc-")), 31},
		{"an ip", ent(named("ip", "10.0.0.1")), 31},
	}
	for _, c := range cases {
		resp := f.alter(t, carol, false, entry(c.entry, set("producer_byte_rate", 1<<19)))
		if got := resp.Entries[0].ErrorCode; got != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, got, deref(resp.Entries[0].ErrorMessage), c.want)
		}
	}
	for _, c := range []struct {
		name string
		op   []kmsgOp
		want int16
		msg  string
	}{
		{"at the ceiling", ops(set("producer_byte_rate", 1<<20)), 0, ""},
		{"above the ceiling", ops(set("producer_byte_rate", 1<<20+1)), 31, "above tenant team-a's ceiling of 1048576"},
		{"mutations under theirs", ops(set("controller_mutation_rate", 5)), 0, ""},
		{"a key the tenant has no ceiling for", ops(set("consumer_byte_rate", 1)), 31, "no consumer_byte_rate ceiling"},
		{"request_percentage", ops(set("request_percentage", 50)), 31, "no request_percentage ceiling"},
		{"shadow and burst", ops(set("shadow", 1), set("burst_seconds", 0)), 0, ""},
		{"remove what it may set", ops(rm("producer_byte_rate"), rm("shadow")), 0, ""},
		{"remove what it may not", ops(rm("request_percentage")), 31, "no request_percentage ceiling"},
	} {
		resp := f.alter(t, carol, false, entry(ent(u("alice")), c.op...))
		e := resp.Entries[0]
		if e.ErrorCode != c.want || !strings.Contains(deref(e.ErrorMessage), c.msg) {
			t.Errorf("%s: %d %s, want %d %q", c.name, e.ErrorCode, deref(e.ErrorMessage), c.want, c.msg)
		}
	}
	if v := f.stored(t, storeUser("alice")); v["controller_mutation_rate"] != 5 || v["burst_seconds"] != 0 || len(v) != 2 {
		t.Errorf("alice's quotas: %v", v)
	}
	// A request mixing both: entry by entry.
	resp := f.alter(t, carol, false, entry(ent(u("alice")), set("producer_byte_rate", 1000)), entry(ent(u("bob")), set("producer_byte_rate", 1000)))
	codes := map[string]int16{}
	for _, e := range resp.Entries {
		codes[*e.Entity[0].Name] = e.ErrorCode
	}
	if codes["alice"] != 0 || codes["bob"] != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("mixed request: %v", codes)
	}
	// Someone who administers nothing is refused as before; a quota admin
	// is not bound by the ceiling.
	if r := f.alter(t, alice, false, entry(ent(u("alice")), set("producer_byte_rate", 1))); r.Entries[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("alice: %d", r.Entries[0].ErrorCode)
	}
	if r := f.alter(t, admin, false, entry(ent(u("alice")), set("producer_byte_rate", 1<<30))); r.Entries[0].ErrorCode != 0 {
		t.Errorf("admin: %d", r.Entries[0].ErrorCode)
	}
	denied := 0
	for _, ev := range f.events(t) {
		if ev["action"] == "alter_client_quotas" && ev["outcome"] == "denied" {
			denied++
			if !strings.HasPrefix(ev["error_message"].(string), msgClusterAuthorizationFailed) {
				t.Errorf("denial message %q", ev["error_message"])
			}
		}
	}
	if denied != 6+4+1+1 {
		t.Errorf("%d denied events, want 12", denied)
	}
}

type (
	kmsgOp   = kmsg.AlterClientQuotasRequestEntryOp
	kmsgComp = kmsg.DescribeClientQuotasRequestComponent
)

func ops(o ...kmsgOp) []kmsgOp           { return o }
func comps(c ...kmsgComp) []kmsgComp     { return c }
func storeUser(n string) store.Component { return store.Named(store.TypeUser, n) }

// DescribeClientQuotas for a tenant's admin and for its principals: their
// tenant's user entities only, a filter naming another's refused and
// audited; quota admins and principals of no tenant see everything.
func TestDelegatedDescribe(t *testing.T) {
	f := newFixture(t)
	f.mustAlter(t,
		entry(ent(named("user", "alice")), set("producer_byte_rate", 10)),
		entry(ent(named("user", "alice"), named("client-id", "c")), set("producer_byte_rate", 11)),
		entry(ent(named("user", "bob")), set("producer_byte_rate", 20)),
		entry(ent(dflt("user")), set("producer_byte_rate", 30)),
		entry(ent(named("client-id", "c")), set("producer_byte_rate", 40)),
	)
	f.withTenants(t,
		TenantSpec{Name: "team-a", Principals: []string{"alice"}, ProducerByteRate: fp(100), Admins: []string{"carol"}},
		TenantSpec{Name: "team-b", Principals: []string{"bob"}},
	)
	count := func(who Initiator, comps ...kmsgComp) (int, int16) {
		r := f.describe(t, who, false, comps...)
		return len(r.Entries), r.ErrorCode
	}
	for _, c := range []struct {
		who   Initiator
		comps []kmsgComp
		n     int
		code  int16
	}{
		{user("carol"), nil, 2, 0},
		{user("carol"), comps(anyOf("user")), 2, 0},
		{user("carol"), comps(exact("user", "alice")), 2, 0},
		{user("carol"), comps(exact("user", "bob")), 0, 31},
		{user("carol"), comps(defaultOf("user")), 0, 31},
		{user("carol"), comps(exact("client-id", "c")), 1, 0},
		{alice, nil, 2, 0},
		{user("bob"), nil, 1, 0},
		{user("bob"), comps(exact("user", "alice")), 0, 31},
		{user("nobody"), nil, 5, 0},
		{admin, nil, 5, 0},
	} {
		n, code := count(c.who, c.comps...)
		if n != c.n || code != c.code {
			t.Errorf("%s %v: %d entries, code %d; want %d, %d", c.who.Principal.Name, c.comps, n, code, c.n, c.code)
		}
	}
	denied := 0
	for _, ev := range f.events(t) {
		if ev["action"] == "describe_client_quotas" && ev["outcome"] == "denied" {
			denied++
		}
	}
	if denied != 3 {
		t.Errorf("%d denied descriptions audited, want 3", denied)
	}
}

// A tenant's admin describes its principals' SCRAM credentials (so that
// kafka-configs can describe users for it), never others', and alters
// none; naming another refuses the whole request and is audited.
func TestDelegatedScramDescribe(t *testing.T) {
	f := newCredFixture(t)
	f.mustAlter(t, alterScram(nil, upsert(t, "alice", 1, "pw", 4096), upsert(t, "bob", 1, "pw", 4096)))
	tn, _ := f.withTenants(t, TenantSpec{Name: "team-a", Principals: []string{"alice"}, Admins: []string{"carol"}},
		TenantSpec{Name: "team-b", Principals: []string{"bob"}})
	f.c.Tenants = tn
	carol := user("carol")
	describe := func(who Initiator, users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			r.Users = append(r.Users, ru)
		}
		return f.c.DescribeUserScramCredentials(context.Background(), who, r)
	}
	if r := describe(carol); r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].User != "alice" {
		t.Errorf("carol, every user: %+v", r)
	}
	if r := describe(carol, "alice"); r.ErrorCode != 0 || len(r.Results) != 1 || len(r.Results[0].CredentialInfos) != 1 {
		t.Errorf("carol, alice: %+v", r)
	}
	if r := describe(carol, "alice", "bob"); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("carol, alice and bob: %+v", r)
	}
	if r := describe(user("bob")); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("bob, a member but no admin: %+v", r)
	}
	if r := f.alter(carol, alterScram(nil, upsert(t, "alice", 1, "x", 4096))); r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("carol alters a credential: %s", scramResults(r))
	}
	denied := 0
	for _, ev := range f.events(t) {
		if ev["action"] == "describe_user_scram_credentials" && ev["outcome"] == "denied" {
			denied++
		}
	}
	if denied != 1 {
		t.Errorf("%d refused descriptions audited, want 1", denied)
	}
}

// manyNames is n distinct names of size bytes.
func manyNames(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%0*d", size, i)
	}
	return out
}
