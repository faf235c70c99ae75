package usage

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func open(t *testing.T, dir string, now time.Time, edit ...func(*Options)) *Ledger {
	t.Helper()
	o := Options{Dir: dir, Instance: "test-1", Log: quiet()}
	for _, e := range edit {
		e(&o)
	}
	l, err := Open(o, now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readAll reads every minute line of dir, in file and line order.
func readAll(t *testing.T, dir string) []Minute {
	t.Helper()
	days, err := listDays(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []Minute
	for _, d := range days {
		b, err := os.ReadFile(d.path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			m, err := decodeMinute([]byte(line))
			if err != nil {
				t.Fatalf("%s:%d: %v", d.path, i+1, err)
			}
			out = append(out, m)
		}
	}
	return out
}

// checkOnce fails if a minute appears twice and returns the totals per
// (user, client-id) across every minute.
func checkOnce(t *testing.T, ms []Minute) map[string]Counters {
	t.Helper()
	seen := map[time.Time]bool{}
	tot := map[string]Counters{}
	for _, m := range ms {
		if seen[m.Minute] {
			t.Errorf("minute %s written twice", m.Minute)
		}
		seen[m.Minute] = true
		for _, r := range m.Rows {
			k := r.User + "/" + r.ClientID
			if r.Overflow {
				k = r.User + "/(overflow)"
			}
			c := tot[k]
			c.Add(r.Counters)
			tot[k] = c
		}
	}
	return tot
}

func TestRecordFlushOneLinePerMinute(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("alice", "app", int16(kmsg.Produce), 1000, 50, 0, t0.Add(10*time.Second))
	l.Record("alice", "app", int16(kmsg.Fetch), 70, 4000, 1500*time.Millisecond, t0.Add(20*time.Second))
	l.Record("alice", "app", int16(kmsg.ShareFetch), 70, 600, 0, t0.Add(20*time.Second))
	l.Record("bob", "", int16(kmsg.Metadata), 40, 300, 0, t0.Add(59*time.Second))
	l.AddMutations("bob", "", 12, t0.Add(59*time.Second))
	l.Record("alice", "app", int16(kmsg.Produce), 500, 50, 0, t0.Add(61*time.Second)) // the next minute

	// Within the minute nothing is written.
	if err := l.Flush(t0.Add(59 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if ms := readAll(t, dir); len(ms) != 0 {
		t.Fatalf("an open minute was written: %+v", ms)
	}
	if err := l.Flush(t0.Add(90 * time.Second)); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	if len(ms) != 1 {
		t.Fatalf("got %d minutes, want the closed one: %+v", len(ms), ms)
	}
	want := []Row{
		{User: "alice", ClientID: "app", Counters: Counters{ProduceBytes: 1000, FetchBytes: 4600, Requests: 3, ThrottleMs: 1500}},
		{User: "bob", ClientID: "", Counters: Counters{Requests: 1, PartitionMutations: 12}},
	}
	if m := ms[0]; !m.Minute.Equal(t0) || m.Instance != "test-1" || m.V != 1 || fmt.Sprint(m.Rows) != fmt.Sprint(want) {
		t.Fatalf("minute %+v, want %s test-1 rows %+v", m, t0, want)
	}
	// Flushing again writes nothing new; Close writes the open minute.
	if err := l.Flush(t0.Add(100 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms = readAll(t, dir)
	if len(ms) != 2 || !ms[1].Minute.Equal(t0.Add(time.Minute)) || ms[1].Rows[0].ProduceBytes != 500 {
		t.Fatalf("after close: %+v", ms)
	}
	if err := l.Flush(t0.Add(time.Hour)); err == nil {
		t.Fatal("flush after close: no error")
	}
}

// A count that arrives with a clock reading of a minute already flushed
// (a goroutine that read the clock just before the flush) goes into the
// open minute: a minute is never written twice.
func TestLateCountGoesToTheOpenMinute(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("u", "c", int16(kmsg.Produce), 100, 0, 0, t0.Add(30*time.Second))
	if err := l.Flush(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	l.Record("u", "c", int16(kmsg.Produce), 7, 0, 0, t0.Add(59*time.Second)) // late
	if err := l.Flush(t0.Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	tot := checkOnce(t, ms)
	if len(ms) != 2 || !ms[1].Minute.Equal(t0.Add(time.Minute)) || ms[1].Rows[0].ProduceBytes != 7 || tot["u/c"].ProduceBytes != 107 {
		t.Fatalf("minutes %+v", ms)
	}
}

// Stop (Close writes the open minute) and start again on the same
// directory within that minute: the rest of the minute is counted into the
// next one, nothing twice, nothing lost.
func TestRestartWritesNoMinuteTwice(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("u", "c", int16(kmsg.Produce), 100, 0, 0, t0.Add(10*time.Second))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, t0.Add(20*time.Second))
	if last, ok := l.LastWritten(); !ok || !last.Equal(t0) {
		t.Fatalf("last written %v %v, want %s", last, ok, t0)
	}
	l.Record("u", "c", int16(kmsg.Produce), 30, 0, 0, t0.Add(20*time.Second))
	l.Record("u", "c", int16(kmsg.Produce), 5, 0, 0, t0.Add(70*time.Second))
	if err := l.Flush(t0.Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	tot := checkOnce(t, ms)
	if len(ms) != 2 || !ms[1].Minute.Equal(t0.Add(time.Minute)) || ms[1].Rows[0].ProduceBytes != 35 || tot["u/c"].ProduceBytes != 135 {
		t.Fatalf("minutes %+v", ms)
	}
	// A third start with a clock behind the ledger (a host whose clock
	// jumped back) still writes after the last minute.
	l = open(t, dir, t0)
	l.Record("u", "c", int16(kmsg.Produce), 1, 0, 0, t0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms = readAll(t, dir)
	checkOnce(t, ms)
	if len(ms) != 3 || !ms[2].Minute.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("minutes %+v", ms)
	}
}

// A process killed in the middle of a write leaves half a line: the next
// start cuts it off, and the minutes after it start on a line of their
// own. The minute it was writing is lost (it was never complete).
func TestTornLastLineIsCutOff(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("u", "c", int16(kmsg.Produce), 100, 0, 0, t0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "2025-06-01.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"minute":"2025-06-01T12:01:00Z","instance":"test-1","rows":[{"us`)
	f.Close()
	// A reader meanwhile (the CLI on a running gateway) reads the
	// complete lines only.
	rep, err := Read(dir, Query{Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour), By: ByUser})
	if err != nil || rep.Minutes != 1 || len(rep.Warnings) != 0 {
		t.Fatalf("read with a torn tail: %+v %v", rep, err)
	}
	l = open(t, dir, t0.Add(90*time.Second))
	l.Record("u", "c", int16(kmsg.Produce), 3, 0, 0, t0.Add(90*time.Second))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir) // fails on any bad line
	checkOnce(t, ms)
	if len(ms) != 2 || !ms[1].Minute.Equal(t0.Add(time.Minute)) {
		t.Fatalf("minutes %+v", ms)
	}
}

// Old days are removed by whole files once past retention, at start and
// while running.
func TestRetentionRemovesOldDays(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0, func(o *Options) { o.Retention = 48 * time.Hour })
	for d := 0; d < 5; d++ {
		at := t0.Add(time.Duration(d) * 24 * time.Hour)
		l.Record("u", "c", int16(kmsg.Produce), 10, 0, 0, at)
		if err := l.Flush(at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	days, _ := listDays(dir)
	var names []string
	for _, d := range days {
		names = append(names, filepath.Base(d.path))
	}
	// At June 5 12:01, June 3 ended 36h ago (kept), June 2 60h ago.
	if got := strings.Join(names, " "); got != "2025-06-03.jsonl 2025-06-04.jsonl 2025-06-05.jsonl" {
		t.Fatalf("files %s", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A start a week later removes what expired meanwhile; an unrelated
	// file is left alone.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600)
	l = open(t, dir, t0.Add(9*24*time.Hour), func(o *Options) { o.Retention = 48 * time.Hour })
	l.Close()
	days, _ = listDays(dir)
	if len(days) != 0 {
		t.Fatalf("files left: %+v", days)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
}

// A client that cycles client ids cannot grow the ledger past max_keys:
// the rest of its client ids are summed in one overflow row per user, and
// nothing is lost.
func TestMaxKeysOverflowRow(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0, func(o *Options) { o.MaxKeys = 10 })
	for i := 0; i < 1000; i++ {
		l.Record("mallory", fmt.Sprintf("id-%d", i), int16(kmsg.Produce), 1, 0, 0, t0)
	}
	l.Record("alice", "app", int16(kmsg.Produce), 5, 0, 0, t0)
	if n := l.keys.Load(); n > 12 {
		t.Errorf("%d keys held, want at most max_keys + one overflow row per user", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	tot := checkOnce(t, ms)
	var sum int64
	for k, c := range tot {
		if strings.HasPrefix(k, "mallory/") {
			sum += c.ProduceBytes
		}
	}
	if sum != 1000 || tot["mallory/(overflow)"].ProduceBytes < 989 || tot["alice/(overflow)"].ProduceBytes != 5 {
		t.Fatalf("totals %+v", tot)
	}
	if len(ms[0].Rows) > 12 {
		t.Fatalf("%d rows in the minute", len(ms[0].Rows))
	}
}

// Topic names are the tenants' choice too: per-topic rows count against
// usage.max_keys, and a topic beyond it is not counted (the user's own row
// still is); topics idle for a minute are forgotten.
func TestMaxKeysPerTopicRows(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0, func(o *Options) { o.MaxKeys = 10 })
	for i := 0; i < 1000; i++ {
		l.RecordTopic("mallory", "app", []byte(fmt.Sprintf("topic-%d", i)), true, 1, t0)
	}
	if n := l.keys.Load(); n > 10 {
		t.Errorf("%d keys held after 1000 topics, want at most max_keys (10)", n)
	}
	if err := l.Flush(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(t0.Add(2 * time.Minute)); err != nil { // idle for a minute
		t.Fatal(err)
	}
	if n := l.keys.Load(); n != 0 {
		t.Errorf("%d keys held after a minute idle, want 0", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	if len(ms) != 1 || len(ms[0].Rows) > 10 {
		t.Fatalf("%d minutes, rows %+v: want one minute of at most 10 rows", len(ms), ms)
	}
}

// Keys idle for a minute are forgotten: memory follows the recent keys.
func TestIdleKeysForgotten(t *testing.T) {
	l := open(t, t.TempDir(), t0)
	defer l.Close()
	for i := 0; i < 100; i++ {
		l.Record("u", fmt.Sprint(i), int16(kmsg.Produce), 1, 0, 0, t0)
	}
	l.Flush(t0.Add(time.Minute))
	if n := l.keys.Load(); n != 100 {
		t.Fatalf("%d keys right after the minute, want 100 (kept for reuse)", n)
	}
	l.Flush(t0.Add(2 * time.Minute))
	if n := l.keys.Load(); n != 0 {
		t.Fatalf("%d keys after an idle minute, want 0", n)
	}
}

// Recording is on the per-frame path: no allocation once a key is known.
func TestRecordDoesNotAllocate(t *testing.T) {
	l := open(t, t.TempDir(), t0)
	defer l.Close()
	user, cid := "alice", "app"
	now := t0
	l.Record(user, cid, int16(kmsg.Produce), 100, 10, 0, now)
	if n := testing.AllocsPerRun(1000, func() {
		l.Record(user, cid, int16(kmsg.Produce), 100, 10, time.Millisecond, now)
		l.Record(user, cid, int16(kmsg.Fetch), 100, 10, 0, now)
	}); n != 0 {
		t.Fatalf("%v allocs per Record", n)
	}
	// Across a minute boundary (the closed minute waits in the shard).
	l.Flush(now.Add(time.Minute))
	l.Record(user, cid, int16(kmsg.Produce), 100, 10, 0, now.Add(time.Minute))
	l.Flush(now.Add(2 * time.Minute))
	next := now.Add(2 * time.Minute)
	if n := testing.AllocsPerRun(100, func() {
		next = next.Add(time.Minute)
		l.Record(user, cid, int16(kmsg.Produce), 100, 10, 0, next)
	}); n > 0.1 {
		t.Fatalf("%v allocs per Record into a new minute", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir(), Instance: "b", Log: quiet()}, t0)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := time.Now()
		for pb.Next() {
			l.Record("alice", "app", int16(kmsg.Produce), 1000, 50, 0, now)
		}
	})
}

// One topic of a request counted in the per-topic rows (what the quota
// filter adds per topic while per-topic quotas exist).
func BenchmarkRecordTopic(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir(), Instance: "b", Log: quiet()}, t0)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	topic := []byte("orders")
	b.ReportAllocs()
	now := time.Now()
	for b.Loop() {
		l.RecordTopic("alice", "app", topic, true, 1000, now)
	}
}

// Many sessions record while the flusher runs: every count is written
// once, in some minute.
func TestConcurrentRecordAndFlush(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	var clock sync.Mutex
	now := t0
	read := func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	var wg sync.WaitGroup
	const workers, per = 8, 2000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				l.Record(fmt.Sprint("u", w%3), fmt.Sprint("c", i%5), int16(kmsg.Produce), 10, 0, 0, read())
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			clock.Lock()
			now = now.Add(17 * time.Second)
			clock.Unlock()
			if err := l.Flush(read()); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	<-done
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range checkOnce(t, readAll(t, dir)) {
		sum += c.ProduceBytes
	}
	if sum != workers*per*10 {
		t.Fatalf("written %d bytes, want %d", sum, workers*per*10)
	}
}

// A minute that cannot be written is kept and written, in order, once the
// disk takes it again.
func TestWriteFailureKeepsTheMinute(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	// The day's file name is taken by a directory: the append fails.
	blocker := filepath.Join(dir, "2025-06-01.jsonl")
	if err := os.MkdirAll(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	l.Record("u", "c", int16(kmsg.Produce), 10, 0, 0, t0)
	if err := l.Flush(t0.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "kept, retried") {
		t.Fatalf("flush onto a directory: %v", err)
	}
	l.Record("u", "c", int16(kmsg.Produce), 20, 0, 0, t0.Add(time.Minute))
	if err := l.Flush(t0.Add(2 * time.Minute)); err == nil {
		t.Fatal("second flush: no error")
	}
	os.Remove(blocker)
	if err := l.Flush(t0.Add(3 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	checkOnce(t, ms)
	if len(ms) != 2 || ms[0].Rows[0].ProduceBytes != 10 || ms[1].Rows[0].ProduceBytes != 20 {
		t.Fatalf("minutes %+v", ms)
	}
	l.Close()
}

// A disk that never takes the minutes again costs a bounded memory: a day
// of minutes, then the oldest go.
func TestPendingMinutesBounded(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	for d := 0; d < 3; d++ {
		os.MkdirAll(filepath.Join(dir, t0.Add(time.Duration(d)*24*time.Hour).Format(dayLayout)+fileExt), 0o700)
	}
	at := t0
	for i := 0; i < maxPending+10; i++ {
		l.Record("u", "c", int16(kmsg.Produce), 1, 0, 0, at)
		at = at.Add(time.Minute)
		l.Flush(at)
	}
	if n := len(l.pending); n != maxPending {
		t.Fatalf("%d minutes pending, want %d", n, maxPending)
	}
	if got := l.pending[0].Minute; !got.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("oldest pending %s, want the 11th minute", got)
	}
}

func TestWrittenHook(t *testing.T) {
	var got []string
	l := open(t, t.TempDir(), t0, func(o *Options) {
		o.Written = func(m *Minute, line []byte) {
			if !bytes.HasSuffix(line, []byte("\n")) {
				t.Errorf("line without newline: %q", line)
			}
			got = append(got, m.Minute.Format(time.RFC3339))
		}
	})
	l.Record("u", "c", int16(kmsg.Produce), 10, 0, 0, t0)
	l.Record("u", "c", int16(kmsg.Produce), 10, 0, 0, t0.Add(time.Minute))
	l.Close()
	if strings.Join(got, " ") != "2025-06-01T12:00:00Z 2025-06-01T12:01:00Z" {
		t.Fatalf("written %v", got)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Options{Instance: "x"}, t0); err == nil {
		t.Error("no dir: no error")
	}
	dir := t.TempDir()
	// A line longer than any minute is corruption: a clear error names the
	// file, nothing is cut.
	path := filepath.Join(dir, "2025-06-01.jsonl")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), maxLine+10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, Instance: "x", Log: quiet()}, t0)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("oversized line: %v", err)
	}
	if st, _ := os.Stat(path); st.Size() != maxLine+10 {
		t.Fatalf("file changed to %d bytes", st.Size())
	}
}

func TestMinutesAfter(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	for i := 0; i < 3; i++ {
		l.Record("u", "c", int16(kmsg.Produce), 10, 0, 0, t0.Add(time.Duration(i)*24*time.Hour))
	}
	l.Close()
	var got []string
	err := Minutes(dir, t0, func(m *Minute, line []byte) error {
		if !bytes.HasSuffix(line, []byte("\n")) || !bytes.Contains(line, []byte(m.Minute.Format(time.RFC3339))) {
			t.Errorf("line %q for %s", line, m.Minute)
		}
		got = append(got, m.Minute.Format(time.RFC3339))
		return nil
	})
	if err != nil || strings.Join(got, " ") != "2025-06-02T12:00:00Z 2025-06-03T12:00:00Z" {
		t.Fatalf("minutes after %s: %v %v", t0, got, err)
	}
}

// A handover that fails: the ledger is closed (its open minute written)
// while the process keeps serving, another process writes a minute of its
// own, then the directory comes back (Reopen). What was counted while
// closed is kept and written after the other process's minutes; no
// minute is written twice, nothing is lost.
func TestReopenAfterAnotherWriter(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, t0)
	l.Record("u", "c", int16(kmsg.Produce), 100, 0, 0, t0.Add(10*time.Second))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Still serving while closed.
	l.Record("u", "c", int16(kmsg.Produce), 20, 0, 0, t0.Add(20*time.Second))
	// The other process, on the same directory, writes the next minute.
	other := open(t, dir, t0.Add(30*time.Second))
	other.Record("o", "c", int16(kmsg.Produce), 7, 0, 0, t0.Add(70*time.Second))
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(t0.Add(80 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(t0.Add(80 * time.Second)); err != nil {
		t.Fatalf("a second Reopen: %v", err)
	}
	if last, ok := l.LastWritten(); !ok || !last.Equal(t0.Add(time.Minute)) {
		t.Fatalf("last written after Reopen %v %v, want the other's minute %s", last, ok, t0.Add(time.Minute))
	}
	l.Record("u", "c", int16(kmsg.Produce), 3, 0, 0, t0.Add(85*time.Second))
	if err := l.Flush(t0.Add(3 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ms := readAll(t, dir)
	tot := checkOnce(t, ms)
	if len(ms) != 3 || !ms[2].Minute.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("minutes %+v, want t0, the other's t0+1m, then t0+2m", ms)
	}
	if tot["u/c"].ProduceBytes != 123 || tot["o/c"].ProduceBytes != 7 {
		t.Fatalf("totals %+v, want u/c 123 (nothing lost while closed) and o/c 7", tot)
	}
}
