package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// Rows of the attacks table (attacks_test.go) for points 7, 9, 10 and 11
// of the issue "A hostile tenant gets nothing": what the attacker sends,
// over real sockets with real clients, what they get (a refusal, never a
// grant), and the proof that nothing was granted or left growing.
// A tenant (alice, authenticated) and an unauthenticated client ask for the
// SCRAM users — all of them, or by name to learn which exist. Both get
// Kafka's answer for a principal without DESCRIBE on CLUSTER: error 31 for
// the response and one nameless 31 per name, the same for an existing
// user as for an unknown one. The quota admin sees the users; alice still
// describes quotas (DescribeClientQuotas stays open to authenticated
// principals).
func attackListUsers(t *testing.T) {
	env := startControl(t, func(c *app.Config) { c.Authorization.AllowAnonymousDescribe = true })
	ctx := ctxT(t, 30*time.Second)
	admin := adminAs(t, env, "127.0.0.2")
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"},
		{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "dave-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("the admin creates users: %v %v", err, res.Error())
	}

	for _, who := range []struct{ name, ip string }{{"alice", "127.0.0.3"}, {"ANONYMOUS", "127.0.0.1"}} {
		cl := adminAs(t, env, who.ip)
		for _, ask := range [][]string{nil, {"carol"}, {"nobody"}} {
			got, err := cl.DescribeUserSCRAMs(ctx, ask...)
			if !errors.Is(err, kerr.ClusterAuthorizationFailed) || len(got) != 0 {
				t.Errorf("%s lists users %v: %v %+v, want CLUSTER_AUTHORIZATION_FAILED and nothing", who.name, ask, err, got)
			}
		}
		// The exact answer, by hand: existing and unknown users alike.
		rc := dialRawVia(t, ctx, netDialerFrom(who.ip), env.Bootstrap)
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range []string{"carol", "nobody"} {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		resp := rc.do(t, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || resp.ErrorMessage != nil || len(resp.Results) != 2 {
			t.Fatalf("%s: %+v", who.name, resp)
		}
		for _, r := range resp.Results {
			if r.User != "" || r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage != nil || len(r.CredentialInfos) != 0 {
				t.Errorf("%s: a result tells something: %+v", who.name, r)
			}
		}
	}

	// The admin lists them; alice still reads quotas.
	got, err := admin.DescribeUserSCRAMs(ctx)
	if err != nil || len(got) != 2 || got["dave"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("the admin lists users: %v %+v", err, got)
	}
	alice := kadm.NewClient(newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.3"))))
	if _, err := alice.DescribeClientQuotas(ctx, false, nil); err != nil {
		t.Errorf("alice describes quotas: %v", err)
	}
}

// netDialerFrom is a dialer whose connections come from ip.
func netDialerFrom(ip string) *fromDialer { return &fromDialer{ip: ip} }

type fromDialer struct{ ip string }

func (d *fromDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return fromIP(d.ip)(ctx, network, addr)
}

// aggregateCount is the number of denials an aggregated audit event stands
// for, 0 for any other event.
func aggregateCount(ev map[string]any) uint64 {
	ag, ok := ev["aggregate"].(map[string]any)
	if !ok {
		return 0
	}
	n, _ := ag["count"].(float64)
	return uint64(n)
}

// An unauthenticated client floods the SASL listener with failed logins
// while an authenticated tenant floods it with AlterClientQuotas it may
// not make; meanwhile the quota admin makes changes, with audit.required.
// What the flood gets: every attempt refused, and the audit log grows by
// a few events per interval (the first of each principal and source, then
// one count per interval) instead of one fsync'd line per attempt. Every
// denial is accounted for (written or counted), every change of the admin
// is applied and audited, and the dashboard's recent events still show
// them all.
func attackAuditFlood(t *testing.T) {
	dataDir := t.TempDir()
	const interval = 500 * time.Millisecond
	env, keys := startTerminate(t, map[string]string{"alice": "alice-secret", "admin": "admin-secret"}, []string{"admin"}, func(c *app.Config) {
		c.DataDir = dataDir
		c.Audit.Required = true
		c.Audit.AggregateInterval = interval
		c.Authorization.QuotaAdmins = []string{"admin"}
		c.Listeners[0].SASL.FailedAuthenticationDelay = time.Millisecond
	})
	ctx := ctxT(t, 60*time.Second)
	start := time.Now()
	const logins, alters, changes = 200, 200, 10
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // failed logins, 4 at a time
		defer wg.Done()
		sem := make(chan struct{}, 4)
		var lw sync.WaitGroup
		for i := range logins {
			sem <- struct{}{}
			lw.Add(1)
			go func() {
				defer func() { <-sem; lw.Done() }()
				rc := dialRawVia(t, ctx, &net.Dialer{}, env.Bootstrap)
				if hs, err := rc.roundTrip(handshakeReq("PLAIN")); err != nil || hs.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
					t.Errorf("handshake %d: %v", i, err)
					return
				}
				resp, err := rc.roundTrip(saslAuthenticate(1, []byte(fmt.Sprintf("\x00admin\x00guess-%d", i))))
				if err != nil || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != kerr.SaslAuthenticationFailed.Code {
					t.Errorf("guess %d: %v %+v", i, err, resp)
				}
			}()
		}
		lw.Wait()
	}()
	go func() { // alice's denied alterations
		defer wg.Done()
		alice := kadm.NewClient(franzClient(t, franzOpts(env.Bootstrap, nil, "PLAIN", "alice", "alice-secret")...))
		for i := range alters {
			res, err := alice.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("victim")}},
				Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: float64(1 + i)}},
			}})
			if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
				t.Errorf("alice's alteration %d: %v %+v", i, err, res)
				return
			}
		}
	}()
	admin := kadm.NewClient(franzClient(t, franzOpts(env.Bootstrap, nil, "PLAIN", "admin", "admin-secret")...))
	for i := range changes {
		res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kmsg.StringPtr(fmt.Sprintf("svc-%d", i))}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}},
		}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("the admin's change %d during the flood: %v %+v", i, err, res)
		}
	}
	wg.Wait()
	floodEnd := time.Since(start)
	if q := env.App.Engine().Quotas(); q.Len() != changes {
		t.Fatalf("%d quota entities, want the admin's %d (nothing of alice's)", q.Len(), changes)
	}

	// Every denial is accounted for: written, or counted in an aggregated
	// event at the end of its interval.
	var written, summed, lines map[string]uint64
	var applied int
	var elapsed time.Duration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		elapsed = time.Since(start)
		_, events := auditLines(t, filepath.Join(dataDir, "audit.log"))
		written, summed, lines, applied = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}, 0
		for _, ev := range events {
			if ev["outcome"] == "applied" {
				applied++
				continue
			}
			if ev["outcome"] != "denied" {
				continue
			}
			lines[ev["action"].(string)]++
			if n := aggregateCount(ev); n > 0 {
				summed[ev["action"].(string)] += n
			} else {
				written[ev["action"].(string)]++
			}
		}
		if written["authenticate"]+summed["authenticate"] >= logins && written["alter_client_quotas"]+summed["alter_client_quotas"] >= alters ||
			time.Now().After(deadline) {
			break
		}
	}
	t.Logf("flood over after %v; audit: written %v, counted %v, %d applied", floodEnd.Round(time.Millisecond), written, summed, applied)
	for action, n := range map[string]uint64{"authenticate": logins, "alter_client_quotas": alters} {
		if got := written[action] + summed[action]; got != n {
			t.Errorf("%s: %d denials in the audit log, want %d", action, got, n)
		}
		// One principal and source each: the first as it came, then one
		// event per interval (two if the flood paused for an interval).
		if bound := 2 * uint64(1+elapsed/interval); lines[action] > bound {
			t.Errorf("%s: %d audit lines for %d denials in %v, want at most %d (one per interval)", action, lines[action], n, elapsed, bound)
		}
	}
	if applied != changes {
		t.Errorf("%d applied changes audited, want %d", applied, changes)
	}
	if m := scrapeMetric(t, env, "tollgate_audit_denials_aggregated_total"); m != float64(summed["authenticate"]+summed["alter_client_quotas"]) {
		t.Errorf("tollgate_audit_denials_aggregated_total = %v, want %d", m, summed["authenticate"]+summed["alter_client_quotas"])
	}

	// The dashboard's recent events still hold every change.
	req, _ := http.NewRequest("GET", env.App.HTTPURL()+"/api/v1/audit", nil)
	req.Header.Set("Authorization", "Bearer "+keys[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/api/v1/audit: %v %v", resp, err)
	}
	defer resp.Body.Close()
	var recent struct{ Events []map[string]any }
	json.NewDecoder(resp.Body).Decode(&recent)
	shown := 0
	for _, ev := range recent.Events {
		if ev["outcome"] == "applied" {
			shown++
		}
	}
	if shown != changes {
		t.Errorf("/api/v1/audit shows %d of the admin's %d changes among %d events", shown, changes, len(recent.Events))
	}
}

