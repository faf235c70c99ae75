package httpapi

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
)

// failures counts failed logins as the metrics hook sees them.
type failures struct {
	mu  sync.Mutex
	got []string // mechanism of each
}

func (f *failures) hook(_ netip.AddrPort, mech string, _ error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, mech)
}

func (f *failures) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// portFixture is the admin port on a real socket, with production-shaped
// access: User:admin is the quota admin, everyone else who authenticates
// may read, ANONYMOUS may do nothing.
type portFixture struct {
	srv            *httptest.Server
	creds          *control.Credentials
	fails          *failures
	admin, reader  string // API keys of User:admin and User:alice
	revoked, wrong string // a revoked key of admin; a well-formed unknown key
	revokedID      string
}

func sourcesFor(t *testing.T, creds *control.Credentials, fails *failures) Sources {
	t.Helper()
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := admission.New(admission.DefaultSettings(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return Sources{
		Engine: eng, Admission: lim, Ready: func() bool { return true },
		Registry: prometheus.NewRegistry(),
		Audit: func(n int) []any {
			var out []any
			for _, e := range creds.Audit.Recent(n) {
				out = append(out, e)
			}
			return out
		},
		APIKeys: creds,
		Access:  Access{Keys: creds, Authz: creds.Authz, Audit: creds.Audit, AuthFailed: fails.hook},
	}
}

func newPort(t *testing.T, edit ...func(*Sources)) *portFixture {
	t.Helper()
	f := &portFixture{creds: newCredentials(t), fails: &failures{}}
	f.admin = adminKey(t, f.creds, "admin")
	f.reader = adminKey(t, f.creds, "alice")
	f.revoked = adminKey(t, f.creds, "admin")
	f.revokedID, _ = auth.ParseAPIKey(f.revoked)
	if err := f.creds.RevokeAPIKey(context.Background(), control.Initiator{Principal: adminPrincipal}, f.revokedID); err != nil {
		t.Fatal(err)
	}
	f.wrong, _, _ = auth.NewAPIKey("admin") // never stored
	s := sourcesFor(t, f.creds, f.fails)
	stopped := time.Unix(1_700_000_000, 0)
	s.Now = func() time.Time { return stopped }
	for _, e := range edit {
		e(&s)
	}
	f.srv = httptest.NewServer(Handler(s))
	t.Cleanup(f.srv.Close)
	return f
}

// send makes one request over the socket; key is sent as a Bearer token,
// host (when set) as the Host header.
func send(t *testing.T, cl *http.Client, base, method, path, key, host, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Every endpoint, as each kind of caller: what they get.
func TestAccessMatrix(t *testing.T) {
	f := newPort(t)
	anon, admin, reader, wrong, revoked, malformed := "", f.admin, f.reader, f.wrong, f.revoked, "not-a-key"
	victim := adminKey(t, f.creds, "victim")
	victimID, _ := auth.ParseAPIKey(victim)
	create := `{"identity": "mallory"}`
	type row struct {
		name, method, path, key, body string
		code                          int
		challenge                     bool // WWW-Authenticate: Bearer expected
	}
	// Changes: quota admins only.
	rows := []row{
		{"anonymous create", "POST", "/api/v1/apikeys", anon, create, 401, true},
		{"reader create", "POST", "/api/v1/apikeys", reader, create, 403, false},
		{"anonymous revoke", "DELETE", "/api/v1/apikeys/" + victimID, anon, "", 401, true},
		{"reader revoke", "DELETE", "/api/v1/apikeys/" + victimID, reader, "", 403, false},
		{"admin create", "POST", "/api/v1/apikeys", admin, `{"identity": "svc"}`, 201, false},
		{"admin revoke", "DELETE", "/api/v1/apikeys/" + f.revokedID, admin, "", 200, false},
	}
	// Open endpoints and the dashboard's files: anyone.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/", "/app.js"} {
		rows = append(rows, row{"anonymous GET " + p, "GET", p, anon, "", 200, false})
	}
	// Reads: authenticated principals; ANONYMOUS is asked to authenticate.
	for _, p := range []string{"/api/v1/buckets", "/api/v1/resolve?user=a", "/api/v1/connections", "/api/v1/audit", "/api/v1/apikeys"} {
		rows = append(rows,
			row{"anonymous GET " + p, "GET", p, anon, "", 401, true},
			row{"reader GET " + p, "GET", p, reader, "", 200, false},
			row{"admin GET " + p, "GET", p, admin, "", 200, false})
	}
	// Credentials that do not verify are refused everywhere, open
	// endpoints and static files included: never downgraded to ANONYMOUS.
	for _, p := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""}, {"GET", "/readyz", ""}, {"GET", "/metrics", ""}, {"GET", "/", ""},
		{"GET", "/api/v1/buckets", ""}, {"GET", "/api/v1/resolve?user=a", ""}, {"GET", "/api/v1/connections", ""},
		{"GET", "/api/v1/audit", ""}, {"GET", "/api/v1/apikeys", ""},
		{"POST", "/api/v1/apikeys", create}, {"DELETE", "/api/v1/apikeys/" + victimID, ""},
	} {
		for _, k := range []struct{ name, key string }{{"wrong key", wrong}, {"revoked key", revoked}, {"malformed key", malformed}} {
			rows = append(rows, row{k.name + " " + p.method + " " + p.path, p.method, p.path, k.key, p.body, 401, true})
		}
	}
	cl := f.srv.Client()
	wantFailures := 0
	for _, r := range rows {
		code, hdr, body := send(t, cl, f.srv.URL, r.method, r.path, r.key, "", r.body)
		if code != r.code {
			t.Errorf("%s: %d, want %d: %s", r.name, code, r.code, body)
		}
		if got := strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer "); got != r.challenge {
			t.Errorf("%s: WWW-Authenticate %q", r.name, hdr.Get("WWW-Authenticate"))
		}
		if code >= 400 && !strings.Contains(body, `"error"`) {
			t.Errorf("%s: no JSON error: %s", r.name, body)
		}
		if r.key != "" && r.key != admin && r.key != reader {
			wantFailures++
		}
	}
	// Nothing granted: mallory has no key, the victim's still works.
	keys, _ := f.creds.ListAPIKeys()
	for _, k := range keys {
		if k.Identity == "mallory" {
			t.Errorf("a denied request created a key: %+v", k)
		}
	}
	if p, ok := f.creds.Lookup().Plain(auth.APIKeyUser, victim); !ok || p.Name != "victim" {
		t.Error("a denied revoke revoked the victim's key")
	}
	if f.fails.n() != wantFailures {
		t.Errorf("%d failed logins counted, want %d", f.fails.n(), wantFailures)
	}
	// Audited as the Kafka API's: denied changes with the principal, failed
	// logins with the mechanism.
	var deniedReader, deniedAnon, failed int
	for _, e := range f.creds.Audit.Recent(0) {
		switch {
		case e.Outcome == audit.Denied && e.Initiator.Principal == "User:alice" && e.Initiator.Listener == ListenerName:
			deniedReader++
		case e.Outcome == audit.Denied && e.Initiator.Principal == "User:ANONYMOUS":
			deniedAnon++
		case e.Action == audit.ActionAuthenticate && e.Outcome == audit.Denied && e.Initiator.Principal == "" &&
			strings.HasPrefix(e.Initiator.Source, "127.0.0.1:") && len(e.Changes) == 1 && e.Changes[0].Key == "mechanism":
			failed++
		}
	}
	if deniedReader != 2 || deniedAnon != 2 {
		t.Errorf("denied changes audited: %d by the reader, %d by ANONYMOUS; want 2 and 2", deniedReader, deniedAnon)
	}
	if failed != wantFailures {
		t.Errorf("%d failed logins audited, want %d (this fixture's audit log aggregates nothing)", failed, wantFailures)
	}
	for _, e := range f.creds.Audit.Recent(0) {
		if b, _ := json.Marshal(e); strings.Contains(string(b), wrong) || strings.Contains(string(b), revoked) {
			t.Fatalf("an audit event holds a presented key: %s", b)
		}
	}
}

