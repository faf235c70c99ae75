package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/cli"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Tenants end to end: a tenant's ceiling shared fairly by real franz-go
// producers in virtual time, each logged in as its own principal (SASL
// PLAIN with an API key: user "token", principal the key's identity).

const (
	tenantC   = 512 << 10 // the tenant's ceiling, bytes per second
	tenantOwn = 157286    // a principal's own quota, 0.3 C
)

// tenantBubble starts a gateway in the bubble on a SASL_PLAINTEXT
// listener whose API keys authenticate users, with the config edits, and
// returns the keys by user.
func tenantBubble(t *testing.T, users []string, edit func(*app.Config)) (*testkit.Env, map[string]string) {
	t.Helper()
	creds, keys := writeCredentials(t, nil, users...)
	env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
		edit(c)
	})
	byUser := map[string]string{}
	for i, u := range users {
		byUser[u] = keys[i]
	}
	return env, byUser
}

// producer produces at full speed as user for d, counting each second's
// produce bytes as the quotas count them.
func tenantProducer(t *testing.T, env *testkit.Env, key string, d time.Duration) *perSecond {
	p := &perSecond{start: time.Now()}
	cl := bubbleClient(t, env, kgo.WithHooks(p), kgo.ProducerBatchMaxBytes(32<<10),
		kgo.SASL(plain.Auth{User: "token", Pass: key}.AsMechanism()))
	produceFor(cl, "tenant", d)
	return p
}

// The benchmark: one tenant, ten principals producing at full
// speed, each with its own quota of 0.3 C (3 C together) under the
// tenant's ceiling C. Over 30 s after the tenant's start-up burst the
// tenant gets C within ±5 %, each principal its fair share C/10 (within
// ±15 %: a request is 32 KiB, a principal's second ~51 KiB), none more
// than its own quota.
func TestSynctestTenantTenPrincipalsShareTheCeiling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var users []string
		for i := range 10 {
			users = append(users, fmt.Sprintf("svc-team-%d", i))
		}
		env, keys := tenantBubble(t, users, func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(tenantOwn)}}
			c.Tenants = []app.TenantEntry{{Name: "team", PrincipalPrefixes: []string{"svc-team-"}, ProducerByteRate: ptrF(tenantC)}}
		})
		const run = 45 * time.Second
		per := make([]*perSecond, len(users))
		var wg sync.WaitGroup
		for i, u := range users {
			wg.Go(func() { per[i] = tenantProducer(t, env, keys[u], run) })
		}
		wg.Wait()
		var total float64
		for _, p := range per {
			total += p.sum(15, 45)
		}
		within(t, "the tenant, 15–45 s", total, tenantC*30, 0.05)
		for i, p := range per {
			got := p.sum(15, 45)
			within(t, users[i]+"'s fair share, 15–45 s", got, tenantC*30/10, 0.15)
			if got > tenantOwn*30*1.03 {
				t.Errorf("%s got %.2f of its own quota", users[i], got/(tenantOwn*30))
			}
		}
		for _, u := range env.App.Engine().TenantUsage(time.Now()) {
			if u.Tenant == "team" && (u.Active != 10 || u.Throttles == 0) {
				t.Errorf("tenant usage %+v: want 10 active principals, throttles", u)
			}
		}
	})
}

// within fails unless got is within ±tol of want.
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	t.Logf("%s: %.0f bytes = %.3f × %.0f", what, got, got/want, want)
	if got < want*(1-tol) || got > want*(1+tol) {
		t.Errorf("%s: %.3f × what was expected, want within ±%.0f %%", what, got/want, tol*100)
	}
}

// A principal alone may use the ceiling up to its own quota: svc-small
// (own quota 0.3 C) gets 0.3 C, then svc-big (own quota 2 C) alone gets C.
func TestSynctestTenantAloneUsesTheCeiling(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		users := []string{"svc-small", "svc-big"}
		small, big := "svc-small", "svc-big"
		env, keys := tenantBubble(t, users, func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{{User: &small, ProducerByteRate: ptrF(tenantOwn)}, {User: &big, ProducerByteRate: ptrF(2 * tenantC)}}
			c.Tenants = []app.TenantEntry{{Name: "team", Principals: users, ProducerByteRate: ptrF(tenantC)}}
		})
		p := tenantProducer(t, env, keys[small], 45*time.Second)
		within(t, "svc-small alone, 15–45 s (its own quota binds)", p.sum(15, 45), tenantOwn*30, 0.05)
		time.Sleep(15 * time.Second) // svc-small leaves the active principals
		p = tenantProducer(t, env, keys[big], 45*time.Second)
		within(t, "svc-big alone, 15–45 s (the ceiling binds)", p.sum(15, 45), tenantC*30, 0.05)
	})
}