func handshakeReq(mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = 1, mech
	return r
}

// audit.max_file_size and audit.max_files: the quota admin's changes fill
// several files; every change is in exactly one of them, whole, and no
// file is over the size.
func attackAuditRotation(t *testing.T) {
	dataDir := t.TempDir()
	const maxSize, changes = 2048, 30
	env := startControl(t, func(c *app.Config) {
		c.DataDir = dataDir
		c.Audit.Required = true
		c.Audit.MaxFileSize = maxSize
		c.Audit.MaxFiles = 50
	})
	ctx := ctxT(t, 30*time.Second)
	admin := adminAs(t, env, "127.0.0.2")
	for i := range changes {
		res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kmsg.StringPtr(fmt.Sprintf("svc-%02d", i))}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}},
		}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("change %d: %v %+v", i, err, res)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dataDir, "audit.log*"))
	seen := map[string]int{}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Size() > maxSize {
			t.Errorf("%s: %v bytes (max %d), %v", f, fi.Size(), maxSize, err)
		}
		_, events := auditLines(t, f)
		for _, ev := range events {
			ent := ev["target"].(map[string]any)["entity"].([]any)[0].(map[string]any)
			seen[ent["name"].(string)]++
		}
	}
	if len(files) < 3 || len(seen) != changes {
		t.Fatalf("%d changes found in %d files, want %d in several", len(seen), len(files), changes)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s audited %d times", name, n)
		}
	}
}

