package diskguard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestEvaluate(t *testing.T) {
	dirs := []Dir{{1, "/var/kafka", 100 << 30, 50 << 30}, {2, "/var/kafka", 100 << 30, 4 << 30}, {3, "/remote", -1, -1}}
	for _, tc := range []struct {
		name   string
		c      Config
		dirs   []Dir
		err    error
		low    bool
		reason string
	}{
		{"bytes: broker 2 below", Config{MinFreeBytes: 5 << 30}, dirs, nil, true, "broker 2's /var/kafka has 4294967296 bytes free, below storage.min_free_bytes 5368709120"},
		{"bytes: all above", Config{MinFreeBytes: 1 << 30}, dirs, nil, false, ""},
		{"ratio: broker 2 at 4 %", Config{MinFreeRatio: 0.05}, dirs, nil, true, "broker 2's /var/kafka has 4% free, below storage.min_free_ratio 5%"},
		{"ratio: all above", Config{MinFreeRatio: 0.03}, dirs, nil, false, ""},
		{"unreported sizes are not judged", Config{MinFreeBytes: 1}, []Dir{{3, "/remote", -1, -1}}, nil, false, ""},
		{"a failed probe, open", Config{MinFreeBytes: 1}, nil, errors.New("timeout"), false, "could not be read: timeout"},
		{"a failed probe, hold", Config{MinFreeBytes: 1, OnProbeFailure: "hold"}, nil, errors.New("timeout"), true, "could not be read: timeout"},
	} {
		st := Evaluate(tc.c, tc.dirs, tc.err, t0)
		if st.Low != tc.low || !strings.Contains(st.Reason, tc.reason) {
			t.Errorf("%s: low %v %q, want %v %q", tc.name, st.Low, st.Reason, tc.low, tc.reason)
		}
	}
}

// The guard holds Produce only while a probe says low, and only while a
// bound is set; a reload turning the bounds off releases it at the next
// check.
func TestGuard(t *testing.T) {
	usable := int64(1 << 20)
	fail := false
	probe := func(context.Context) ([]Dir, error) {
		if fail {
			return nil, errors.New("no broker answered")
		}
		return []Dir{{1, "/d", 100 << 20, usable}}, nil
	}
	g := New(Config{MinFreeBytes: 10 << 20, Hold: 2 * time.Second}, probe, nil, func() time.Time { return t0 })
	if g.Hold() != 0 {
		t.Fatal("held before any probe")
	}
	if st := g.Check(context.Background()); !st.Low || g.Hold() != 2*time.Second {
		t.Fatalf("1 MiB free of a 10 MiB bound: %+v, hold %v", st, g.Hold())
	}
	usable = 50 << 20
	if g.Check(context.Background()); g.Hold() != 0 {
		t.Fatal("still held after recovering")
	}
	fail = true
	if st := g.Check(context.Background()); st.Low || g.ProbeFailures() != 1 {
		t.Fatalf("a failed probe, open: %+v, %d failures", st, g.ProbeFailures())
	}
	g.SetConfig(Config{MinFreeBytes: 10 << 20, OnProbeFailure: "hold"})
	if g.Check(context.Background()); g.Hold() != DefaultHold {
		t.Fatalf("a failed probe, hold: %v", g.Hold())
	}
	g.SetConfig(Config{})
	if g.Hold() != 0 {
		t.Fatal("held with the bounds off")
	}
	for _, bad := range []Config{{MinFreeBytes: -1}, {MinFreeRatio: 1}, {CheckInterval: time.Millisecond}, {Hold: time.Hour}, {OnProbeFailure: "panic"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
