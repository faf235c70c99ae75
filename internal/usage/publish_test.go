package usage

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/devcluster"
)

// ledgerMinutes writes n minutes from t0 into dir.
func ledgerMinutes(t *testing.T, dir string, t0 time.Time, n int) {
	t.Helper()
	l, err := Open(Options{Dir: dir, Instance: "gw-1", Log: quiet()}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		l.Record("u", "c", int16(kmsg.Produce), 100+i, 0, 0, t0.Add(time.Duration(i)*time.Minute))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// After a restart the publisher produces the minutes written after the
// last one it produced (the marker), in order, and moves the marker.
func TestUsagePublisherCatchesUp(t *testing.T) {
	dev, err := devcluster.Start(devcluster.Config{Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	dir := t.TempDir()
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ledgerMinutes(t, dir, t0, 3)
	marker := filepath.Join(dir, PublishedMarker)
	if err := writeFileSync(marker, []byte(t0.Format(time.RFC3339)+"\n")); err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(PublisherOptions{Dir: dir, Topic: "usage", Instance: "gw-1", Client: []kgo.Opt{kgo.SeedBrokers(dev.Addrs()...)}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(); err != nil {
		t.Fatal(err)
	}
	p.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.Close(ctx) // produces what is queued first
	b, _ := os.ReadFile(marker)
	if got := strings.TrimSpace(string(b)); got != t0.Add(2*time.Minute).Format(time.RFC3339) {
		t.Fatalf("marker %s after the catch-up", got)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(dev.Addrs()...), kgo.ConsumeTopics("usage"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var keys []string
	for len(keys) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("records %v", keys)
		}
		fs.EachRecord(func(r *kgo.Record) {
			keys = append(keys, string(r.Key))
			if !strings.HasPrefix(string(r.Value), `{"v":1,"minute":"`) {
				t.Errorf("value %q", r.Value)
			}
		})
	}
	// The two keys may land on different partitions, and a consumer sees
	// no order across partitions: compare them as a set.
	sort.Strings(keys)
	if strings.Join(keys, " ") != "gw-1/2025-06-01T12:01:00Z gw-1/2025-06-01T12:02:00Z" {
		t.Fatalf("keys %v: want the two minutes after the marker", keys)
	}
}

// A publisher whose cluster is unreachable does not hold a stop: what it
// could not produce stays for the next start (the marker does not move).
func TestUsagePublisherStopsWithoutCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	dir := t.TempDir()
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ledgerMinutes(t, dir, t0, 2)
	p, err := NewPublisher(PublisherOptions{Dir: dir, Topic: "usage", Instance: "gw-1", Client: []kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second)}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(); err != nil {
		t.Fatal(err)
	}
	p.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.Close(ctx)
	if _, err := os.Stat(filepath.Join(dir, PublishedMarker)); !os.IsNotExist(err) {
		t.Fatalf("marker written without a cluster: %v", err)
	}
}