// audit.topic on an upstream cluster that requires TLS (with a client
// certificate) and SASL: the sink connects as the gateway does, with
// upstream.tls and upstream.sasl, and a required audit log keeps working.
func attackAuditTopicSecured(t *testing.T) {
	pki := testpki.NewCA(t, "upstream-ca")
	server := pki.Server(t, "broker", "127.0.0.1")
	client := pki.Client(t, pkix.Name{CommonName: "tollgate"})
	brokerTLS := pki.ServerConfig(server)
	brokerTLS.ClientAuth = tls.RequireAndVerifyClientCert
	env := testkit.Start(t, app.Options{DevClusterOpts: []kfake.Opt{kfake.TLS(brokerTLS), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "svc", "svc-secret")}}, func(c *app.Config) {
		c.Upstream.TLS = &auth.UpstreamTLSConfig{CAFile: pki.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}
		c.Upstream.SASL = &app.UpstreamSASL{Mechanism: "SCRAM-SHA-256", Username: "svc", Password: "svc-secret"}
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{{CIDR: "127.0.0.2/32", Principal: "admin"}}
		c.Authorization.QuotaAdmins = []string{"admin"}
		c.Audit.Topic = "tollgate-audit"
		c.Audit.Required = true
	})
	ctx := ctxT(t, 30*time.Second)
	res, err := adminAs(t, env, "127.0.0.2").AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kmsg.StringPtr("audited")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("a change with a required audit topic on a TLS+SASL upstream: %v %+v", err, res)
	}
	rec, ev := oneAuditEvent(t, ctx, "tollgate-audit", kgo.SeedBrokers(env.App.DevCluster().Addrs()...),
		kgo.DialTLSConfig(pki.ClientConfig(client.TLS)), kgo.SASL(scram.Auth{User: "svc", Pass: "svc-secret"}.AsSha256Mechanism()))
	if ev["outcome"] != "applied" {
		t.Fatalf("event %s", rec.Value)
	}
}

