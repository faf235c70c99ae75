package usage

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ledgerOf writes a small ledger: two users over three minutes, one
// minute per day boundary apart.
func ledgerOf(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("alice", "app-1", int16(kmsg.Produce), 1000, 0, 0, t0)
	l.Record("alice", "app-2", int16(kmsg.Fetch), 0, 3000, 200*time.Millisecond, t0)
	l.Record("bob", "app-1", int16(kmsg.Produce), 10, 0, 0, t0.Add(time.Minute))
	l.AddMutations("bob", "app-1", 4, t0.Add(time.Minute))
	l.Record("alice", "app-1", int16(kmsg.Produce), 1, 0, 0, t0.Add(24*time.Hour))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadGroups(t *testing.T) {
	dir := ledgerOf(t)
	q := Query{Since: t0, Until: t0.Add(48 * time.Hour)}
	for _, tc := range []struct {
		by   string
		want string
	}{
		{ByUser, `[{alice <nil> 1001 3000 3 200 0} {bob <nil> 10 0 1 0 4}]`},
		{ByClientID, `[{<nil> app-2 0 3000 1 200 0} {<nil> app-1 1011 0 3 0 4}]`},
		{ByUserClientID, `[{alice app-2 0 3000 1 200 0} {alice app-1 1001 0 2 0 0} {bob app-1 10 0 1 0 4}]`},
	} {
		q.By = tc.by
		r, err := Read(dir, q)
		if err != nil {
			t.Fatal(err)
		}
		if got := rowsString(r.Rows); got != tc.want {
			t.Errorf("by %s: %s\nwant %s", tc.by, got, tc.want)
		}
		if r.Minutes != 3 || r.Total != (Counters{ProduceBytes: 1011, FetchBytes: 3000, Requests: 4, ThrottleMs: 200, PartitionMutations: 4}) || strings.Join(r.Instances, ",") != "test-1" {
			t.Errorf("by %s: minutes %d total %+v instances %v", tc.by, r.Minutes, r.Total, r.Instances)
		}
	}
}

func rowsString(rows []ReportRow) string {
	var b strings.Builder
	b.WriteString("[")
	for i, r := range rows {
		if i > 0 {
			b.WriteString(" ")
		}
		u, c := "<nil>", "<nil>"
		if r.User != nil {
			u = *r.User
		}
		if r.ClientID != nil {
			c = *r.ClientID
		}
		b.WriteString("{" + u + " " + c + " ")
		b.WriteString(strings.Trim(strings.ReplaceAll(strings.Trim(mustJSONValues(r.Counters), "{}"), ",", " "), " "))
		b.WriteString("}")
	}
	b.WriteString("]")
	return b.String()
}

func mustJSONValues(c Counters) string {
	return strings.Join([]string{itoa(c.ProduceBytes), itoa(c.FetchBytes), itoa(c.Requests), itoa(c.ThrottleMs), itoa(c.PartitionMutations)}, ",")
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// The range selects minutes that start in [since, until); a since inside a
// minute starts at the next one.
func TestReadRange(t *testing.T) {
	dir := ledgerOf(t)
	for _, tc := range []struct {
		since, until time.Time
		minutes      int
	}{
		{t0, t0.Add(time.Minute), 1},
		{t0.Add(time.Second), t0.Add(2 * time.Minute), 1},
		{t0.Add(-time.Hour), t0.Add(24 * time.Hour), 2},
		{t0.Add(time.Hour), t0.Add(25 * time.Hour), 1},
		{t0.Add(48 * time.Hour), t0.Add(49 * time.Hour), 0},
	} {
		r, err := Read(dir, Query{Since: tc.since, Until: tc.until, By: ByUser})
		if err != nil || r.Minutes != tc.minutes {
			t.Errorf("[%s, %s): %d minutes (%v), want %d", tc.since, tc.until, r.Minutes, err, tc.minutes)
		}
	}
	// A directory that does not exist (yet) is an empty ledger.
	r, err := Read(filepath.Join(dir, "none"), Query{Since: t0, Until: t0.Add(time.Hour), By: ByUser})
	if err != nil || r.Minutes != 0 || r.Rows == nil {
		t.Fatalf("missing dir: %+v %v", r, err)
	}
}

func TestQueryErrors(t *testing.T) {
	dir := ledgerOf(t)
	for _, tc := range []struct {
		q    Query
		want string
	}{
		{Query{Since: t0, Until: t0.Add(time.Hour), By: "partition"}, `by "partition": want user, client-id, user,client-id, tenant, topic or user,topic`},
		{Query{Since: t0, Until: t0, By: ByUser}, "is not before until"},
		{Query{Until: t0, By: ByUser}, "since and until are required"},
	} {
		_, err := Read(dir, tc.q)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.q, err, tc.want)
		}
	}
}