// The Authorization header must be one Bearer token.
func TestAuthorizationHeader(t *testing.T) {
	f := newPort(t)
	cl := f.srv.Client()
	for _, tc := range []struct {
		name string
		hdr  []string
		code int
		want string
	}{
		{"basic", []string{"Authorization", "Basic YWRtaW46YWRtaW4="}, 401, "must be"},
		{"bare key", []string{"Authorization", f.admin}, 401, "must be"},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401, "must be"},
		{"two headers", []string{"Authorization", "Bearer " + f.admin, "Authorization", "Bearer " + f.reader}, 401, "more than one Authorization header"},
		{"lower-case scheme", []string{"Authorization", "bearer " + f.admin}, 200, ""},
		{"extra spaces", []string{"Authorization", "Bearer   " + f.admin}, 200, ""},
		{"key with trailing junk", []string{"Authorization", "Bearer " + f.admin + "x"}, 401, "unknown, revoked or malformed"},
	} {
		code, _, body := send(t, cl, f.srv.URL, "GET", "/api/v1/apikeys", "", "", "", tc.hdr...)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}
}

// DNS rebinding: a page from evil.example whose name now resolves to the
// gateway sends Host: evil.example. Refused before authentication, with
// the admin's key too (a rebinding page cannot have it, but nothing of the
// request is looked at).
func TestHostCheck(t *testing.T) {
	f := newPort(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(f.srv.URL, "http://"))
	cl := f.srv.Client()
	for _, tc := range []struct {
		host string
		code int
	}{
		{"evil.example", 421},
		{"evil.example:" + port, 421},
		{"localhost.evil.example", 421},
		{"evil.localhost", 421},
		{"127.0.0.1.evil.example", 421},
		{"2130706433", 421}, // 127.0.0.1 as a number: a name, not a literal
		{"localhost", 200},
		{"localhost:" + port, 200},
		{"LocalHost.:" + port, 200},
		{"127.0.0.1:" + port, 200},
		{"10.1.2.3", 200},
		{"[::1]:" + port, 200},
		{"[::1]", 200},
	} {
		code, _, body := send(t, cl, f.srv.URL, "POST", "/api/v1/apikeys", f.admin, tc.host, `{"identity": "h"}`)
		want := tc.code
		if want == 200 {
			want = 201
		}
		if code != want {
			t.Errorf("Host %q: %d, want %d: %s", tc.host, code, want, body)
		}
		if want == 421 && (!strings.Contains(body, "is not a name of this admin port") || hdrNosniff(t, cl, f.srv.URL, tc.host) != "nosniff") {
			t.Errorf("Host %q: %s", tc.host, body)
		}
	}
	// HTTP/1.0 without a Host header.
	c, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 421 {
		t.Fatalf("no Host: %v %v", resp, err)
	}
	// Listed names; [] leaves IP literals only.
	for _, tc := range []struct {
		allowed []string
		host    string
		code    int
	}{
		{[]string{"tollgate-admin.example.com"}, "tollgate-admin.example.com:9644", 200},
		{[]string{"tollgate-admin.example.com"}, "localhost", 421},
		{[]string{}, "localhost", 421},
		{[]string{}, "127.0.0.1", 200},
	} {
		h := Handler(Sources{Access: Access{AllowedHosts: tc.allowed}})
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("allowed %q, Host %q: %d, want %d", tc.allowed, tc.host, rec.Code, tc.code)
		}
	}
	if keys, _ := f.creds.ListAPIKeys(); countIdentity(keys, "h") != 7 {
		t.Errorf("%d keys created, want one per accepted Host (7)", countIdentity(keys, "h"))
	}
}