// credFile is a credentials file a test rewrites: SCRAM users and API keys
// that keep their plaintexts across rewrites.
type credFile struct {
	path  string
	users map[string]auth.CredentialFileUser
	keys  map[string]auth.CredentialFileAPIKey // by identity
	plain map[string]string                    // identity → API key
}

func newCredFile(t *testing.T, users map[string]string, keyIdentities ...string) *credFile {
	t.Helper()
	f := &credFile{path: filepath.Join(t.TempDir(), "credentials.yaml"), users: map[string]auth.CredentialFileUser{},
		keys: map[string]auth.CredentialFileAPIKey{}, plain: map[string]string{}}
	for name, pass := range users {
		u, err := auth.NewCredentialFileUser(name, pass, 4096)
		if err != nil {
			t.Fatal(err)
		}
		f.users[name] = u
	}
	for _, id := range keyIdentities {
		plaintext, k, err := auth.NewAPIKey(id)
		if err != nil {
			t.Fatal(err)
		}
		f.keys[id], f.plain[id] = auth.NewCredentialFileAPIKey(k), plaintext
	}
	f.write(t)
	return f
}

// write replaces the file atomically (as an editor or config management
// does), holding the users and keys not removed.
func (f *credFile) write(t *testing.T, remove ...string) {
	t.Helper()
	var cf auth.CredentialFile
	for name, u := range f.users {
		if !slices.Contains(remove, name) {
			cf.Users = append(cf.Users, u)
		}
	}
	for id, k := range f.keys {
		if !slices.Contains(remove, id) {
			cf.APIKeys = append(cf.APIKeys, k)
		}
	}
	data, err := cf.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, f.path, data)
}

func writeFileAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadConfig is the part of tollgate.yaml this test changes (the
// listeners are restart-only: the file's are ignored on reload).
func reloadConfig(credPath string, admins ...string) []byte {
	return []byte(fmt.Sprintf("listeners:\n  - name: SASL_PLAINTEXT\n    bootstrap: 127.0.0.1:0\n    security_protocol: SASL_PLAINTEXT\n"+
		"credentials_file: %s\nauthorization:\n  quota_admins: [%s]\n", credPath, strings.Join(admins, ", ")))
}

// Operators take rights away live, and an attacker who held them keeps
// nothing. bob starts as a quota admin with a SCRAM user and an API key.
// SIGHUP's path (App.Reload) after quota_admins loses bob: bob's open
// connection and his key on the admin port are refused at their next
// request. The file-change path (the watcher) after the credentials file
// loses bob: his password and key no longer log in. A reload that cannot
// apply (a config file that does not parse, a credentials file that does
// not either) logs why and changes nothing: admin keeps her rights and
// bob gets none back.
func attackRevokedLive(t *testing.T) {
	creds := newCredFile(t, map[string]string{"admin": "admin-secret", "bob": "bob-secret"}, "admin", "bob")
	cfgPath := filepath.Join(t.TempDir(), "tollgate.yaml")
	writeFileAtomic(t, cfgPath, reloadConfig(creds.path, "admin", "bob"))
	env := testkit.Start(t, app.Options{ConfigPath: cfgPath, WatchInterval: 20 * time.Millisecond}, func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.Listeners[0].SASL.FailedAuthenticationDelay = time.Millisecond
		c.CredentialsFile = creds.path
		c.Authorization.QuotaAdmins = []string{"admin", "bob"}
	})
	ctx := ctxT(t, 30*time.Second)
	port := newAdminPort(t, env, nil)
	alterAs := func(cl *kadm.Client, name string) error {
		res, err := cl.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kmsg.StringPtr(name)}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 4096}},
		}})
		if err != nil {
			return err
		}
		return res[0].Err
	}
	login := func(user, pass string) *kadm.Client {
		return kadm.NewClient(franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", user, pass), kgo.RetryTimeout(time.Second))...))
	}
	createKey := func(as, identity string) int {
		code, _ := port.call(t, "POST", "/api/v1/apikeys", `{"identity": "`+identity+`"}`, bearer(creds.plain[as])...)
		return code
	}
	bob, admin := login("bob", "bob-secret"), login("admin", "admin-secret")
	if err := alterAs(bob, "by-bob"); err != nil {
		t.Fatalf("bob, a quota admin, alters: %v", err)
	}
	if code := createKey("bob", "bob-made"); code != 201 {
		t.Fatalf("bob's key creates a key: %d", code)
	}

	// SIGHUP's path: quota_admins without bob.
	writeFileAtomic(t, cfgPath, reloadConfig(creds.path, "admin"))
	if err := env.App.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if err := alterAs(bob, "by-bob-after"); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("bob's open connection after his removal from quota_admins: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if code := createKey("bob", "bob-made-after"); code != 403 {
		t.Errorf("bob's key on the admin port after his removal: %d, want 403", code)
	}
	if err := alterAs(admin, "by-admin"); err != nil {
		t.Errorf("admin after the reload: %v", err)
	}

	// The file-change path: bob's user and key leave the credentials file,
	// and bob's open connection is closed.
	creds.write(t, "bob")
	waitLog(t, env, 5*time.Second, "credentials reloaded", "users=1", "api_keys=1")
	waitLog(t, env, 5*time.Second, "reason=credential_revoked")
	if err := alterAs(bob, "bob-old-connection"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("bob's client after his removal from the credentials file: %v, want its connection closed and SASL_AUTHENTICATION_FAILED on the next login", err)
	}
	if err := alterAs(login("bob", "bob-secret"), "bob-new-login"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("bob logs in after his removal from the credentials file: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if code, body := port.call(t, "GET", "/api/v1/audit", "", bearer(creds.plain["bob"])...); code != 401 {
		t.Errorf("bob's removed key on the admin port: %d %s, want 401", code, truncateBody(body))
	}
	if err := alterAs(login("admin", "admin-secret"), "admin-new-login"); err != nil {
		t.Errorf("admin logs in after the credentials reload: %v", err)
	}

	// Reloads that cannot apply: logged, nothing changed.
	writeFileAtomic(t, cfgPath, append(reloadConfig(creds.path, "admin", "bob"), "authorisation: {}\n"...))
	if err := env.App.Reload(); err == nil {
		t.Error("a config file with an unknown key reloaded")
	}
	waitLog(t, env, 5*time.Second, "config reload failed; keeping the running configuration", "authorisation")
	if code := createKey("admin", "admin-made"); code != 201 {
		t.Errorf("admin after a failed reload: %d", code)
	}
	// bob's credential is gone (his connection was closed above): he is
	// refused at the login, and the failed reload granted him nothing.
	if err := alterAs(bob, "bob-after-bad-reload"); !errors.Is(err, kerr.SaslAuthenticationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("bob after a failed reload that named him: %v, want a refusal", err)
	}
	writeFileAtomic(t, cfgPath, reloadConfig(creds.path, "admin"))
	writeFileAtomic(t, creds.path, []byte("users:\n  - name: admin\n    scram:\n      SCRAM-SHA-512: not-a-credential\n"))
	waitLog(t, env, 5*time.Second, "config reload failed; keeping the running configuration", "credentials_file")
	if err := alterAs(login("admin", "admin-secret"), "admin-after-bad-creds"); err != nil {
		t.Errorf("admin logs in after a credentials file that cannot be read: %v", err)
	}
	if code := createKey("admin", "admin-made-2"); code != 201 {
		t.Errorf("admin's key after a credentials file that cannot be read: %d", code)
	}
	noneBy := []string{"by-bob-after", "bob-new-login", "bob-after-bad-reload", "bob-old-connection"}
	q := env.App.Engine().Quotas()
	for _, e := range q.Entities() {
		for _, n := range noneBy {
			if strings.Contains(e.String(), n) {
				t.Errorf("a refused alteration was applied: %v", e)
			}
		}
	}
}

// scramFirst sends a SCRAM client-first message for user on a new
// connection and returns the salt and iteration count the gateway shows.
func scramFirst(t *testing.T, addr, mech, user string) (salt []byte, iterations string) {
	t.Helper()
	rc := dialRaw(t, addr)
	if hs := rc.handshake(t, 1, mech); hs.ErrorCode != 0 {
		t.Fatalf("SaslHandshake %s: %d", mech, hs.ErrorCode)
	}
	ar := rc.authenticate(t, 1, []byte("n,,n="+user+",r=e2e-client-nonce"))
	if ar.ErrorCode != 0 {
		t.Fatalf("client-first for %s: error %d", user, ar.ErrorCode)
	}
	for _, f := range strings.Split(string(ar.SASLAuthBytes), ",") {
		switch {
		case strings.HasPrefix(f, "s="):
			var err error
			if salt, err = base64.StdEncoding.DecodeString(f[2:]); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(f, "i="):
			iterations = f[2:]
		}
	}
	if salt == nil || iterations == "" {
		t.Fatalf("server-first %q", ar.SASLAuthBytes)
	}
	return salt, iterations
}

// An attacker probes names with SCRAM's first step, which shows a salt and
// an iteration count before any proof: a real user's, or a decoy's. The
// users here were made with kadm (24-byte salts) at 8192 iterations; the
// decoy must look the same, be the same for the same name on every probe,
// and still be the same after a restart — as a real user's salt is — or
// the attacker would learn which names exist.
func attackUserEnumeration(t *testing.T) {
	dataDir := t.TempDir()
	start := func() *testkit.Env {
		return startControl(t, func(c *app.Config) {
			c.DataDir = dataDir
			c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"})
		})
	}
	env := start()
	ctx := ctxT(t, 30*time.Second)
	ups := func() (out []kadm.UpsertSCRAM) { // kadm fills in the salt: a fresh list each time
		for _, u := range []string{"carol", "dave", "erin"} {
			out = append(out, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: u + "-secret"})
		}
		return out
	}
	if res, err := adminAs(t, env, "127.0.0.2").AlterUserSCRAMs(ctx, nil, ups()); err != nil || res.Error() != nil {
		t.Fatalf("the admin creates users: %v %v", err, res.Error())
	}
	sasl := env.App.Gateway().BootstrapAddrs()["SASL"]
	realSalt, realIters := scramFirst(t, sasl, "SCRAM-SHA-512", "carol")
	fakeSalt, fakeIters := scramFirst(t, sasl, "SCRAM-SHA-512", "mallory")
	if len(fakeSalt) != len(realSalt) || fakeIters != realIters {
		t.Errorf("unknown user: %d-byte salt, %s iterations; a real user: %d-byte salt, %s iterations", len(fakeSalt), fakeIters, len(realSalt), realIters)
	}
	if again, _ := scramFirst(t, sasl, "SCRAM-SHA-512", "mallory"); !bytes.Equal(again, fakeSalt) {
		t.Error("the unknown user's salt changed between two probes")
	}
	if other, _ := scramFirst(t, sasl, "SCRAM-SHA-512", "trudy"); bytes.Equal(other, fakeSalt) {
		t.Error("two unknown users, one salt")
	}
	// The proof fails alike for a wrong password and an unknown user.
	var msgs []string
	for _, u := range []string{"carol", "mallory"} {
		cl := franzClient(t, append(franzOpts(sasl, nil, "SCRAM-SHA-512", u, "guess"), kgo.RetryTimeout(time.Second))...)
		err := cl.Ping(ctx)
		if err == nil {
			t.Fatalf("%s with a guessed password logged in", u)
		}
		msgs = append(msgs, strings.ReplaceAll(err.Error(), u, "USER"))
	}
	if msgs[0] != msgs[1] {
		t.Errorf("a wrong password answers %q, an unknown user %q", msgs[0], msgs[1])
	}

	// A restart on the same data directory.
	if err := env.App.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	env = start()
	sasl = env.App.Gateway().BootstrapAddrs()["SASL"]
	if after, iters := scramFirst(t, sasl, "SCRAM-SHA-512", "mallory"); !bytes.Equal(after, fakeSalt) || iters != fakeIters {
		t.Error("the unknown user's salt changed with a restart (a real user's does not)")
	}
	if after, _ := scramFirst(t, sasl, "SCRAM-SHA-512", "carol"); !bytes.Equal(after, realSalt) {
		t.Error("carol's salt changed with a restart")
	}
	if fi, err := os.Stat(filepath.Join(dataDir, app.DecoySecretFile)); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Errorf("the decoy secret: %v %v", fi, err)
	}
	// The salt comes from the data directory's secret, not from this
	// process (both gateways above ran in it): another gateway with the
	// same users and a data directory of its own shows another.
	elsewhere := startControl(t, func(c *app.Config) {
		c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"})
	})
	if res, err := adminAs(t, elsewhere, "127.0.0.2").AlterUserSCRAMs(ctx, nil, ups()); err != nil || res.Error() != nil {
		t.Fatalf("the same users elsewhere: %v %v", err, res.Error())
	}
	if s, _ := scramFirst(t, elsewhere.App.Gateway().BootstrapAddrs()["SASL"], "SCRAM-SHA-512", "mallory"); bytes.Equal(s, fakeSalt) {
		t.Error("two data directories, one decoy salt: the secret is not the data directory's")
	}
}