// A shadow tenant throttles nobody and says what it would have done; the
// switch to enforced (a reload of the file here) holds the tenant to its
// ceiling.
func TestSynctestTenantShadow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		users := []string{"svc-a", "svc-b"}
		env, keys := tenantBubble(t, users, func(c *app.Config) {
			// Their own quotas bound them (a bubble has no network to
			// slow an unbounded producer): C each, 2 C together.
			c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(tenantC)}}
			c.Tenants = []app.TenantEntry{{Name: "team", Principals: users, ProducerByteRate: ptrF(tenantC / 4), Shadow: true}}
		})
		var wg sync.WaitGroup
		var got [2]float64
		for i, u := range users {
			wg.Go(func() { got[i] = tenantProducer(t, env, keys[u], 20*time.Second).sum(10, 20) })
		}
		wg.Wait()
		within(t, "a shadow tenant's principals, 10–20 s (their own quotas, not the ceiling)", got[0]+got[1], 2*tenantC*10, 0.05)
		var u quota.TenantUsage
		for _, x := range env.App.Engine().TenantUsage(time.Now()) {
			u = x
		}
		if !u.Shadow || u.Throttles != 0 || u.Shadowed.Throttled == 0 {
			t.Errorf("shadow tenant usage %+v", u)
		}
		t.Logf("shadow: %s", u.Shadowed)
	})
}

// Delegated administration through the tools people use: carol, team-a's
// admin, alters and describes her tenant's principals' quotas with kadm and
// `tollgate configs` (SASL PLAIN with her API key), within team-a's
// ceilings; everything else is refused with CLUSTER_AUTHORIZATION_FAILED
// and audited as denied. A tenant created with `tollgate tenants` through
// the admin API delegates at once.
func TestDelegatedAdminThroughKadmAndCLI(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, delegatedAdminThroughKadmAndCLI)
}