func countIdentity(keys []auth.APIKey, id string) int {
	n := 0
	for _, k := range keys {
		if k.Identity == id {
			n++
		}
	}
	return n
}

// /metrics, /healthz and /readyz are open by default and closable.
func TestOpenEndpoints(t *testing.T) {
	for _, tc := range []struct {
		open []string
		want map[string]int // anonymous
	}{
		{nil, map[string]int{"/metrics": 200, "/healthz": 200, "/readyz": 200}},
		{[]string{}, map[string]int{"/metrics": 401, "/healthz": 401, "/readyz": 401}},
		{[]string{"/healthz", "/readyz"}, map[string]int{"/metrics": 401, "/healthz": 200, "/readyz": 200}},
	} {
		f := newPort(t, func(s *Sources) { s.Access.OpenEndpoints = tc.open })
		for path, code := range tc.want {
			if got, _, body := send(t, f.srv.Client(), f.srv.URL, "GET", path, "", "", ""); got != code {
				t.Errorf("open %q: anonymous GET %s: %d, want %d: %s", tc.open, path, got, code, body)
			}
			if got, _, body := send(t, f.srv.Client(), f.srv.URL, "GET", path, f.reader, "", ""); got != 200 {
				t.Errorf("open %q: reader GET %s: %d: %s", tc.open, path, got, body)
			}
		}
	}
}

