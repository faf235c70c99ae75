package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// localRequest is a request as a client on the gateway's host sends it
// (httptest.NewRequest's default Host, example.com, is refused).
func localRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1:9644"
	return req
}

// readable lets ANONYMOUS read, as allow_anonymous_describe does.
var readable = Access{Authz: control.Admins{AllowAnonymousDescribe: true}}

// engineWith is an engine of cfg holding q.
func engineWith(t testing.TB, cfg quota.EngineConfig, q model.Quotas) *quota.Engine {
	t.Helper()
	eng, err := quota.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eng.SetQuotas(q)
	return eng
}

// getCompact GETs path from h: the status and the body, JSON compacted.
func getCompact(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", path, nil))
	var buf bytes.Buffer
	json.Compact(&buf, rec.Body.Bytes())
	return rec.Code, buf.String()
}

// expectIn checks that body, of path, has each of want.
func expectIn(t *testing.T, path, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %s:\n%s", path, w, body)
		}
	}
}

func get(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", path, nil))
	var body map[string]any
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, rec.Body.String())
		}
	}
	return rec.Code, body
}

func TestHandlers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var q model.Quotas
	q.Set(model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 1000)
	q.Set(model.ClientEntity(model.Default()), model.ConsumerByteRate, 5000)
	eng := engineWith(t, quota.EngineConfig{}, q)
	eng.Client("alice", "app").RecordProduce(20000, now) // twice the 10 s burst: throttled
	as := admission.DefaultSettings()
	as.Listeners = []admission.ListenerSettings{{Name: "PLAINTEXT", MaxConnections: 10}}
	lim, err := admission.New(as, now)
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Sources{
		Engine: eng, Admission: lim, Now: func() time.Time { return now },
		Sessions: func() map[string]int { return map[string]int{"PLAINTEXT": 3} },
		IPRate: func(ip netip.Addr) (int, string, bool) {
			if ip == netip.MustParseAddr("10.0.0.1") {
				return 5, "10.0.0.0/8", true
			}
			return 0, "", false
		},
		Ready:  func() bool { return true },
		Access: readable,
	})

	for _, tc := range []struct {
		path string
		code int
		want []string // substrings of the JSON
	}{
		{"/api/v1/buckets", 200, []string{`"quota":"producer_byte_rate"`, `"user":"alice"`, `"limit":1000`, `"throttled":1`}},
		{"/api/v1/resolve?user=alice&client_id=app", 200, []string{`"entity":[{"type":"user","name":"alice"}]`, `"value":1000`, `"level":"user"`}},
		{"/api/v1/resolve?user=bob&client_id=x&ip=10.0.0.1", 200, []string{`"value":5000`, `"entity":[{"type":"client-id","name":null,"default":true}]`, `"entity":[{"type":"ip","name":"10.0.0.0/8"}]`}},
		{"/api/v1/resolve?client_id=x", 400, []string{`user is required`}},
		{"/api/v1/resolve?user=a&ip=nope", 400, []string{`ip:`}},
		{"/api/v1/connections", 200, []string{`"name":"PLAINTEXT"`, `"sessions":3`, `"max_connections":10`}},
		{"/api/v1/audit", 200, []string{`"events":[]`}},
	} {
		code, body := getCompact(h, tc.path)
		if code != tc.code {
			t.Errorf("%s: status %d, want %d: %s", tc.path, code, tc.code, body)
		}
		expectIn(t, tc.path, body, tc.want...)
	}
	// The bucket list is bounded (the busiest first): the throttled
	// alice, then a quiet one, with limit=1 only alice and the total.
	eng.Client("bob", "quiet").RecordProduce(10, now)
	if code, body := get(t, h, "/api/v1/buckets?limit=1"); code != 200 || body["total"] != 2.0 || len(body["buckets"].([]any)) != 1 ||
		body["buckets"].([]any)[0].(map[string]any)["user"] != "alice" {
		t.Errorf("buckets?limit=1: %d %v, want alice's bucket alone of 2", code, body)
	}
	for _, bad := range []string{"0", "-1", "x"} {
		if code, _ := get(t, h, "/api/v1/buckets?limit="+bad); code != 400 {
			t.Errorf("buckets?limit=%s: %d, want 400", bad, code)
		}
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Errorf("healthz %d", code)
	}
	notReady := Handler(Sources{Ready: func() bool { return false }, Access: readable})
	if code, _ := get(t, notReady, "/readyz"); code != 503 {
		t.Errorf("readyz while not ready: %d", code)
	}
	if code, _ := get(t, notReady, "/api/v1/buckets"); code != 503 {
		t.Errorf("buckets without an engine: %d", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Tollgate") {
		t.Errorf("dashboard: %d", rec.Code)
	}
}