// Each row carries its user's tenant as of when its minute was written
// (Options.TenantOf); a query by tenant sums them, users in no tenant
// (and rows written before tenants existed) under "". Membership changes
// from the next minute written.
func TestReadByTenant(t *testing.T) {
	dir := t.TempDir()
	tenantOf := map[string]string{"alice": "team-a", "bob": "team-a", "carol": "team-c"}
	l := open(t, dir, t0, func(o *Options) { o.TenantOf = func(u string) string { return tenantOf[u] } })
	l.Record("alice", "app-1", int16(kmsg.Produce), 1000, 0, 0, t0)
	l.Record("bob", "app-2", int16(kmsg.Fetch), 0, 3000, 0, t0)
	l.Record("carol", "app-1", int16(kmsg.Produce), 10, 0, 0, t0)
	l.Record("dave", "app-1", int16(kmsg.Produce), 5, 0, 0, t0)
	if err := l.Flush(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	tenantOf["bob"] = "team-b" // moved: from the next minute on
	l.Record("bob", "app-2", int16(kmsg.Fetch), 0, 7, 0, t0.Add(time.Minute))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Read(dir, Query{Since: t0, Until: t0.Add(time.Hour), By: ByTenant})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range r.Rows {
		if row.User != nil || row.ClientID != nil || row.Tenant == nil {
			t.Errorf("row %+v: want the tenant alone", row)
			continue
		}
		got = append(got, *row.Tenant+":"+itoa(row.ProduceBytes+row.FetchBytes))
	}
	if want := "team-a:4000 team-c:10 team-b:7 :5"; strings.Join(got, " ") != want {
		t.Errorf("by tenant: %s, want %s", strings.Join(got, " "), want)
	}
	var table bytes.Buffer
	if err := r.Write(&table, FormatTable); err != nil || !strings.Contains(table.String(), "TENANT") || !strings.Contains(table.String(), "(no tenant)") {
		t.Errorf("table: %v\n%s", err, table.String())
	}
	var c bytes.Buffer
	if err := r.Write(&c, FormatCSV); err != nil || !strings.HasPrefix(c.String(), "tenant,produce_bytes,") {
		t.Errorf("csv: %v\n%s", err, c.String())
	}
}

// An unreadable complete line (a disk error, a hand edit) is skipped and
// named; the rest is read.
func TestReadSkipsAndNamesBadLines(t *testing.T) {
	dir := ledgerOf(t)
	path := filepath.Join(dir, "2025-06-01.jsonl")
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	bad := lines[0] + "garbage\n" + `{"v":9,"minute":"2025-06-01T12:05:00Z","instance":"x","rows":[]}` + "\n" + strings.Join(lines[1:], "")
	os.WriteFile(path, []byte(bad), 0o600)
	r, err := Read(dir, Query{Since: t0, Until: t0.Add(time.Hour), By: ByUser})
	if err != nil {
		t.Fatal(err)
	}
	if r.Minutes != 2 || len(r.Warnings) != 2 || !strings.Contains(r.Warnings[0], path+":2: not a usage record") || !strings.Contains(r.Warnings[1], "format version 9 is newer") {
		t.Fatalf("minutes %d warnings %q", r.Minutes, r.Warnings)
	}
}

func TestParseTime(t *testing.T) {
	now := t0.Add(30 * time.Second)
	for in, want := range map[string]time.Time{
		"24h":                  now.Add(-24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2025-05-01":           time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC),
		"2025-05-01T10:30":     time.Date(2025, 5, 1, 10, 30, 0, 0, time.UTC),
		"2025-05-01T10:30:00Z": time.Date(2025, 5, 1, 10, 30, 0, 0, time.UTC),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %s %v, want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-5h", "0s", "0d", "99999999d", "yesterday", "2025-13-01"} {
		if _, err := ParseTime(in, now); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestReportFormats(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("alice", "=HYPERLINK(\"http://x\")", int16(kmsg.Produce), 100, 0, 0, t0)
	l.Record("alice", "\x1b[31mred", int16(kmsg.Produce), 50, 0, 0, t0)
	l.Record("alice", "", int16(kmsg.Fetch), 0, 20, 0, t0)
	l.Close()
	r, err := Read(dir, Query{Since: t0, Until: t0.Add(time.Hour), By: ByUserClientID})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := r.Write(&table, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `Usage by user,client-id from 2025-06-01T12:00:00Z to 2025-06-01T13:00:00Z: 1 minutes (instances: test-1)

USER   CLIENT-ID               PRODUCE BYTES  FETCH BYTES  REQUESTS  THROTTLE MS  PARTITION MUTATIONS
alice  =HYPERLINK("http://x")  100            0            1         0            0
alice  "\x1b[31mred"           50             0            1         0            0
alice  ""                      0              20           1         0            0
TOTAL                          150            20           3         0            0
`
	if table.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), want)
	}
	var c bytes.Buffer
	if err := r.Write(&c, FormatCSV); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || strings.Join(recs[0], ",") != "user,client_id,overflow,produce_bytes,fetch_bytes,requests,throttle_ms,partition_mutations" ||
		recs[1][1] != `'=HYPERLINK("http://x")` || recs[1][3] != "100" || recs[3][1] != "" {
		t.Errorf("csv %q", recs)
	}
	var j bytes.Buffer
	if err := r.Write(&j, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(j.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Total != r.Total || len(back.Rows) != 3 || *back.Rows[0].ClientID != `=HYPERLINK("http://x")` || back.By != ByUserClientID {
		t.Errorf("json round trip %+v", back)
	}
	if err := r.Write(&j, "xml"); err == nil {
		t.Error("format xml: no error")
	}
	// By user: no client id column.
	r, _ = Read(dir, Query{Since: t0, Until: t0.Add(time.Hour), By: ByUser})
	c.Reset()
	r.Write(&c, FormatCSV)
	if c.String() != "user,produce_bytes,fetch_bytes,requests,throttle_ms,partition_mutations\nalice,150,20,3,0,0\n" {
		t.Errorf("csv by user %q", c.String())
	}
}

func TestInstanceID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	id, err := InstanceID(dir)
	if err != nil || validInstanceID(id) != nil {
		t.Fatalf("id %q %v", id, err)
	}
	again, err := InstanceID(dir)
	if err != nil || again != id {
		t.Fatalf("second read %q %v, want %q", again, err, id)
	}
	// An operator may set it; a bad one is a clear error.
	os.WriteFile(filepath.Join(dir, InstanceFile), []byte("gw-eu-1\n"), 0o600)
	if id, err := InstanceID(dir); err != nil || id != "gw-eu-1" {
		t.Fatalf("set id %q %v", id, err)
	}
	os.WriteFile(filepath.Join(dir, InstanceFile), []byte("gw eu/1\n"), 0o600)
	if _, err := InstanceID(dir); err == nil || !strings.Contains(err.Error(), "instance-id: the instance id has the character ' '") {
		t.Fatalf("bad id: %v", err)
	}
}

// Per-topic rows (RecordTopic) sit beside the (user, client-id) rows:
// only a query by topic or by user and topic reads them, the others
// count each byte once, in its user's row. They survive a restart as
// the other rows do, and a topic idle for a minute is forgotten.
func TestReadByTopic(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	topic := []byte("orders")
	l.Record("alice", "app-1", int16(kmsg.Produce), 1100, 0, 0, t0)
	l.RecordTopic("alice", "app-1", topic, true, 1000, t0)
	l.Record("alice", "app-1", int16(kmsg.Fetch), 0, 2100, 0, t0)
	l.RecordTopic("alice", "app-1", topic, false, 2000, t0)
	l.RecordTopic("bob", "app-2", []byte("payments"), true, 50, t0)
	l.Record("bob", "app-2", int16(kmsg.Produce), 60, 0, 0, t0)
	if err := l.Flush(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	l.RecordTopic("alice", "app-9", topic, true, 7, t0.Add(time.Minute))
	allocs := testing.AllocsPerRun(100, func() { l.RecordTopic("alice", "app-9", topic, true, 1, t0.Add(time.Minute)) })
	if allocs != 0 {
		t.Errorf("RecordTopic of a known topic allocates %.1f times", allocs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	q := Query{Since: t0, Until: t0.Add(time.Hour)}
	for _, tc := range []struct{ by, want string }{
		{ByTopic, "orders:1108/2000 payments:50/0"}, // 1000 + 7 + AllocsPerRun's 101 × 1
		{ByUserTopic, "alice/orders:1108/2000 bob/payments:50/0"},
		{ByUser, "alice/:1100/2100 bob/:60/0"},
	} {
		q.By = tc.by
		r, err := Read(dir, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, row := range r.Rows {
			name := deref(row.Topic)
			if row.User != nil {
				name = *row.User + "/" + name
			}
			got = append(got, name+":"+itoa(row.ProduceBytes)+"/"+itoa(row.FetchBytes))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("by %s: %s, want %s", tc.by, strings.Join(got, " "), tc.want)
		}
	}
	q.By = ByTopic
	r, _ := Read(dir, q)
	var table bytes.Buffer
	if err := r.Write(&table, FormatTable); err != nil || !strings.Contains(table.String(), "TOPIC") || !strings.Contains(table.String(), "orders") {
		t.Errorf("table: %v\n%s", err, table.String())
	}
}