// The built-in development default: ANONYMOUS is a quota admin and may
// read, so everything works without a key.
func TestDevelopmentDefault(t *testing.T) {
	creds := newCredentials(t)
	creds.Authz = control.Admins{Principals: []string{"ANONYMOUS"}, AllowAnonymousDescribe: true}
	srv := httptest.NewServer(Handler(sourcesFor(t, creds, &failures{})))
	defer srv.Close()
	cl := srv.Client()
	code, _, body := send(t, cl, srv.URL, "POST", "/api/v1/apikeys", "", "", `{"identity": "dev"}`)
	if code != 201 {
		t.Fatalf("create without a key: %d %s", code, body)
	}
	for _, p := range []string{"/api/v1/buckets", "/api/v1/audit", "/api/v1/connections", "/api/v1/apikeys"} {
		if code, _, body := send(t, cl, srv.URL, "GET", p, "", "", ""); code != 200 {
			t.Errorf("GET %s without a key: %d %s", p, code, body)
		}
	}
	// Even so, another origin's page may not change anything.
	code, _, body = send(t, cl, srv.URL, "POST", "/api/v1/apikeys", "", "", `{"identity": "x"}`, "Origin", "http://evil.example")
	if code != 403 || !strings.Contains(body, "cross-origin") {
		t.Errorf("cross-origin create: %d %s", code, body)
	}
	code, _, body = send(t, cl, srv.URL, "POST", "/api/v1/apikeys", "", "", `{"identity": "y"}`, "Origin", srv.URL)
	if code != 201 {
		t.Errorf("same-origin create: %d %s", code, body)
	}
}

// A flood of bad keys from one address is two audit events with an
// aggregating audit log (the one the gateway runs): the first failed
// login as it comes, the rest counted into one event. Every one is
// counted in the metric and refused all the same.
func TestFailedLoginsAggregated(t *testing.T) {
	f := newPort(t)
	f.creds.Audit = audit.NewLogger(audit.Config{AggregateInterval: time.Hour})
	t.Cleanup(func() { f.creds.Audit.Close() })
	s := sourcesFor(t, f.creds, f.fails)
	s.Access.Audit = f.creds.Audit
	srv := httptest.NewServer(Handler(s))
	defer srv.Close()
	const flood = 50
	for range flood {
		if code, _, _ := send(t, srv.Client(), srv.URL, "GET", "/healthz", f.wrong, "", ""); code != 401 {
			t.Fatalf("bad key: %d", code)
		}
	}
	// ANONYMOUS attempts at changes: denied, aggregated the same way.
	for range flood {
		if code, _, _ := send(t, srv.Client(), srv.URL, "POST", "/api/v1/apikeys", "", "", `{"identity": "mallory"}`); code != 401 {
			t.Fatalf("anonymous create: %d", code)
		}
	}
	if f.fails.n() != flood {
		t.Fatalf("%d failed logins counted, want all %d", f.fails.n(), flood)
	}
	if evs := f.creds.Audit.Recent(0); len(evs) != 2 {
		t.Fatalf("%d audit events for %d failed logins and %d denied creates, want 2", len(evs), flood, flood)
	}
	f.creds.Audit.Flush()
	evs := f.creds.Audit.Recent(0)
	if len(evs) != 4 {
		t.Fatalf("after Flush: %d events", len(evs))
	}
	counts := map[string]uint64{}
	for _, e := range evs[2:] {
		if e.Aggregate == nil || e.Initiator.Source != "127.0.0.1" || e.Initiator.Listener != ListenerName {
			t.Fatalf("summary: %+v", e)
		}
		counts[e.Action] = e.Aggregate.Count
	}
	if counts[audit.ActionAuthenticate] != flood-1 || counts[audit.ActionAPIKeyCreate] != flood-1 {
		t.Fatalf("summaries: %v", counts)
	}
}

