package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// failedLogin is a denied login from source (host:port).
func failedLogin(source string) Event {
	return Event{Action: ActionAuthenticate, Outcome: Denied, ErrorCode: 58, ErrorMessage: "Authentication failed: Invalid username or password",
		Initiator: Initiator{Source: source, Listener: "SASL_PLAINTEXT"},
		Changes:   []Change{{Key: "mechanism", New: String("PLAIN")}}}
}

func deniedAlter(principal, source string) Event {
	e := sampleEvent()
	e.Outcome, e.ErrorCode, e.ErrorMessage = Denied, 31, "Cluster authorization failed."
	e.Initiator.Principal, e.Initiator.Source = principal, source
	return e
}

// An attacker's flood of failed logins from one address, each from a new
// port, is one event as it starts and one event per interval after: the
// file grows by two lines, not thousands. Another address, another
// principal or another action is a key of its own. Changes are written as
// they come, in between. In a synctest bubble: the clock is exact.
func TestAggregateDenials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		fs, err := OpenFileSink(path)
		if err != nil {
			t.Fatal(err)
		}
		l := NewLogger(Config{Outputs: []Output{{Sink: fs, Required: true}}, AggregateInterval: time.Minute})
		ctx := context.Background()
		start := time.Now()
		for i := range 1000 {
			if err := l.Record(ctx, failedLogin(fmt.Sprintf("192.0.2.7:%d", 10000+i))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // 10 s in all
		}
		if n := len(readLines(t, path)); n != 1 {
			t.Fatalf("1000 failed logins from one address: %d lines, want 1 (the first)", n)
		}
		// Other keys: another address, a denied change by a principal, from
		// the same address as another principal.
		for _, e := range []Event{failedLogin("192.0.2.8:1"), deniedAlter("User:alice", "192.0.2.7:2"), deniedAlter("User:bob", "192.0.2.7:3"), deniedAlter("User:alice", "192.0.2.7:4")} {
			l.Record(ctx, e)
		}
		// A change is written at once, whatever the denials.
		if err := l.Record(ctx, sampleEvent()); err != nil {
			t.Fatal(err)
		}
		lines := readLines(t, path)
		if len(lines) != 5 || lines[4]["outcome"] != "applied" {
			t.Fatalf("after other keys and a change: %d lines: %v", len(lines), lines)
		}
		if s := lines[0]["initiator"].(map[string]any)["source"]; s != "192.0.2.7:10000" {
			t.Errorf("the first event keeps its source with the port: %v", s)
		}

		// The interval is over: one summary for each key that saw more.
		time.Sleep(time.Minute - 10*time.Second + time.Minute/4)
		synctest.Wait()
		lines = readLines(t, path)
		if len(lines) != 7 {
			t.Fatalf("after the interval: %d lines, want 7: %v", len(lines), lines[5:])
		}
		want := []struct {
			principal string
			count     float64
			first     time.Time
		}{{"", 999, start.Add(10 * time.Millisecond)}, {"User:alice", 1, start.Add(10 * time.Second)}}
		for i, w := range want {
			ev := lines[5+i]
			ag, _ := ev["aggregate"].(map[string]any)
			ini := ev["initiator"].(map[string]any)
			if ag == nil || ag["count"] != w.count || ini["principal"] != w.principal || ini["source"] != "192.0.2.7" ||
				ag["interval"] != "1m0s" || ag["first"] != w.first.UTC().Format(time.RFC3339Nano) || ev["outcome"] != "denied" {
				t.Errorf("summary %d: %v", i, ev)
			}
		}
		if sum, over := l.Aggregated(); sum != 1000 || over != 0 {
			t.Errorf("Aggregated() = %d, %d; want 1000, 0", sum, over)
		}

		// A quiet interval forgets the keys: the next denial is written
		// as it comes again.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		l.Record(ctx, failedLogin("192.0.2.7:9"))
		l.Record(ctx, failedLogin("192.0.2.7:10"))
		if lines = readLines(t, path); len(lines) != 8 || lines[7]["aggregate"] != nil {
			t.Fatalf("after a quiet interval: %d lines", len(lines))
		}
		// Close writes what is counted and stops the flusher (the bubble
		// would not end otherwise).
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		lines = readLines(t, path)
		if len(lines) != 9 || lines[8]["aggregate"].(map[string]any)["count"] != 1.0 {
			t.Fatalf("after Close: %v", lines[8:])
		}
		// A denial after Close is written as it comes.
		l.Record(ctx, failedLogin("192.0.2.7:11"))
		if n := len(readLines(t, path)); n != 10 {
			t.Fatalf("after Close: %d lines", n)
		}
	})
}

// The map of keys is capped: an attacker with many addresses fills it,
// and the denials of every further address are counted in one "others"
// event per action; memory stays bounded.
func TestAggregateCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLogger(Config{AggregateInterval: time.Minute, AggregateKeys: 3})
		defer l.Close()
		for i := range 100 {
			l.Record(context.Background(), failedLogin(fmt.Sprintf("198.51.100.%d:1", i)))
		}
		if n := len(l.Recent(0)); n != 3 {
			t.Fatalf("%d events from 100 addresses with a cap of 3 keys", n)
		}
		if sum, over := l.Aggregated(); sum != 97 || over != 97 {
			t.Fatalf("Aggregated() = %d, %d", sum, over)
		}
		l.Flush()
		evs := l.Recent(0)
		if len(evs) != 4 {
			t.Fatalf("after Flush: %d events", len(evs))
		}
		o := evs[3]
		if o.Aggregate == nil || !o.Aggregate.Others || o.Aggregate.Count != 97 || o.Initiator.Source != "" || o.Action != ActionAuthenticate {
			t.Fatalf("others event: %+v %+v", o, o.Aggregate)
		}
		l.amu.Lock()
		keys := len(l.agg.keys)
		l.amu.Unlock()
		if keys > 3 {
			t.Fatalf("%d keys tracked, cap 3", keys)
		}
	})
}