func delegatedAdminThroughKadmAndCLI(t *testing.T, up *testkit.Upstream) {
	auditFile := filepath.Join(t.TempDir(), "audit.log")
	ids := []string{"admin", "carol", "alice", "bob", "dave", "svc-c-1"}
	env, keyList := startTerminateOn(t, up, nil, ids, func(c *app.Config) {
		c.Authorization.QuotaAdmins = []string{"admin"}
		c.Audit.File = auditFile
		c.Audit.AggregateInterval = -1 // every denial written
		c.Tenants = []app.TenantEntry{
			{Name: "team-a", Principals: []string{"alice"}, PrincipalPrefixes: []string{"svc-a-"}, ProducerByteRate: ptrF(1 << 20),
				ControllerMutationRate: ptrF(10), Admins: []string{"carol"}},
			{Name: "team-b", Principals: []string{"bob"}, ProducerByteRate: ptrF(1 << 20)},
		}
	})
	keys := map[string]string{}
	for i, id := range ids {
		keys[id] = keyList[i]
	}
	ctx := ctxT(t, 60*time.Second)
	as := func(id string) *kadm.Client {
		return kadm.NewClient(franzClient(t, franzOpts(env.Bootstrap, nil, "PLAIN", "token", keys[id])...))
	}
	admin, carol, dave := as("admin"), as("carol"), as("dave")
	user := func(n string) kadm.ClientQuotaEntity { return kadm.ClientQuotaEntity{{Type: "user", Name: &n}} }
	alter := func(adm *kadm.Client, e kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) (error, string) {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
		if err != nil || len(res) != 1 {
			t.Fatalf("alter %v: %v %+v", e, err, res)
		}
		return res[0].Err, res[0].ErrMessage
	}
	prod := func(v float64) kadm.AlterClientQuotaOp {
		return kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: v}
	}
	if err, msg := alter(admin, user("bob"), prod(5000)); err != nil {
		t.Fatalf("the quota admin: %v %s", err, msg)
	}
	clientX, dflt := "x", kadm.ClientQuotaEntity{{Type: "user"}}
	for _, c := range []struct {
		what string
		adm  *kadm.Client
		e    kadm.ClientQuotaEntity
		ops  []kadm.AlterClientQuotaOp
		ok   bool
		msg  string
	}{
		{"carol: alice under the ceiling", carol, user("alice"), []kadm.AlterClientQuotaOp{prod(512 << 10)}, true, ""},
		{"carol: a prefix's principal, shadow", carol, user("svc-a-etl"), []kadm.AlterClientQuotaOp{prod(1 << 20), {Key: "shadow", Value: 1}}, true, ""},
		{"carol: mutations under the ceiling", carol, user("alice"), []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 5}}, true, ""},
		{"carol: above the ceiling", carol, user("alice"), []kadm.AlterClientQuotaOp{prod(2 << 20)}, false, "above tenant team-a's ceiling"},
		{"carol: a key without a ceiling", carol, user("alice"), []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1}}, false, "no consumer_byte_rate ceiling"},
		{"carol: team-b's bob", carol, user("bob"), []kadm.AlterClientQuotaOp{prod(1)}, false, "not a principal of team-a"},
		{"carol: the default user", carol, dflt, []kadm.AlterClientQuotaOp{prod(1)}, false, "user entities of its tenant's principals"},
		{"carol: a client-id", carol, kadm.ClientQuotaEntity{{Type: "client-id", Name: &clientX}}, []kadm.AlterClientQuotaOp{prod(1)}, false, "user entities"},
		{"dave (no tenant): alice", dave, user("alice"), []kadm.AlterClientQuotaOp{prod(1)}, false, "Cluster authorization failed."},
	} {
		err, msg := alter(c.adm, c.e, c.ops...)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v %s", c.what, err, msg)
		case !c.ok && (!isKerr(err, kerr.ClusterAuthorizationFailed) || !strings.Contains(msg, c.msg)):
			t.Errorf("%s: %v %q, want CLUSTER_AUTHORIZATION_FAILED with %q", c.what, err, msg, c.msg)
		}
	}
	described, err := carol.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(described) != 2 {
		t.Errorf("carol describes everything: %v %+v, want alice's and svc-a-etl's entities only", err, described)
	}
	bob := "bob"
	if _, err := carol.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &bob}}); !isKerr(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("carol describes bob: %v", err)
	}
	if all, err := admin.DescribeClientQuotas(ctx, false, nil); err != nil || len(all) != 3 {
		t.Errorf("the quota admin describes: %v %d entities, want 3", err, len(all))
	}

	// The same through `tollgate configs --command-config`.
	props := filepath.Join(t.TempDir(), "carol.properties")
	os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="token" password="`+keys["carol"]+`";`+"\n"), 0o600)
	configs := func(args ...string) (int, string) {
		var out, errb strings.Builder
		code := cli.Configs(append([]string{"--bootstrap-server", env.Bootstrap, "--command-config", props}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576"}, 0, "Completed updating config for user alice."},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048577"}, 1, "above tenant team-a's ceiling"},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "producer_byte_rate=1"}, 1, "ClusterAuthorizationException"},
		{[]string{"--alter", "--entity-type", "users", "--entity-default", "--add-config", "producer_byte_rate=1"}, 1, "ClusterAuthorizationException"},
		{[]string{"--describe", "--entity-type", "users", "--entity-name", "alice"}, 0, "producer_byte_rate=1048576"},
		{[]string{"--describe", "--entity-type", "users", "--entity-name", "bob"}, 1, "ClusterAuthorizationException"},
	} {
		code, out := configs(c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("tollgate configs %v: %d %s\nwant %d with %q", c.args, code, out, c.code, c.want)
		}
	}

	// A tenant made with `tollgate tenants`: dave administers it at once.
	var out, errb strings.Builder
	code := cli.Tenants([]string{"create", "team-c", "--principal", "svc-c-1", "--admin", "dave", "--add-config", "producer_byte_rate=2097152",
		"--admin-url", "http://" + env.App.HTTPAddr(), "--api-key", keys["admin"]}, &out, &errb)
	if code != 0 {
		t.Fatalf("tollgate tenants create: %d %s%s", code, out.String(), errb.String())
	}
	if err, msg := alter(dave, user("svc-c-1"), prod(2<<20)); err != nil {
		t.Errorf("dave, team-c's new admin: %v %s", err, msg)
	}

	// Every refusal is in the audit log as denied, with carol's principal.
	data, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Action, Outcome string
			Initiator       struct{ Principal string }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		counts[ev.Initiator.Principal+" "+ev.Action+" "+ev.Outcome]++
	}
	for k, want := range map[string]int{
		"User:carol alter_client_quotas applied":   4,
		"User:carol alter_client_quotas denied":    5 + 3,
		"User:carol describe_client_quotas denied": 1,
		// The CLI describes every quota and keeps bob's (none carol may
		// see), then asks for bob's SCRAM credentials: refused.
		"User:carol describe_user_scram_credentials denied": 1,
		"User:dave alter_client_quotas denied":              1,
		"User:admin tenant_create applied":                  1,
		"User:dave alter_client_quotas applied":             1,
		"User:admin alter_client_quotas applied":            1,
	} {
		if counts[k] != want {
			t.Errorf("audit: %d × %q, want %d", counts[k], k, want)
		}
	}
}

// The config file's tenants change live: a reload that takes carol off
// team-a's admins refuses her next alteration, marks the tenant shadow
// (logged), and a file whose tenants do not validate changes nothing.
func TestTenantsReloadLive(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, tenantsReloadLive)
}

func tenantsReloadLive(t *testing.T, up *testkit.Upstream) {
	credPath, keyList := writeCredentials(t, nil, "carol")
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	upstream := "" // kfake: no upstream is the embedded cluster
	if up.Real() {
		// The file says what the gateway runs with, its upstream too
		// (a reload does not change it; the file should not lie).
		var cfg app.Config
		up.Configure(&cfg)
		upstream = "upstream:\n  bootstrap: [" + strings.Join(cfg.Upstream.Bootstrap, ", ") + "]\n"
	}
	file := func(tenants string) []byte {
		return []byte("listeners:\n  - name: SASL_PLAINTEXT\n    bootstrap: 127.0.0.1:0\n    security_protocol: SASL_PLAINTEXT\n" +
			upstream + "credentials_file: " + credPath + "\ntenants:\n" + tenants)
	}
	writeFileAtomic(t, cfgPath, file("  - {name: team-a, principals: [alice], producer_byte_rate: 1048576, admins: [carol]}\n"))
	env := up.Start(t, app.Options{ConfigPath: cfgPath, WatchInterval: time.Hour}, func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = credPath
		c.Tenants = []app.TenantEntry{{Name: "team-a", Principals: []string{"alice"}, ProducerByteRate: ptrF(1 << 20), Admins: []string{"carol"}}}
	})
	ctx := ctxT(t, 30*time.Second)
	carol := kadm.NewClient(franzClient(t, franzOpts(env.Bootstrap, nil, "PLAIN", "token", keyList[0])...))
	alice := "alice"
	alter := func() error {
		res, err := carol.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1000}}}})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	if err := alter(); err != nil {
		t.Fatalf("carol, team-a's admin: %v", err)
	}
	writeFileAtomic(t, cfgPath, file("  - {name: team-a, principals: [alice], producer_byte_rate: 1048576, shadow: true}\n"))
	if err := env.App.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := alter(); !isKerr(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("carol after the reload took her off team-a's admins: %v", err)
	}
	waitLog(t, env, 5*time.Second, "tenant mode changed", "tenant=team-a", "mode=shadow")
	if us := env.App.Engine().TenantUsage(time.Now()); len(us) != 1 || !us[0].Shadow {
		t.Errorf("after the reload: %+v", us)
	}
	writeFileAtomic(t, cfgPath, file("  - {name: team-a, principals: [alice]}\n  - {name: team-b, principals: [alice]}\n"))
	if err := env.App.Reload(); err == nil || !strings.Contains(err.Error(), "alice") {
		t.Errorf("a file listing alice in two tenants reloaded: %v", err)
	}
	if us := env.App.Engine().TenantUsage(time.Now()); len(us) != 1 || !us[0].Shadow || us[0].Ceiling != 1<<20 {
		t.Errorf("after a reload that failed: %+v", us)
	}
}