// An attacker guesses alice's password from one address. After
// authentication.failed_logins_per_ip failures, that address's logins are
// refused before any credential is checked — alice's right password
// included, an unknown user alike, with one message that says nothing of
// the user — and counted and audited. alice, from another address, logs
// in and produces: the attacker locked out nobody else.
func attackPasswordGuessing(t *testing.T) {
	dataDir := t.TempDir()
	env, _ := startTerminate(t, map[string]string{"alice": "alice-secret"}, nil, func(c *app.Config) {
		c.DataDir = dataDir
		c.Authentication.FailedLoginsPerIP = 3
		c.Authentication.FailedLoginWindow = time.Hour
		c.Listeners[0].SASL.FailedAuthenticationDelay = time.Millisecond
	})
	ctx := ctxT(t, 30*time.Second)
	plainLogin := func(user, pass string) string {
		rc := dialRaw(t, env.Bootstrap)
		if hs := rc.handshake(t, 1, "PLAIN"); hs.ErrorCode != 0 {
			t.Fatalf("handshake: %d", hs.ErrorCode)
		}
		ar := rc.authenticate(t, 1, []byte("\x00"+user+"\x00"+pass))
		if ar.ErrorCode == 0 {
			return ""
		}
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil {
			t.Fatalf("%s/%s: error %d", user, pass, ar.ErrorCode)
		}
		rc.expectClosed(t, "after a failed login")
		return *ar.ErrorMessage
	}
	const limited = "Authentication failed: too many failed logins from this address, try again later"
	for i := range 3 {
		if msg := plainLogin("alice", fmt.Sprint("guess-", i)); msg != "Authentication failed: Invalid username or password" {
			t.Fatalf("guess %d: %q", i, msg)
		}
	}
	for _, c := range []struct{ user, pass string }{{"alice", "alice-secret"}, {"mallory", "x"}, {"alice", "guess-4"}} {
		if msg := plainLogin(c.user, c.pass); msg != limited {
			t.Errorf("%s/%s after 3 failures: %q, want %q", c.user, c.pass, msg, limited)
		}
	}
	// SCRAM too: refused at its first step, before a salt is shown.
	rc := dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "SCRAM-SHA-256")
	if ar := rc.authenticate(t, 1, []byte("n,,n=alice,r=abc")); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || len(ar.SASLAuthBytes) != 0 {
		t.Errorf("SCRAM from the limited address: error %d, %q", ar.ErrorCode, ar.SASLAuthBytes)
	}
	if n := scrapeMetric(t, env, "tollgate_authentication_rate_limited_total"); n != 4 {
		t.Errorf("tollgate_authentication_rate_limited_total = %v, want 4", n)
	}
	if n := scrapeMetric(t, env, "tollgate_authentication_failures_total"); n != 7 {
		t.Errorf("tollgate_authentication_failures_total = %v, want 7", n)
	}
	if n := scrapeMetric(t, env, "tollgate_failed_login_addresses"); n != 1 {
		t.Errorf("tollgate_failed_login_addresses = %v, want 1", n)
	}
	// A real client from the limited address is told so.
	cl := franzClient(t, append(franzOpts(env.Bootstrap, nil, "PLAIN", "alice", "alice-secret"), kgo.RetryTimeout(time.Second))...)
	if err := cl.Ping(ctx); err == nil || !strings.Contains(err.Error(), "too many failed logins") {
		t.Errorf("franz-go from the limited address: %v", err)
	}
	kcatPath(t)
	out, stderr, _, err := kcatTry(ctx, 20*time.Second, "", "-b", env.Bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
		"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-L", "-m", "3")
	if err == nil || !strings.Contains(stderr, "too many failed logins") {
		t.Errorf("kcat from the limited address: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	// From another address alice is served.
	other := franzClient(t, append(franzOpts(env.Bootstrap, nil, "PLAIN", "alice", "alice-secret"),
		kgo.Dialer(fromIP("127.0.0.2")), kgo.DefaultProduceTopic("guessing"), kgo.AllowAutoTopicCreation())...)
	if err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("alice from 127.0.0.2: %v", err)
	}
	// Nothing granted from the limited address; audited (aggregated).
	if ls := logLines(env, "msg=authenticated", "remote=127.0.0.1:"); len(ls) > 0 {
		t.Errorf("a login from the limited address went through:\n%s", strings.Join(ls, "\n"))
	}
	_, events := auditLines(t, filepath.Join(dataDir, "audit.log"))
	if len(events) == 0 || events[0]["action"] != "authenticate" || events[0]["outcome"] != "denied" {
		t.Errorf("audit: %v", events)
	}
}

