package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
)

// Every input the admin port parses is fuzzed here: the Host header, the
// Authorization header, the create body, and whole requests (method, path,
// query, headers, body) through the real handler. Run one with e.g.:
// go test ./internal/httpapi/ -run '^$' -fuzz FuzzRequest

// ipLiteral reports whether host (as a Host header) names an IP address,
// independently of HostAllowed's parsing: [literal] with an optional
// ":port", or an IPv4 address with an optional ":port", or a bare IPv6
// address.
func ipLiteral(host string) bool {
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 || strings.Contains(host[1:end], "[") {
			return false
		}
		if rest := host[end+1:]; rest != "" && (rest[0] != ':' || strings.ContainsAny(rest[1:], ":[]")) {
			return false
		}
		_, err := netip.ParseAddr(host[1:end])
		return err == nil
	}
	if strings.ContainsAny(host, "[]") {
		return false
	}
	if strings.Count(host, ":") == 1 {
		host = host[:strings.IndexByte(host, ':')]
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

func FuzzHostAllowed(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "127.0.0.1:9644", "[::1]:9644", "[::1]", "::1", "localhost", "localhost:9644", "LOCALHOST.",
		"evil.example", "evil.example:9644", "localhost.evil.example", "evil.localhost", "[fe80::1%eth0]:1",
		"", ":", "[]", "[:]:1", "127.0.0.1:", "0x7f.0.0.1", "2130706433", "localhost:abc", "[localhost]:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if HostAllowed(host, nil) && !ipLiteral(host) {
			t.Fatalf("Host %q accepted with no names allowed", host)
		}
		if HostAllowed(host, DefaultAllowedHosts) && !ipLiteral(host) {
			name := host
			if i := strings.LastIndexByte(name, ':'); i >= 0 {
				name = name[:i]
			}
			if !strings.EqualFold(strings.TrimSuffix(name, "."), "localhost") {
				t.Fatalf("Host %q accepted as localhost", host)
			}
		}
		if ipLiteral(host) && !HostAllowed(host, nil) {
			t.Fatalf("IP literal %q refused", host)
		}
	})
}

func FuzzBearerToken(f *testing.F) {
	key, _, _ := auth.NewAPIKey("x")
	for _, s := range []string{
		"Bearer " + key, "bearer " + key, "BEARER   " + key, "Bearer", "Bearer ", "Bearer  ", "Basic YWxhZGRpbjpvcGVu",
		"Bearer a b", "Bearer ===", "Bearer abc==", "Bearer a=b", "Bearer\t" + key, "Bearer " + key + "\x00", key, "",
	} {
		f.Add(s)
	}
	keys := auth.NewMemoryStore()
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := BearerToken(h)
		if !ok {
			return
		}
		scheme, _, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || !strings.HasSuffix(h, tok) || tok == "" ||
			strings.ContainsAny(tok, " \t\r\n\x00,;\"") {
			t.Fatalf("%q gave token %q", h, tok)
		}
		if strings.Trim(strings.TrimPrefix(h[len(scheme):], " "), " ") != tok {
			t.Fatalf("%q gave token %q: not the rest of the header", h, tok)
		}
		// An unknown key never authenticates, whatever its shape.
		if p, ok := auth.VerifyAPIKey(keys, tok); ok {
			t.Fatalf("%q authenticated as %v against an empty store", tok, p)
		}
	})
}

func FuzzDecodeCreate(f *testing.F) {
	for _, s := range []struct{ ctype, body string }{
		{"application/json", `{"identity": "svc-orders"}`},
		{"application/json; charset=utf-8", `{"identity": "x"}`},
		{"application/json", `{"identity": null}`},
		{"application/json", `{"identity": "x", "admin": true}`},
		{"application/json", `{"identity": "x"} {"identity": "y"}`},
		{"application/json", `{"identity": "\u0000"}`},
		{"application/json", `{"Identity": "x"}`},
		{"application/json", `["x"]`},
		{"text/plain", `{"identity": "x"}`},
		{"", ""},
		{"application/json;", `{}`},
	} {
		f.Add(s.ctype, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		identity, code, err := decodeCreate(ctype, bytes.NewReader(body))
		if err != nil {
			if code != http.StatusBadRequest && code != http.StatusUnsupportedMediaType {
				t.Fatalf("error %v with status %d", err, code)
			}
			return
		}
		// Accepted: one JSON object whose identity (matched without case,
		// as encoding/json does) is the string returned, and nothing else.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("accepted %q, which is not one JSON object: %v", body, err)
		}
		var got string
		found := 0
		for k, v := range m {
			if !strings.EqualFold(k, "identity") {
				t.Fatalf("accepted %q with field %q", body, k)
			}
			if err := json.Unmarshal(v, &got); err != nil {
				t.Fatalf("accepted %q: identity is not a string", body)
			}
			found++
		}
		if found != 1 || got != identity {
			t.Fatalf("accepted %q as identity %q", body, identity)
		}
	})
}

