package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/usage"
)

// `tollgate quotas suggest` over the ledgers of two instances of a
// cluster: alice produces 100 B/s a minute (60 B/s through one instance, 40
// through the other) for an hour, 1 000 B/s in one minute; the proposal at
// the 95th percentile with 20 % headroom is 120 B/s, which would have
// throttled that one minute. The file loads as a quota file for `quotas
// apply -f`, shadow when asked.
func TestQuotasSuggest(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for i, perMinute := range []int{3600, 2400} {
		dir := filepath.Join(root, "gw", string(rune('a'+i)), "usage")
		l, err := usage.Open(usage.Options{Dir: dir, Instance: "gw-" + string(rune('a'+i)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, usageT0)
		if err != nil {
			t.Fatal(err)
		}
		for m := range 60 {
			l.Record("alice", "ingest", int16(kmsg.Produce), perMinute, 0, 0, usageT0.Add(time.Duration(m)*time.Minute))
		}
		if i == 0 {
			l.Record("alice", "ingest", int16(kmsg.Produce), 60000-perMinute, 0, 0, usageT0.Add(60*time.Minute))
			l.Record("alice", "ingest", int16(kmsg.Produce), perMinute, 0, 0, usageT0.Add(60*time.Minute))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	out := filepath.Join(root, "suggested.yaml")
	run := func(args ...string) (int, string, string) {
		return runWith(nil, func(ctx context.Context, env *Env) int {
			return runSuggest(ctx, env, args, func() time.Time { return usageT0.Add(3 * time.Hour) })
		})
	}
	code, stdout, stderr := run("--data-dir", dirs[0], "--data-dir", dirs[1], "--since", "4h", "--percentile", "95", "--headroom", "20%", "--shadow", "-o", out)
	if code != 0 || !strings.Contains(stdout, "Wrote "+out+": 1 proposals.") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	file := string(b)
	for _, want := range []string{"user: alice", "producer_byte_rate: 120", "shadow: true",
		"producer_byte_rate: 61 active minutes, p95 100 B/s, peak 1000 B/s; would have throttled 1 (1.6%)"} {
		if !strings.Contains(file, want) {
			t.Errorf("the file lacks %q:\n%s", want, file)
		}
	}
	qf, err := loadQuotaFile(out)
	if err != nil {
		t.Fatalf("the file does not load for quotas apply: %v\n%s", err, file)
	}
	if len(qf.desired) != 1 {
		t.Errorf("quotas apply reads %d entities: %+v", len(qf.desired), qf.desired)
	}
	for e, vals := range qf.desired {
		if vals["producer_byte_rate"] != 120 || !strings.Contains(e.String(), "alice") {
			t.Errorf("quotas apply reads %v = %v", e, vals)
		}
	}

	// The same minutes from usage.topic, where a cluster's instances
	// publish them (one delivered twice), give the same file.
	tg := startCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.bootstrap), kgo.DefaultProduceTopic("tollgate-usage"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "tollgate-usage"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		err := usage.Minutes(d, time.Time{}, func(m *usage.Minute, line []byte) error {
			rec := &kgo.Record{Key: []byte(m.Instance + "/" + m.Minute.Format(time.RFC3339)), Value: []byte(strings.TrimSuffix(string(line), "\n"))}
			n++
			if n == 7 {
				cl.ProduceSync(ctx, rec) // delivered twice
			}
			return cl.ProduceSync(ctx, rec).FirstErr()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fromTopic := filepath.Join(root, "from-topic.yaml")
	if code, stdout, stderr := run("--usage-topic", "tollgate-usage", "--bootstrap-server", tg.bootstrap, "--since", "4h",
		"--percentile", "95", "--headroom", "20%", "--shadow", "-o", fromTopic); code != 0 {
		t.Fatalf("--usage-topic: exit %d\n%s%s", code, stdout, stderr)
	}
	if b2, _ := os.ReadFile(fromTopic); string(b2) != file {
		t.Errorf("from usage.topic:\n%s\nfrom the data dirs:\n%s", b2, file)
	}

	// By (user, client-id), to stdout, without shadow.
	if code, stdout, _ := run("--data-dir", dirs[0], "--since", "4h", "--by", "user,client-id"); code != 0 ||
		!strings.Contains(stdout, "client_id: ingest") || strings.Contains(stdout, "shadow: true") {
		t.Errorf("--by user,client-id: exit %d\n%s", code, stdout)
	}
	// Mistakes.
	for _, args := range [][]string{
		{"--since", "4h"}, // no source
		{"--data-dir", dirs[0], "--usage-topic", "usage"},
		{"--data-dir", dirs[0], "--headroom", "lots"},
		{"--data-dir", dirs[0], "--percentile", "0"},
		{"--data-dir", dirs[0], "--by", "topic"},
	} {
		if code, _, stderr := run(args...); code != 2 || !strings.Contains(stderr, "tollgate quotas suggest:") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}