// Withdrawn through the API: a SCRAM user deleted with the Kafka API
// (kadm) and an API key revoked on the admin port lose the connections
// they logged in with, at once — not at their next login.
func attackWithdrawnThroughAPI(t *testing.T) {
	env, keys := startTerminate(t, map[string]string{"admin": "admin-secret"}, []string{"admin"}, func(c *app.Config) {
		c.Authorization.QuotaAdmins = []string{"admin"}
		c.Listeners[0].SASL.FailedAuthenticationDelay = time.Millisecond
	})
	ctx := ctxT(t, 30*time.Second)
	admin := kadm.NewClient(franzClient(t, franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "admin", "admin-secret")...))
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "dave-secret"}}); err != nil {
		t.Fatal(err)
	}
	// dave logs in by hand and stays connected.
	dave := dialRaw(t, env.Bootstrap)
	dave.handshake(t, 1, "SCRAM-SHA-512")
	conv := scramConversation(t, "SCRAM-SHA-512", "dave", "dave-secret")
	first, _ := conv.Step("")
	ar := dave.authenticate(t, 1, []byte(first))
	final, _ := conv.Step(string(ar.SASLAuthBytes))
	if ar := dave.authenticate(t, 1, []byte(final)); ar.ErrorCode != 0 {
		t.Fatalf("dave's login: error %d", ar.ErrorCode)
	}
	if _, err := dave.roundTrip(kmsg.NewPtrDescribeClientQuotasRequest()); err != nil {
		t.Fatalf("dave's connection before the deletion: %v", err)
	}
	if res, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "dave", Mechanism: kadm.ScramSha512}}, nil); err != nil || res.AllFailed() {
		t.Fatalf("delete dave: %v %v", err, res)
	}
	dave.expectClosed(t, "dave's connection after his credential was deleted")

	// An API key made on the admin port, used, then revoked there.
	port := newAdminPort(t, env, nil)
	code, body := port.call(t, "POST", "/api/v1/apikeys", `{"identity": "erin"}`, bearer(keys[0])...)
	if code != 201 {
		t.Fatalf("create a key: %d %s", code, body)
	}
	var made struct{ ID, Key string }
	if err := json.Unmarshal([]byte(body), &made); err != nil || made.Key == "" {
		t.Fatalf("the created key: %v %s", err, body)
	}
	erin := dialRaw(t, env.Bootstrap)
	erin.handshake(t, 1, "PLAIN")
	if ar := erin.authenticate(t, 1, []byte("\x00token\x00"+made.Key)); ar.ErrorCode != 0 {
		t.Fatalf("login with the key: error %d", ar.ErrorCode)
	}
	if _, err := erin.roundTrip(kmsg.NewPtrDescribeClientQuotasRequest()); err != nil {
		t.Fatalf("the key's connection before the revocation: %v", err)
	}
	if code, body := port.call(t, "DELETE", "/api/v1/apikeys/"+made.ID, "", bearer(keys[0])...); code != 200 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	erin.expectClosed(t, "the connection of a revoked API key")
	if n := strings.Count(env.Logs.String(), "reason=credential_revoked"); n != 2 {
		t.Errorf("%d connections closed as credential_revoked, want 2", n)
	}
}