// fuzzPort is the admin port over a real store, with one key of a
// principal who may read but not change: no fuzz input can create or
// revoke anything, so each stays fast and the store stays as it is.
func fuzzPort(f *testing.F) (http.Handler, *control.Credentials, string) {
	h, creds, _, reader := fuzzPortTenants(f)
	return h, creds, reader
}

// fuzzPortTenants is fuzzPort with its tenant manager (one tenant,
// "team").
func fuzzPortTenants(f *testing.F) (http.Handler, *control.Credentials, *control.Tenants, string) {
	s, err := store.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	creds := &control.Credentials{
		Store: s,
		Audit: audit.NewLogger(audit.Config{Recent: 16}),
		Authz: control.Admins{Principals: []string{"User:admin"}, AllowAnonymousDescribe: true},
	}
	reader, _, err := creds.CreateAPIKey(context.Background(), control.Initiator{Principal: adminPrincipal}, "alice")
	if err != nil {
		f.Fatal(err)
	}
	var q model.Quotas
	q.Set(model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 1000)
	eng := engineWith(f, quota.EngineConfig{}, q)
	lim, err := admission.New(admission.DefaultSettings(), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	tn := &control.Tenants{Store: s, Audit: creds.Audit, Authz: creds.Authz, OnChange: func(ts *quota.TenantSet) { eng.SetTenants(ts, time.Now()) }}
	if err := tn.SetFixed([]control.TenantSpec{{Name: "team", Principals: []string{"alice"}}}); err != nil {
		f.Fatal(err)
	}
	h := Handler(Sources{
		Engine: eng, Admission: lim, Ready: func() bool { return true },
		Registry: prometheus.NewRegistry(),
		Sessions: func() map[string]int { return map[string]int{"PLAINTEXT": 1} },
		IPRate:   func(netip.Addr) (int, string, bool) { return 5, "", true },
		Audit: func(n int) []any {
			var out []any
			for _, e := range creds.Audit.Recent(n) {
				out = append(out, e)
			}
			return out
		},
		APIKeys: creds,
		Tenants: tn,
		Access:  Access{Keys: creds, Authz: creds.Authz, Audit: creds.Audit},
	})
	return h, creds, tn, reader
}

func FuzzRequest(f *testing.F) {
	h, creds, tn, reader := fuzzPortTenants(f)
	before, err := creds.ListAPIKeys()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct{ method, target, host, authz, ctype, body string }{
		{"GET", "/api/v1/resolve?user=alice&client_id=app&ip=10.0.0.1", "127.0.0.1:9644", "", "", ""},
		{"GET", "/api/v1/resolve?user=%00&client_id=%ff&ip=fe80::1%25eth0", "localhost", "", "", ""},
		{"GET", "/api/v1/resolve?client_id=x", "[::1]:1", "", "", ""},
		{"GET", "/api/v1/resolve?user=a&ip=999.1.1.1", "127.0.0.1", "", "", ""},
		{"GET", "/api/v1/buckets", "127.0.0.1", "Bearer " + reader, "", ""},
		{"GET", "/api/v1/connections", "127.0.0.1", "Bearer tg_aaaaaaaaaaaaaaaa_bbbb", "", ""},
		{"GET", "/api/v1/audit?n=5", "127.0.0.1", "Basic eDp5", "", ""},
		{"GET", "/api/v1/apikeys", "evil.example", "Bearer " + reader, "", ""},
		{"POST", "/api/v1/apikeys", "127.0.0.1", "Bearer " + reader, "application/json", `{"identity": "x"}`},
		{"POST", "/api/v1/apikeys", "127.0.0.1", "", "application/json", `{"identity": "x", "y": 1}`},
		{"POST", "/api/v1/apikeys", "127.0.0.1", "", "text/plain", `x`},
		{"DELETE", "/api/v1/apikeys/aaaaaaaaaaaaaaaa", "127.0.0.1", "Bearer " + reader, "", ""},
		{"DELETE", "/api/v1/apikeys/../../x", "127.0.0.1", "", "", ""},
		{"OPTIONS", "/api/v1/apikeys", "127.0.0.1", "", "", ""},
		{"GET", "/metrics", "127.0.0.1", "", "", ""},
		{"GET", "/healthz", "127.0.0.1", "", "", ""},
		{"GET", "/readyz", "127.0.0.1", "", "", ""},
		{"GET", "/", "127.0.0.1", "", "", ""},
		{"GET", "/../../etc/passwd", "127.0.0.1", "", "", ""},
		{"GET", "//api/v1//buckets", "127.0.0.1", "", "", ""},
		{"GET", "/api/v1/tenants", "127.0.0.1", "Bearer " + reader, "", ""},
		{"GET", "/api/v1/tenants/team", "127.0.0.1", "", "", ""},
		{"POST", "/api/v1/tenants", "127.0.0.1", "Bearer " + reader, "application/json", `{"name": "x", "principals": ["bob"]}`},
		{"PUT", "/api/v1/tenants/team", "127.0.0.1", "", "application/json", `{"name": "team"}`},
		{"PATCH", "/api/v1/tenants/team", "127.0.0.1", "Bearer " + reader, "application/json", `{"add_principals": ["x"]}`},
		{"DELETE", "/api/v1/tenants/team", "127.0.0.1", "Bearer " + reader, "", ""},
	} {
		f.Add(s.method, s.target, s.host, s.authz, s.ctype, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target, host, authz, ctype string, body []byte) {
		// The request as it comes off the wire; what net/http cannot parse
		// never reaches the handler.
		var raw bytes.Buffer
		fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
		if authz != "" {
			fmt.Fprintf(&raw, "Authorization: %s\r\n", authz)
		}
		if ctype != "" {
			fmt.Fprintf(&raw, "Content-Type: %s\r\n", ctype)
		}
		fmt.Fprintf(&raw, "Content-Length: %d\r\n\r\n", len(body))
		raw.Write(body)
		req, err := http.ReadRequest(bufio.NewReader(&raw))
		if err != nil {
			return
		}
		req.RemoteAddr = "192.0.2.7:4711"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		code := rec.Code
		switch code {
		case 200, 201, 301, 307, 400, 401, 403, 404, 405, 413, 415, 421, 503:
		default:
			t.Fatalf("%s %s (Host %q): status %d: %s", method, target, host, code, rec.Body.String())
		}
		if code == 201 || ((req.Method == "DELETE" || req.Method == "PUT" || req.Method == "PATCH") && code == 200) {
			t.Fatalf("%s %s changed something without an admin's credentials: %d %s", method, target, code, rec.Body.String())
		}
		if code == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer ") {
			t.Fatalf("401 without a Bearer challenge")
		}
		if code == 421 && HostAllowed(req.Host, DefaultAllowedHosts) {
			t.Fatalf("Host %q refused", req.Host)
		}
		if code != 421 && !HostAllowed(req.Host, DefaultAllowedHosts) {
			t.Fatalf("Host %q served: %d", req.Host, code)
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON answer: %s", rec.Body.String())
		}
		if strings.Contains(rec.Body.String(), "tg_") && req.Method != "POST" && strings.Contains(authz, "tg_") {
			// A presented key is never echoed back.
			if _, tok, _ := strings.Cut(authz, " "); tok != "" && strings.Contains(rec.Body.String(), strings.TrimSpace(tok)) {
				t.Fatalf("the presented key is in the answer: %s", rec.Body.String())
			}
		}
		after, err := creds.ListAPIKeys()
		if err != nil || len(after) != len(before) || after[0].Revoked {
			t.Fatalf("keys changed: %v → %v (%v)", before, after, err)
		}
		if ts := tn.List(); len(ts) != 1 || len(ts[0].Principals) != 1 {
			t.Fatalf("tenants changed: %+v", ts)
		}
	})
}
