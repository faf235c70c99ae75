package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func str(s string) *string { return &s }

func sampleEvent() Event {
	return Event{
		Action:    ActionAlterClientQuotas,
		Outcome:   Applied,
		Initiator: Initiator{Principal: "User:admin", ClientID: "kafka-configs", Source: "10.0.0.1:5555", Listener: "PLAINTEXT"},
		Target: Target{Entity: []EntityComponent{
			Component("user", str("<default>")),
			Component("client-id", nil),
		}},
		Changes: []Change{
			{Key: "producer_byte_rate", Old: nil, New: Number(1048576)},
			{Key: "consumer_byte_rate", Old: Number(2.5), New: nil},
			{Key: "request_percentage", Old: Number(math.Inf(1)), New: Number(math.NaN())},
			{Key: "log.retention.ms", Old: String("1000"), New: String("")},
		},
	}
}

func TestEventJSON(t *testing.T) {
	l := NewLogger(Config{Now: func() time.Time {
		return time.Date(2025, 3, 4, 5, 6, 7, 890, time.FixedZone("X", 3600))
	}})
	e := sampleEvent()
	l.Prepare(&e)
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m["time"] != "2025-03-04T04:06:07.00000089Z" {
		t.Errorf("time %v", m["time"])
	}
	if id, _ := m["id"].(string); len(id) != 32 {
		t.Errorf("id %v", m["id"])
	}
	for k, want := range map[string]any{
		"action": "alter_client_quotas", "outcome": "applied", "error_code": 0.0,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if _, ok := m["error_message"]; ok {
		t.Errorf("error_message present on success")
	}
	ini := m["initiator"].(map[string]any)
	if ini["principal"] != "User:admin" || ini["client_id"] != "kafka-configs" || ini["source"] != "10.0.0.1:5555" || ini["listener"] != "PLAINTEXT" {
		t.Errorf("initiator %v", ini)
	}
	ent := m["target"].(map[string]any)["entity"].([]any)
	if u := ent[0].(map[string]any); u["name"] != "<default>" || u["default"] != false {
		t.Errorf("literal <default> user: %v", u)
	}
	if c := ent[1].(map[string]any); c["name"] != nil || c["default"] != true {
		t.Errorf("default client-id: %v", c)
	}
	ch := m["changes"].([]any)
	want := []struct{ old, new any }{
		{nil, 1048576.0},
		{2.5, nil},
		{"+Inf", "NaN"},
		{"1000", ""},
	}
	for i, w := range want {
		c := ch[i].(map[string]any)
		if c["old"] != w.old || c["new"] != w.new {
			t.Errorf("change %d: %v, want old %v new %v", i, c, w.old, w.new)
		}
		if _, ok := c["old"]; !ok {
			t.Errorf("change %d: old absent instead of null", i)
		}
	}
	// Round trip.
	var back Event
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != e.ID || !back.Time.Equal(e.Time) || *back.Target.Entity[0].Name != "<default>" {
		t.Errorf("round trip: %+v", back)
	}
	if f, ok := back.Changes[0].New.Float(); !ok || f != 1048576 {
		t.Errorf("number round trip: %v", back.Changes[0].New)
	}
	if s, ok := back.Changes[3].Old.Str(); !ok || s != "1000" {
		t.Errorf("string round trip: %v", back.Changes[3].Old)
	}
	if !bytes.Contains(data, []byte(`"new":1048576}`)) {
		t.Errorf("number not in plain form: %s", data)
	}
	// No changes: [] not null.
	data, _ = json.Marshal(Event{})
	if !bytes.Contains(data, []byte(`"changes":[]`)) {
		t.Errorf("empty changes: %s", data)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	t0 := time.Now()
	prev := NewID(t0)
	for i := range 10000 {
		id := NewID(t0.Add(time.Duration(i) * time.Millisecond))
		if seen[id] {
			t.Fatal("duplicate id")
		}
		seen[id] = true
		if i > 0 && id <= prev {
			t.Fatalf("ids not time-ordered: %s then %s", prev, id)
		}
		prev = id
	}
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestFileSink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"id":"old"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := OpenFileSink(path)
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	l := NewLogger(Config{Outputs: []Output{{Sink: fs, Required: true}, {Sink: NewWriterSink("buf", &stdout)}}})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Record(context.Background(), sampleEvent()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	lines := readLines(t, path)
	if len(lines) != 21 || lines[0]["id"] != "old" {
		t.Fatalf("%d lines, first %v", len(lines), lines[0])
	}
	if strings.Count(stdout.String(), "\n") != 20 {
		t.Fatalf("stdout sink: %q", stdout.String())
	}
	// Same order in every sink and in the ring.
	recent := l.Recent(0)
	sc := bufio.NewScanner(&stdout)
	for i := 1; sc.Scan(); i++ {
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		if m["id"] != lines[i]["id"] || m["id"] != recent[i-1].ID {
			t.Fatalf("order differs at %d", i)
		}
	}
	// Rotation by rename: the next event starts a new file.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(context.Background(), sampleEvent()); err != nil {
		t.Fatal(err)
	}
	if n := len(readLines(t, path)); n != 1 {
		t.Fatalf("after rotation: %d lines", n)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file mode: %v %v", fi, err)
	}
}

func TestFileSinkOpenErrors(t *testing.T) {
	if _, err := OpenFileSink(filepath.Join(t.TempDir(), "missing", "audit.jsonl")); err == nil {
		t.Fatal("sink in a missing directory opened")
	}
}

type failingSink struct {
	mu  sync.Mutex
	err error
	n   int
}

func (f *failingSink) Name() string { return "failing" }
func (f *failingSink) Write(context.Context, *Event, []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.err
}
func (f *failingSink) Close() error { return nil }

func TestRequiredSinkFailsClosed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fs, err := OpenFileSink(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var reported []string
	l := NewLogger(Config{
		Outputs: []Output{{Sink: fs, Required: true}, {Sink: NewWriterSink("buf", &buf)}},
		OnError: func(s string, err error) { reported = append(reported, s) },
	})
	if err := l.Record(context.Background(), sampleEvent()); err != nil {
		t.Fatal(err)
	}
	if !l.Required() {
		t.Fatal("Required() false")
	}
	// The directory disappears: the required sink fails, Record fails,
	// and neither the ring nor the optional sink gets the event.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err = l.Record(context.Background(), sampleEvent())
	if err == nil || !strings.Contains(err.Error(), "required sink file:") {
		t.Fatalf("Record with a removed directory: %v", err)
	}
	if n := len(l.Recent(0)); n != 1 {
		t.Fatalf("failed event kept in the ring: %d", n)
	}
	if strings.Count(buf.String(), "\n") != 1 || len(reported) != 1 || l.Failures() != 1 {
		t.Fatalf("optional sink %q, reported %v, failures %d", buf.String(), reported, l.Failures())
	}
	// An event that claims no change (the refusal) still reaches the
	// optional sink and the ring, and Record still reports the failure.
	refusal := sampleEvent()
	refusal.Outcome = Rejected
	if err := l.Record(context.Background(), refusal); err == nil {
		t.Fatal("required failure not reported for a rejected event")
	}
	if strings.Count(buf.String(), "\n") != 2 || len(l.Recent(0)) != 2 || l.Recent(1)[0].Outcome != Rejected {
		t.Fatalf("rejected event: optional sink %q, ring %d", buf.String(), len(l.Recent(0)))
	}

	// An optional failing sink does not fail Record.
	bad := &failingSink{err: errors.New("disk on fire")}
	l = NewLogger(Config{Outputs: []Output{{Sink: bad}}})
	if err := l.Record(context.Background(), sampleEvent()); err != nil || l.Required() {
		t.Fatalf("optional failure: %v", err)
	}
	if len(l.Recent(0)) != 1 {
		t.Fatal("event of an optional failure not in the ring")
	}
	// Required: it does.
	l = NewLogger(Config{Outputs: []Output{{Sink: bad, Required: true}}})
	if err := l.Record(context.Background(), sampleEvent()); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("required failure: %v", err)
	}
	// A cancelled context fails a required sink without calling it.
	ok := &failingSink{}
	l = NewLogger(Config{Outputs: []Output{{Sink: ok, Required: true}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Record(ctx, sampleEvent()); !errors.Is(err, context.Canceled) || ok.n != 0 {
		t.Fatalf("cancelled: %v, %d writes", err, ok.n)
	}
}

func TestRecentRing(t *testing.T) {
	l := NewLogger(Config{Recent: 3})
	for i := range 5 {
		e := sampleEvent()
		e.ErrorCode = int16(i)
		if err := l.Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		got := l.Recent(0)
		if len(got) != min(i+1, 3) || got[len(got)-1].ErrorCode != int16(i) {
			t.Fatalf("after %d: %+v", i, got)
		}
	}
	got := l.Recent(2)
	if len(got) != 2 || got[0].ErrorCode != 3 || got[1].ErrorCode != 4 {
		t.Fatalf("Recent(2): %+v", got)
	}
	if n := len(l.Recent(10)); n != 3 {
		t.Fatalf("Recent(10): %d", n)
	}
	if got := NewLogger(Config{Recent: -1}); got.Record(context.Background(), sampleEvent()) != nil || len(got.Recent(0)) != 0 {
		t.Fatal("ring disabled")
	}
	var nilLogger *Logger
	if nilLogger.Record(context.Background(), sampleEvent()) != nil || nilLogger.Recent(1) != nil || nilLogger.Close() != nil {
		t.Fatal("nil logger")
	}
}