// gateSink blocks the write of the event whose error message is block
// until release is closed, and records the order of writes.
type gateSink struct {
	mu      sync.Mutex
	order   []string
	block   string
	entered chan struct{}
	release chan struct{}
}

func (g *gateSink) Name() string { return "gate" }
func (g *gateSink) Write(_ context.Context, e *Event, _ []byte) error {
	if e.ErrorMessage == g.block {
		close(g.entered)
		<-g.release
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.order = append(g.order, string(e.Outcome)+":"+e.Initiator.Source)
	return nil
}
func (g *gateSink) Close() error { return nil }

// Denials give way: while one denial is being written (a slow disk), more
// denials from many addresses and then a change arrive. The change is
// written right after the denial in progress, before every waiting
// denial, however many there are.
func TestDenialsGiveWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateSink{block: "slow", entered: make(chan struct{}), release: make(chan struct{})}
		l := NewLogger(Config{Outputs: []Output{{Sink: g, Required: true}}, AggregateInterval: time.Minute})
		defer l.Close()
		ctx := context.Background()
		slow := failedLogin("203.0.113.1:1")
		slow.ErrorMessage = "slow"
		go l.Record(ctx, slow)
		<-g.entered
		for i := range 50 {
			go l.Record(ctx, failedLogin(fmt.Sprintf("203.0.113.%d:1", 2+i)))
		}
		synctest.Wait() // every denial is queued
		done := make(chan error)
		go func() { done <- l.Record(ctx, sampleEvent()) }()
		synctest.Wait() // the change is queued too
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.order) != 52 || g.order[0] != "denied:203.0.113.1:1" || g.order[1] != "applied:10.0.0.1:5555" {
			t.Fatalf("write order: %v", g.order[:min(len(g.order), 4)])
		}
	})
}

// A flood of denials never pushes the changes out of what Recent shows:
// denials take at most half of it when there are changes to show.
func TestRecentKeepsChanges(t *testing.T) {
	l := NewLogger(Config{Recent: 10})
	for i := range 3 {
		e := sampleEvent()
		e.ErrorCode = int16(i)
		l.Record(context.Background(), e)
	}
	for i := range 100 {
		l.Record(context.Background(), failedLogin(fmt.Sprintf("192.0.2.%d:1", i)))
	}
	got := l.Recent(10)
	changes := 0
	for _, e := range got {
		if e.Outcome == Applied {
			changes++
		}
	}
	if len(got) != 10 || changes != 3 {
		t.Fatalf("Recent(10): %d events, %d changes; want 10 and all 3", len(got), changes)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time.Before(got[i-1].Time) {
			t.Fatal("Recent is not in time order")
		}
	}
	if got := l.Recent(4); len(got) != 4 || got[0].Outcome != Applied || got[1].Outcome != Applied {
		t.Fatalf("Recent(4): %+v", got)
	}
	if n := len(l.Recent(0)); n != 13 {
		t.Fatalf("Recent(0): %d, want 3 changes and the 10 denials kept", n)
	}
}

// Rotation by size: concurrent writers, a small limit; every event is in
// exactly one file, whole, none over the limit, and the oldest files
// beyond max_files are removed.
func TestFileRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	const maxSize = 4096
	fs, err := OpenFileSink(path, WithRotation(maxSize, 100))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLogger(Config{Outputs: []Output{{Sink: fs, Required: true}}})
	var wg sync.WaitGroup
	const writers, each = 8, 25
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := sampleEvent()
				e.Initiator.ClientID = fmt.Sprintf("w%d-%d", w, i)
				if err := l.Record(context.Background(), e); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		fi, _ := os.Stat(f)
		if fi.Size() > maxSize {
			t.Errorf("%s: %d bytes, over %d", f, fi.Size(), maxSize)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", f, fi.Mode())
		}
		for _, ev := range readLines(t, f) {
			id := ev["initiator"].(map[string]any)["client_id"].(string)
			if seen[id] {
				t.Errorf("event %s in two files", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != writers*each || len(files) < 3 {
		t.Fatalf("%d events in %d files, want %d", len(seen), len(files), writers*each)
	}

	// max_files: 2 rotated files kept; the newest events are the ones kept.
	path2 := filepath.Join(dir, "kept.log")
	fs2, _ := OpenFileSink(path2, WithRotation(1024, 2))
	l2 := NewLogger(Config{Outputs: []Output{{Sink: fs2, Required: true}}})
	for i := range 60 {
		e := sampleEvent()
		e.Initiator.ClientID = fmt.Sprint(i)
		l2.Record(context.Background(), e)
	}
	files, _ = filepath.Glob(path2 + "*")
	if strings.Join(files, " ") != path2+" "+path2+".1 "+path2+".2" {
		t.Fatalf("files: %v", files)
	}
	cur := readLines(t, path2)
	if last := cur[len(cur)-1]["initiator"].(map[string]any)["client_id"]; last != "59" {
		t.Fatalf("newest event %v", last)
	}
	// An event larger than the limit still goes in, alone in its file.
	big := sampleEvent()
	big.ErrorMessage = strings.Repeat("x", 2000)
	if err := l2.Record(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if n := len(readLines(t, path2)); n != 1 {
		t.Fatalf("oversized event: %d lines in the new file", n)
	}
}
