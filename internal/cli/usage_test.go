package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/httpapi"
	"github.com/tollgate/tollgate/internal/usage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var usageT0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// usageDataDir is a data_dir whose ledger holds two users' minutes.
func usageDataDir(t *testing.T) string {
	t.Helper()
	dataDir := t.TempDir()
	l, err := usage.Open(usage.Options{Dir: filepath.Join(dataDir, "usage"), Instance: "gw-1", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		TenantOf: func(user string) string {
			if user == "alice" {
				return "payments"
			}
			return "" // bob is in no tenant
		}}, usageT0)
	if err != nil {
		t.Fatal(err)
	}
	l.Record("alice", "billing", int16(kmsg.Produce), 4096, 0, 0, usageT0)
	l.Record("alice", "billing", int16(kmsg.Fetch), 0, 8192, 250*time.Millisecond, usageT0.Add(time.Minute))
	l.Record("bob", "etl", int16(kmsg.Produce), 100, 0, 0, usageT0.Add(time.Minute))
	l.AddMutations("bob", "etl", 6, usageT0.Add(time.Minute))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dataDir
}

func runUsageEnv(t *testing.T, environ map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runWith(environ, func(ctx context.Context, env *Env) int {
		return runUsage(ctx, env, args, func() time.Time { return usageT0.Add(time.Hour) })
	})
}

// The admin port of a production-shaped config (User:admin's key reads)
// over the same ledger.
func usageServer(t *testing.T, dataDir string) (*httptest.Server, string) {
	t.Helper()
	_, creds := adminStore(t)
	key := newKey(t, creds, "reader")
	srv := httptest.NewServer(httpapi.Handler(httpapi.Sources{
		Usage:  func(q usage.Query) (*usage.Report, error) { return usage.Read(filepath.Join(dataDir, "usage"), q) },
		Access: httpapi.Access{Keys: creds, Authz: creds.Authz},
	}))
	t.Cleanup(srv.Close)
	return srv, key
}

// Both sources answer the same report, in each format.
func TestUsageCLI(t *testing.T) {
	dataDir := usageDataDir(t)
	srv, key := usageServer(t, dataDir)
	withKey := map[string]string{"TOLLGATE_API_KEY": key}
	wantTable := `Usage by user from 2025-06-01T12:00:00Z to 2025-06-01T13:00:00Z: 2 minutes (instances: gw-1)

USER   PRODUCE BYTES  FETCH BYTES  REQUESTS  THROTTLE MS  PARTITION MUTATIONS
alice  4096           8192         2         250          0
bob    100            0            1         0            6
TOTAL  4196           8192         3         250          6
`
	wantCSV := "user,client_id,overflow,produce_bytes,fetch_bytes,requests,throttle_ms,partition_mutations\n" +
		"alice,billing,false,4096,8192,2,250,0\nbob,etl,false,100,0,1,0,6\n"
	for _, src := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"data-dir", nil, []string{"--data-dir", dataDir}},
		{"admin-url", withKey, []string{"--admin-url", srv.URL}},
	} {
		code, out, errs := runUsageEnv(t, src.env, append(src.args, "--since", "1h", "--until", "2025-06-01T13:00:00Z")...)
		if code != 0 || out != wantTable || errs != "" {
			t.Errorf("%s table: code %d stderr %q\n%s\nwant\n%s", src.name, code, errs, out, wantTable)
		}
		code, out, _ = runUsageEnv(t, src.env, append(src.args, "--since", "2025-06-01", "--by", "user,client-id", "--format", "csv")...)
		if code != 0 || out != wantCSV {
			t.Errorf("%s csv: code %d\n%s\nwant\n%s", src.name, code, out, wantCSV)
		}
		code, out, _ = runUsageEnv(t, src.env, append(src.args, "--since", "90m", "--by", "client-id", "--format", "json")...)
		var r usage.Report
		if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
			t.Fatalf("%s json: code %d %v\n%s", src.name, code, err, out)
		}
		if r.By != "client-id" || r.Minutes != 2 || len(r.Rows) != 2 || *r.Rows[0].ClientID != "billing" || r.Rows[0].User != nil ||
			r.Total != (usage.Counters{ProduceBytes: 4196, FetchBytes: 8192, Requests: 3, ThrottleMs: 250, PartitionMutations: 6}) {
			t.Errorf("%s json: %+v", src.name, r)
		}
		// By tenant: alice's, and bob's in none.
		wantTenants := "TENANT       PRODUCE BYTES  FETCH BYTES  REQUESTS  THROTTLE MS  PARTITION MUTATIONS\n" +
			"payments     4096           8192         2         250          0\n" +
			"(no tenant)  100            0            1         0            6\n" +
			"TOTAL        4196           8192         3         250          6\n"
		code, out, errs = runUsageEnv(t, src.env, append(src.args, "--by", "tenant", "--since", "1h", "--until", "2025-06-01T13:00:00Z")...)
		if code != 0 || errs != "" || !strings.HasSuffix(out, wantTenants) {
			t.Errorf("%s by tenant: code %d stderr %q\n%s\nwant it to end with\n%s", src.name, code, errs, out, wantTenants)
		}
	}
}

func TestUsageCLIErrors(t *testing.T) {
	dataDir := usageDataDir(t)
	srv, _ := usageServer(t, dataDir)
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{nil, []string{"--admin-url", srv.URL}, 1, "set $TOLLGATE_API_KEY (or --api-key) to an API key"},
		{map[string]string{"TOLLGATE_API_KEY": "tg_wrong_key"}, []string{"--admin-url", srv.URL}, 1, "HTTP 401"},
		{nil, []string{"--data-dir", dataDir, "--admin-url", srv.URL}, 2, "takes no admin port flags"},
		{nil, []string{"--data-dir", filepath.Join(dataDir, "nope")}, 1, "no such directory"},
		{nil, []string{"--data-dir", dataDir, "--format", "xml"}, 2, `--format "xml": want table, csv or json`},
		{nil, []string{"--data-dir", dataDir, "--by", "partition"}, 2, `--by "partition"`},
		{nil, []string{"--data-dir", dataDir, "--since", "last week"}, 2, "--since "},
		{nil, []string{"--data-dir", dataDir, "--since", "1h", "--until", "2h"}, 2, "is not before until"},
		{nil, []string{"--data-dir", dataDir, "extra"}, 2, `unexpected argument "extra"`},
		{nil, []string{"--admin-url", "ftp://x"}, 2, "is not an http:// or https:// URL"},
	} {
		code, out, errs := runUsageEnv(t, tc.env, tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: code %d out %q stderr %q, want %d and %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
	if code, _, errs := runUsageEnv(t, nil, "-h"); code != 0 || !strings.Contains(errs, "--data-dir DIR") {
		t.Errorf("-h: %d %q", code, errs)
	}
}