// testCA signs client certificates for the mTLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) client(t *testing.T, subject pkix.Name) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A verified client certificate authenticates as its mapped subject; a
// Bearer key wins over it; a certificate no rule maps is a failed login.
func TestClientCertificate(t *testing.T) {
	creds := newCredentials(t)
	admin := adminKey(t, creds, "admin")
	fails := &failures{}
	s := sourcesFor(t, creds, fails)
	m, err := auth.ParseMappingRules(`RULE:^CN=([a-z]+),O=Ops$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	s.Access.Certificates = m
	ca := newTestCA(t)
	srv := httptest.NewUnstartedServer(Handler(s))
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.pool}
	srv.StartTLS()
	defer srv.Close()
	clientWith := func(certs ...tls.Certificate) *http.Client {
		c := srv.Client()
		tr := c.Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = certs
		return &http.Client{Transport: tr}
	}
	adminCert := ca.client(t, pkix.Name{CommonName: "admin", Organization: []string{"Ops"}})
	aliceCert := ca.client(t, pkix.Name{CommonName: "alice", Organization: []string{"Ops"}})
	unmapped := ca.client(t, pkix.Name{CommonName: "bob", Organization: []string{"Elsewhere"}})
	stranger := newTestCA(t).client(t, pkix.Name{CommonName: "admin", Organization: []string{"Ops"}})

	if code, _, body := send(t, clientWith(adminCert), srv.URL, "POST", "/api/v1/apikeys", "", "", `{"identity": "by-cert"}`); code != 201 {
		t.Errorf("admin certificate: %d %s", code, body)
	}
	if code, _, body := send(t, clientWith(aliceCert), srv.URL, "POST", "/api/v1/apikeys", "", "", `{"identity": "x"}`); code != 403 || !strings.Contains(body, "User:alice may not") {
		t.Errorf("alice's certificate creating: %d %s", code, body)
	}
	if code, _, body := send(t, clientWith(aliceCert), srv.URL, "GET", "/api/v1/audit", "", "", ""); code != 200 {
		t.Errorf("alice's certificate reading: %d %s", code, body)
	}
	if code, _, body := send(t, clientWith(aliceCert), srv.URL, "POST", "/api/v1/apikeys", admin, "", `{"identity": "by-key"}`); code != 201 {
		t.Errorf("alice's certificate with the admin's key: %d %s", code, body)
	}
	if code, _, body := send(t, clientWith(unmapped), srv.URL, "GET", "/healthz", "", "", ""); code != 401 || !strings.Contains(body, "maps to no principal") {
		t.Errorf("unmapped certificate: %d %s", code, body)
	}
	if code, _, _ := send(t, clientWith(), srv.URL, "GET", "/api/v1/audit", "", "", ""); code != 401 {
		t.Errorf("no certificate: %d, want 401 (ANONYMOUS)", code)
	}
	if _, err := clientWith(stranger).Get(srv.URL + "/healthz"); err == nil {
		t.Error("a certificate from another CA was accepted")
	}
	if fails.n() != 1 || fails.got[0] != MechanismCertificate {
		t.Errorf("failed logins counted: %v", fails.got)
	}
	keys, _ := creds.ListAPIKeys()
	if countIdentity(keys, "by-cert") != 1 || countIdentity(keys, "by-key") != 1 || countIdentity(keys, "x") != 0 {
		t.Errorf("keys: %+v", keys)
	}
}

func hdrNosniff(t *testing.T, cl *http.Client, base, host string) string {
	t.Helper()
	_, hdr, _ := send(t, cl, base, "GET", "/healthz", "", host, "")
	return hdr.Get("X-Content-Type-Options")
}
