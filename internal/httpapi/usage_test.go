package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/usage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A real ledger with two users' traffic in the minute before the port's
// stopped clock.
func usageSource(t *testing.T, now time.Time) func(usage.Query) (*usage.Report, error) {
	t.Helper()
	dir := t.TempDir()
	l, err := usage.Open(usage.Options{Dir: dir, Instance: "gw-1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, now)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(-2 * time.Minute)
	l.Record("alice", "app", int16(kmsg.Produce), 1000, 0, 0, at)
	l.Record("bob", "etl", int16(kmsg.Fetch), 0, 500, 0, at)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return func(q usage.Query) (*usage.Report, error) { return usage.Read(dir, q) }
}

func TestUsageEndpoint(t *testing.T) {
	stopped := time.Unix(1_700_000_000, 0)
	f := newPort(t, func(s *Sources) { s.Usage = usageSource(t, stopped) })
	cl := f.srv.Client()
	for _, tc := range []struct {
		name, path, key string
		code            int
		ctype           string
		want            []string
	}{
		{"anonymous", "/api/v1/usage", "", 401, "application/json", []string{`"error"`}},
		{"wrong key", "/api/v1/usage", f.wrong, 401, "application/json", []string{`"error"`}},
		{"reader, defaults", "/api/v1/usage", f.reader, 200, "application/json",
			[]string{`"by": "user"`, `"instances": [` + "\n" + `    "gw-1"`, `"user": "alice"`, `"produce_bytes": 1000`, `"minutes": 1`}},
		{"by client-id", "/api/v1/usage?since=1h&by=client-id", f.admin, 200, "application/json", []string{`"client_id": "etl"`, `"fetch_bytes": 500`}},
		{"csv", "/api/v1/usage?since=2023-11-14&until=2023-11-15&by=user,client-id&format=csv", f.reader, 200, "text/csv",
			[]string{"user,client_id,overflow,produce_bytes,fetch_bytes,requests,throttle_ms,partition_mutations\nalice,app,false,1000,0,1,0,0\nbob,etl,false,0,500,1,0,0\n"}},
		{"table", "/api/v1/usage?format=table", f.reader, 200, "text/plain", []string{"USER   PRODUCE BYTES", "TOTAL  1000"}},
		{"an hour ago: nothing", "/api/v1/usage?since=2h&until=1h", f.reader, 200, "application/json", []string{`"minutes": 0`, `"rows": []`}},
		{"tenant", "/api/v1/usage?by=tenant", f.reader, 200, "application/json", []string{`"by": "tenant"`, `"tenant": ""`, `"produce_bytes": 1000`}},
		{"bad by", "/api/v1/usage?by=partition", f.reader, 400, "application/json", []string{`by \"partition\"`}},
		{"bad since", "/api/v1/usage?since=yesterday", f.reader, 400, "application/json", []string{"since: "}},
		{"negative since", "/api/v1/usage?since=-1h", f.reader, 400, "application/json", []string{"since: "}},
		{"bad until", "/api/v1/usage?until=soon", f.reader, 400, "application/json", []string{"until: "}},
		{"until before since", "/api/v1/usage?since=1h&until=2h", f.reader, 400, "application/json", []string{"is not before until"}},
		{"bad format", "/api/v1/usage?format=xml", f.reader, 400, "application/json", []string{`format \"xml\"`}},
	} {
		code, hdr, body := send(t, cl, f.srv.URL, "GET", tc.path, tc.key, "", "")
		if code != tc.code || !strings.HasPrefix(hdr.Get("Content-Type"), tc.ctype) {
			t.Errorf("%s: %d %s, want %d %s: %s", tc.name, code, hdr.Get("Content-Type"), tc.code, tc.ctype, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body lacks %q:\n%s", tc.name, w, body)
			}
		}
		if tc.ctype == "application/json" && tc.code == 200 {
			var r usage.Report
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	}
	// Without a ledger (usage.enabled: false): a clear 503.
	off := newPort(t)
	if code, _, body := send(t, off.srv.Client(), off.srv.URL, "GET", "/api/v1/usage", off.reader, "", ""); code != 503 || !strings.Contains(body, "usage.enabled: false") {
		t.Errorf("ledger off: %d %s", code, body)
	}
}

// GET /api/v1/quotas/suggest: the advisor over the same ledger, for the
// read right; in a Tollgate cluster it says the proposals are this
// instance's part.
func TestSuggestEndpoint(t *testing.T) {
	stopped := time.Unix(1_700_000_000, 0)
	var ledger usage.MinuteSource
	dir := t.TempDir()
	l, err := usage.Open(usage.Options{Dir: dir, Instance: "gw-1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, stopped)
	if err != nil {
		t.Fatal(err)
	}
	l.Record("alice", "app", int16(kmsg.Produce), 6000, 0, 0, stopped.Add(-2*time.Minute))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ledger = usage.DirMinutes(dir)
	inCluster := false
	f := newPort(t, func(s *Sources) {
		s.Suggest = func(q usage.SuggestQuery) ([]usage.Proposal, error) { return usage.Suggest(ledger, q) }
		s.Cluster = func() (api.ClusterStatus, bool) { return api.ClusterStatus{}, inCluster }
	})
	cl := f.srv.Client()
	for _, tc := range []struct {
		name, path, key string
		code            int
		want            []string
	}{
		{"anonymous", "/api/v1/quotas/suggest", "", 401, []string{`"error"`}},
		{"reader, defaults", "/api/v1/quotas/suggest", f.reader, 200,
			[]string{`"by": "user"`, `"percentile": 99`, `"headroom": 20`, `"user": "alice"`, `"quota": "producer_byte_rate"`, `"value": 120`, `"minutes": 1`, `"instance_only": false`}},
		{"by user,client-id", "/api/v1/quotas/suggest?by=user,client-id&percentile=50&headroom=0", f.reader, 200, []string{`"client_id": "app"`, `"value": 100`}},
		{"bad percentile", "/api/v1/quotas/suggest?percentile=101", f.reader, 400, []string{"percentile"}},
		{"bad headroom", "/api/v1/quotas/suggest?headroom=lots", f.reader, 400, []string{"headroom: not a number"}},
		{"bad by", "/api/v1/quotas/suggest?by=topic", f.reader, 400, []string{`by \"topic\"`}},
	} {
		code, _, body := send(t, cl, f.srv.URL, "GET", tc.path, tc.key, "", "")
		if code != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.name, code, tc.code, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body lacks %q:\n%s", tc.name, w, body)
			}
		}
	}
	inCluster = true
	if _, _, body := send(t, cl, f.srv.URL, "GET", "/api/v1/quotas/suggest", f.reader, "", ""); !strings.Contains(body, `"instance_only": true`) {
		t.Errorf("in a cluster: %s", body)
	}
	off := newPort(t)
	if code, _, body := send(t, off.srv.Client(), off.srv.URL, "GET", "/api/v1/quotas/suggest", off.reader, "", ""); code != 503 {
		t.Errorf("ledger off: %d %s", code, body)
	}
}
