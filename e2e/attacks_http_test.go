package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// adminPort is one gateway's admin port as a client reaches it.
type adminPort struct {
	env  *testkit.Env
	base string // http://host:port or https://host:port
	cl   *http.Client
}

func newAdminPort(t *testing.T, env *testkit.Env, tc *tls.Config) *adminPort {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &adminPort{env: env, base: env.App.HTTPURL(), cl: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

// call sends one request; hdr are header name/value pairs ("Host" sets
// the Host header). It returns the status (-1: no HTTP answer) and body.
func (p *adminPort) call(t *testing.T, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Add(hdr[i], hdr[i+1])
		}
	}
	resp, err := p.cl.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// TestAttacksAdminHTTP: what an attacker who reaches the admin port sends,
// and what they get — nothing granted. Three gateways: production-shaped
// (plain HTTP on loopback for the test, quota admin ops-admin, the
// tenant holding a key of its own, /metrics closed), the development
// default (ANONYMOUS is a quota admin: what DNS rebinding and other
// origins' pages go for), and production over HTTPS with client
// certificates.
func TestAttacksAdminHTTP(t *testing.T) {
	credFile, keys := writeCredentials(t, nil, "ops-admin", "tenant-a")
	opsKey, tenantKey := keys[0], keys[1]
	prodData := t.TempDir()
	prodEnv := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.DataDir = prodData
		c.CredentialsFile = credFile
		c.Authorization.QuotaAdmins = []string{"ops-admin"}
		c.HTTP.OpenEndpoints = []string{"/healthz", "/readyz"}
		c.HTTP.ReadHeaderTimeout = 300 * time.Millisecond
		c.Audit.AggregateInterval = 200 * time.Millisecond
	})
	prod := newAdminPort(t, prodEnv, nil)
	devEnv := testkit.Start(t, app.Options{}, func(c *app.Config) {
		d := app.Default()
		c.Authorization = d.Authorization
	})
	dev := newAdminPort(t, devEnv, nil)
	pki := testpki.NewCA(t, "Tollgate Admin CA")
	server := pki.Server(t, "tollgate-admin", "127.0.0.1", "localhost")
	opsCert := pki.Client(t, pkix.Name{CommonName: "ops-admin", Organization: []string{"Ops"}})
	tenantCert := pki.Client(t, pkix.Name{CommonName: "tenant-a", Organization: []string{"Tenants"}})
	forged := testpki.NewCA(t, "Mallory CA").Client(t, pkix.Name{CommonName: "ops-admin", Organization: []string{"Ops"}})
	tlsEnv := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.CredentialsFile = credFile
		c.Authorization.QuotaAdmins = []string{"ops-admin"}
		c.HTTP.TLS = &auth.TLSConfig{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: pki.CertFile, ClientAuth: "requested"}
		c.HTTP.SSLPrincipalMappingRules = `RULE:^CN=([^,]+),O=(Ops|Tenants)$/$1/`
	})
	viaTLS := func(certs ...tls.Certificate) *adminPort { return newAdminPort(t, tlsEnv, pki.ClientConfig(certs...)) }

	// A key the admin made for tenant-b, then revoked.
	code, body := prod.call(t, "POST", "/api/v1/apikeys", `{"identity": "tenant-b"}`, bearer(opsKey)...)
	var made struct{ ID, Key string }
	if json.Unmarshal([]byte(body), &made); code != 201 || made.Key == "" {
		t.Fatalf("admin creates a key: %d %s", code, body)
	}
	if code, body := prod.call(t, "DELETE", "/api/v1/apikeys/"+made.ID, "", bearer(opsKey)...); code != 200 {
		t.Fatalf("admin revokes it: %d %s", code, body)
	}
	revokedKey := made.Key
	forgedKey, _, _ := auth.NewAPIKey("ops-admin") // well-formed, never stored
	adminKeyID, _ := auth.ParseAPIKey(opsKey)
	_, port, _ := net.SplitHostPort(devEnv.App.HTTPAddr())

	type attack struct {
		name   string // who attacks, and how
		port   *adminPort
		do     func(t *testing.T, p *adminPort) (int, string)
		want   int    // status (-1: no HTTP answer at all)
		wantIn string // in the answer
		failed bool   // a failed login on prod (counted and audited)
	}
	req := func(method, path, body string, hdr ...string) func(*testing.T, *adminPort) (int, string) {
		return func(t *testing.T, p *adminPort) (int, string) { return p.call(t, method, path, body, hdr...) }
	}
	create := func(identity string) string { return fmt.Sprintf(`{"identity": %q}`, identity) }
	attacks := []attack{
		// Minting credentials.
		{"anonymous caller mints a key for the quota admin", prod, req("POST", "/api/v1/apikeys", create("ops-admin")), 401, "authentication required", false},
		{"tenant mints a key for the quota admin with its own key", prod, req("POST", "/api/v1/apikeys", create("ops-admin"), bearer(tenantKey)...), 403, "User:tenant-a may not create API keys", false},
		{"tenant mints a key for itself", prod, req("POST", "/api/v1/apikeys", create("tenant-a"), bearer(tenantKey)...), 403, "may not create API keys", false},
		{"tenant revokes the admin's key", prod, req("DELETE", "/api/v1/apikeys/"+adminKeyID, "", bearer(tenantKey)...), 403, "may not revoke API keys", false},
		{"anonymous caller revokes the admin's key", prod, req("DELETE", "/api/v1/apikeys/"+adminKeyID, ""), 401, "authentication required", false},
		// Reading what is not theirs.
		{"anonymous caller reads the audit log", prod, req("GET", "/api/v1/audit", ""), 401, "authentication required", false},
		{"anonymous caller reads the connection list", prod, req("GET", "/api/v1/connections", ""), 401, "authentication required", false},
		{"anonymous caller reads the quota buckets", prod, req("GET", "/api/v1/buckets", ""), 401, "authentication required", false},
		{"anonymous caller lists the keys", prod, req("GET", "/api/v1/apikeys", ""), 401, "authentication required", false},
		{"anonymous caller scrapes /metrics (closed)", prod, req("GET", "/metrics", ""), 401, "authentication required", false},
		// Credentials that are not theirs or not valid.
		{"forged key of the admin's identity", prod, req("POST", "/api/v1/apikeys", create("mallory"), bearer(forgedKey)...), 401, "unknown, revoked or malformed", true},
		{"revoked key", prod, req("GET", "/api/v1/audit", "", bearer(revokedKey)...), 401, "unknown, revoked or malformed", true},
		{"the admin's key id with a guessed secret", prod, req("GET", "/api/v1/audit", "", bearer("tg_"+adminKeyID+"_"+strings.Repeat("a", 52))...), 401, "unknown, revoked or malformed", true},
		{"a bad key on an open endpoint", prod, req("GET", "/healthz", "", bearer(forgedKey)...), 401, "unknown, revoked or malformed", true},
		{"password guess by Basic auth", prod, req("GET", "/api/v1/audit", "", "Authorization", "Basic b3BzLWFkbWluOmFkbWlu"), 401, "must be", true},
		{"two Authorization headers, one the tenant's", prod, req("POST", "/api/v1/apikeys", create("mallory"), "Authorization", "Bearer "+tenantKey, "Authorization", "Bearer "+forgedKey), 401, "more than one Authorization header", true},
		{"key in the query string", prod, req("GET", "/api/v1/audit?api_key="+opsKey, ""), 401, "authentication required", false},
		// Browsers: DNS rebinding and other origins, against the
		// development default where ANONYMOUS is a quota admin.
		{"DNS-rebinding page mints a key", dev, req("POST", "/api/v1/apikeys", create("mallory"), "Host", "evil.example:"+port), 421, `Host \"evil.example:` + port + `\" is not a name of this admin port`, false},
		{"DNS-rebinding page reads the audit log", dev, req("GET", "/api/v1/audit", "", "Host", "evil.example"), 421, "is not a name of this admin port", false},
		{"DNS-rebinding page under a localhost-looking name", dev, req("GET", "/api/v1/audit", "", "Host", "localhost.evil.example"), 421, "is not a name of this admin port", false},
		{"DNS-rebinding page scrapes /metrics", dev, req("GET", "/metrics", "", "Host", "evil.example"), 421, "is not a name of this admin port", false},
		{"another origin's page posts a key request", dev, req("POST", "/api/v1/apikeys", create("mallory"), "Origin", "http://evil.example"), 403, "cross-origin request refused", false},
		{"another origin's form post (no preflight)", dev, func(t *testing.T, p *adminPort) (int, string) {
			r, _ := http.NewRequest("POST", p.base+"/api/v1/apikeys", strings.NewReader("identity=mallory"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", "http://evil.example")
			return doReq(t, p, r)
		}, 403, "cross-origin request refused", false},
		{"same-origin text/plain post (a CORS simple request)", dev, func(t *testing.T, p *adminPort) (int, string) {
			r, _ := http.NewRequest("POST", p.base+"/api/v1/apikeys", strings.NewReader(create("mallory")))
			r.Header.Set("Content-Type", "text/plain")
			return doReq(t, p, r)
		}, 415, "application/json", false},
		{"CORS preflight for a DELETE", dev, func(t *testing.T, p *adminPort) (int, string) {
			r, _ := http.NewRequest("OPTIONS", p.base+"/api/v1/apikeys/"+adminKeyID, nil)
			r.Header.Set("Origin", "http://evil.example")
			r.Header.Set("Access-Control-Request-Method", "DELETE")
			resp, err := p.cl.Do(r)
			if err != nil {
				return -1, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode, "Access-Control-Allow-Origin=" + resp.Header.Get("Access-Control-Allow-Origin")
		}, 405, "Access-Control-Allow-Origin=", false},
		// Exhausting the port.
		{"slow-header client (slowloris)", prod, func(t *testing.T, p *adminPort) (int, string) {
			c, err := net.Dial("tcp", p.env.App.HTTPAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "GET /api/v1/audit HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
			// read_header_timeout is 300ms; 20s bounds the test, it is
			// not what is checked.
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return -2, "still open after 20s"
			}
			if len(got) == 0 {
				return -1, "closed without an answer"
			}
			return -1, "closed after " + strings.SplitN(string(got), "\r\n", 2)[0]
		}, -1, "closed", false},
		{"64 KiB of headers", prod, req("GET", "/healthz", "", "X-Big", strings.Repeat("a", 70<<10)), 431, "", false},
		// Client certificates.
		{"certificate from another CA claiming ops-admin", func() *adminPort {
			tc := pki.ClientConfig()
			// Sent whatever CAs the server names (Go's client would
			// otherwise leave it out).
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &forged.TLS, nil }
			return newAdminPort(t, tlsEnv, tc)
		}(), req("GET", "/api/v1/apikeys", ""), -1, "certificate", false},
		{"tenant's certificate mints a key", viaTLS(tenantCert.TLS), req("POST", "/api/v1/apikeys", create("ops-admin")), 403, "User:tenant-a may not create API keys", false},
		{"no certificate, no key, over HTTPS", viaTLS(), req("GET", "/api/v1/audit", ""), 401, "authentication required", false},
		{"plain HTTP to the HTTPS port", &adminPort{env: tlsEnv, base: "http://" + tlsEnv.App.HTTPAddr(), cl: prod.cl}, req("GET", "/api/v1/audit", ""), 400, "HTTPS", false},
	}
	wantFailed := 0
	for _, a := range attacks {
		code, body := a.do(t, a.port)
		if code != a.want || !strings.Contains(body, a.wantIn) {
			t.Errorf("%s: got %d %q; want %d with %q", a.name, code, truncateBody(body), a.want, a.wantIn)
		}
		if a.failed {
			wantFailed++
		}
	}

	// What the legitimate holders still have, and that nothing was granted.
	if code, body := viaTLS(opsCert.TLS).call(t, "POST", "/api/v1/apikeys", create("by-cert")); code != 201 {
		t.Errorf("ops-admin's certificate: %d %s", code, body)
	}
	if code, body := prod.call(t, "GET", "/api/v1/audit", "", bearer(tenantKey)...); code != 200 || !strings.Contains(body, `"events"`) {
		t.Errorf("the tenant reads with its key: %d %s", code, truncateBody(body))
	}
	for _, p := range []*adminPort{prod, dev} {
		code, body := p.call(t, "GET", "/api/v1/apikeys", "", bearer(opsKey)...)
		if p == dev {
			code, body = p.call(t, "GET", "/api/v1/apikeys", "")
		}
		if code != 200 {
			t.Fatalf("list keys: %d %s", code, body)
		}
		for _, granted := range []string{`"identity": "ops-admin"`, `"identity": "mallory"`, `"identity": "tenant-a"`} {
			if strings.Contains(body, granted) {
				t.Errorf("an attack was granted a key: %s", body)
			}
		}
	}
	if n := metricWithKey(t, prod, opsKey, "tollgate_authentication_failures_total"); n != float64(wantFailed) {
		t.Errorf("%v failed logins counted, want %d", n, wantFailed)
	}
	// Denials are aggregated per principal and source (audit.aggregate_interval):
	// an event stands for one denial, or aggregate.count of them.
	var denied, authFailed int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, events := auditLines(t, filepath.Join(prodData, "audit.log"))
		denied, authFailed = 0, 0
		for _, e := range events {
			init, _ := e["initiator"].(map[string]any)
			n := max(int(aggregateCount(e)), 1)
			switch {
			case e["outcome"] == "denied" && init["principal"] == "User:tenant-a" && init["listener"] == "admin-http":
				denied += n
			case e["action"] == "authenticate" && e["outcome"] == "denied" && init["listener"] == "admin-http":
				authFailed += n
			}
			if raw, _ := json.Marshal(e); strings.Contains(string(raw), forgedKey) || strings.Contains(string(raw), revokedKey) {
				t.Errorf("a presented key is in the audit log: %s", raw)
			}
		}
		if denied >= 3 && authFailed >= wantFailed || time.Now().After(deadline) {
			break
		}
	}
	if denied != 3 || authFailed != wantFailed {
		t.Errorf("audit log: %d denied changes by tenant-a (want 3), %d failed logins (want %d)", denied, authFailed, wantFailed)
	}
}

func doReq(t *testing.T, p *adminPort, r *http.Request) (int, string) {
	t.Helper()
	resp, err := p.cl.Do(r)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricWithKey reads one unlabelled sample from /metrics with a key.
func metricWithKey(t *testing.T, p *adminPort, key, name string) float64 {
	t.Helper()
	code, body := p.call(t, "GET", "/metrics", "", bearer(key)...)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func truncateBody(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
