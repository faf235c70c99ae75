package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// perfRun runs the command in-process with ctx standing in for SIGINT.
func perfRun(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	start := time.Now()
	code = run(ctx, args, &out, &errb)
	t.Logf("tollgate perf %s: exit %d in %v\nstdout:\n%sstderr:\n%s",
		strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out.String(), errb.String())
	return code, out.String(), errb.String()
}

// perfOK runs `tollgate perf args...` to its end, which must be success,
// and returns its stdout.
func perfOK(t *testing.T, args ...string) string {
	t.Helper()
	code, out, _ := perfRun(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("%s: exit %d", args[0], code)
	}
	return out
}

// jsonLines parses every stdout line as a JSON object; the last must be the
// summary.
func jsonLines(t *testing.T, out string) (progress []map[string]any, sum map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	var all []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		all = append(all, m)
	}
	if len(all) == 0 {
		t.Fatal("no output")
	}
	for _, m := range all[:len(all)-1] {
		if m["type"] != "progress" {
			t.Fatalf("line %v: want type progress", m)
		}
	}
	sum = all[len(all)-1]
	if sum["type"] != "summary" {
		t.Fatalf("last line %v: want type summary", sum)
	}
	return all[:len(all)-1], sum
}

func num(t *testing.T, m map[string]any, k string) float64 {
	t.Helper()
	v, ok := m[k].(float64)
	if !ok {
		t.Fatalf("%s missing or not a number in %v", k, m)
	}
	return v
}

var anonymous = "ANONYMOUS"

// startQuota starts a gateway, with short quota windows, where ANONYMOUS
// has the quota of e.
func startQuota(t *testing.T, e app.QuotaEntry) *testkit.Env {
	e.User = &anonymous
	return testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quota.WindowNum = 3
		c.Quota.WindowSize = 250 * time.Millisecond
		c.Quotas = []app.QuotaEntry{e}
	})
}

// A producer at full speed under a producer_byte_rate quota is told to back
// off: produce-throttle-time-avg and -max are positive, and the rate it
// achieves is about the quota.
func TestProduceThrottledByQuota(t *testing.T) {
	const q = 256 << 10
	limit := float64(q)
	env := startQuota(t, app.QuotaEntry{ProducerByteRate: &limit})
	out := perfOK(t, "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "quota", "--record-size", "1024", "--duration", "4s", "--json")
	progress, sum := jsonLines(t, out)
	avg, mx := num(t, sum, "produce-throttle-time-avg"), num(t, sum, "produce-throttle-time-max")
	if avg <= 0 || mx <= 0 || avg > mx {
		t.Fatalf("produce-throttle-time-avg=%v produce-throttle-time-max=%v: want 0 < avg <= max", avg, mx)
	}
	if num(t, sum, "throttled_responses") == 0 || num(t, sum, "responses") < num(t, sum, "throttled_responses") {
		t.Fatalf("responses %v, throttled %v", sum["responses"], sum["throttled_responses"])
	}
	if _, ok := sum["fetch-throttle-time-avg"]; ok {
		t.Fatal("a produce summary has fetch metrics")
	}
	rate := num(t, sum, "bytes") / num(t, sum, "elapsed_s")
	t.Logf("%.0f B/s under a %d B/s quota", rate, q)
	if rate < 0.3*q || rate > 2*q {
		t.Fatalf("%.0f B/s under a %d B/s quota: want within 0.3x-2x", rate, q)
	}
	var throttledLines int
	for _, p := range progress {
		if num(t, p, "throttle_count") > 0 {
			throttledLines++
			if num(t, p, "throttle_max_ms") <= 0 {
				t.Fatalf("progress %v: throttles without a max", p)
			}
		}
		num(t, p, "latency_avg_ms")
	}
	if len(progress) < 2 || throttledLines == 0 {
		t.Fatalf("%d progress lines, %d with throttles", len(progress), throttledLines)
	}
}

// Without a quota nothing is throttled, and the metrics say so; the human
// output has Kafka's shape.
func TestProduceNoQuota(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	out := perfOK(t, "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "free", "--record-size", "512", "--duration", "1500ms", "--interval", "500ms", "--throughput", "2000")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	progressRe := regexp.MustCompile(`^\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, \d+\.\d ms max latency, throttle 0 \(max 0 ms\)$`)
	sumRe := regexp.MustCompile(`^(\d+) records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, \d+\.\d\d ms max latency, \d+\.\d ms 50th, \d+\.\d ms 95th, \d+\.\d ms 99th, \d+\.\d ms 99\.9th\.$`)
	metricsRe := regexp.MustCompile(`^produce-throttle-time-avg=0\.0 produce-throttle-time-max=0\.0 \(ms, over ([1-9]\d*) produce responses, 0 throttled\)$`)
	if len(lines) < 4 {
		t.Fatalf("want progress lines and a two-line summary, got %q", out)
	}
	for _, l := range lines[:len(lines)-2] {
		if !progressRe.MatchString(l) {
			t.Fatalf("progress line %q does not match %v", l, progressRe)
		}
	}
	m := sumRe.FindStringSubmatch(lines[len(lines)-2])
	if m == nil || m[1] == "0" {
		t.Fatalf("summary %q does not match %v (or sent nothing)", lines[len(lines)-2], sumRe)
	}
	if !metricsRe.MatchString(lines[len(lines)-1]) {
		t.Fatalf("metrics %q do not match %v", lines[len(lines)-1], metricsRe)
	}
}

// A consumer under a consumer_byte_rate quota sees fetch throttles.
func TestConsumeThrottledByQuota(t *testing.T) {
	const q = 256 << 10
	limit := float64(q)
	env := startQuota(t, app.QuotaEntry{ConsumerByteRate: &limit})
	// 3 MiB, unthrottled (the quota is on consuming only).
	perfOK(t, "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "cq", "--record-size", "1024", "--num-records", "3072", "--json")
	out := perfOK(t, "consume", "--bootstrap-server", env.Bootstrap,
		"--topic", "cq", "--from-beginning", "--duration", "3s", "--json")
	progress, sum := jsonLines(t, out)
	if mx := num(t, sum, "fetch-throttle-time-max"); mx <= 0 {
		t.Fatalf("fetch-throttle-time-max=%v: want > 0", mx)
	}
	if avg := num(t, sum, "fetch-throttle-time-avg"); avg <= 0 {
		t.Fatalf("fetch-throttle-time-avg=%v: want > 0", avg)
	}
	if _, ok := sum["produce-throttle-time-avg"]; ok {
		t.Fatal("a consume summary has produce metrics")
	}
	if _, ok := sum["latency_avg_ms"]; ok {
		t.Fatal("a consume summary has latency")
	}
	for _, p := range progress {
		if _, ok := p["latency_avg_ms"]; ok {
			t.Fatalf("a consume progress line has latency: %v", p)
		}
	}
	recs := num(t, sum, "records")
	if recs <= 0 || recs >= 3072 {
		t.Fatalf("consumed %v of 3072 records in 3s at 256 KiB/s: want some, not all", recs)
	}
}

// --num-records is exact for both modes; --json output parses.
func TestNumRecordsExactAndJSON(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	const n = 1234
	out := perfOK(t, "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "exact", "--record-size", "100", "--num-records", "1234", "--throughput", "2000",
		"--interval", "200ms", "--acks", "1", "--compression", "lz4", "--json")
	progress, sum := jsonLines(t, out)
	if got := num(t, sum, "records"); got != n {
		t.Fatalf("sent %v records, want %d", got, n)
	}
	if got := num(t, sum, "bytes"); got != n*100 {
		t.Fatalf("sent %v bytes, want %d", got, n*100)
	}
	if len(progress) < 2 {
		t.Fatalf("%d progress lines in ~0.6s at --interval 200ms", len(progress))
	}
	var sumProgress float64
	for _, p := range progress {
		sumProgress += num(t, p, "records")
	}
	if sumProgress > n {
		t.Fatalf("progress lines count %v records, more than %d", sumProgress, n)
	}
	for _, k := range []string{"latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms", "produce-throttle-time-max", "records_per_sec", "mb_per_sec"} {
		num(t, sum, k)
	}
	if sum["interrupted"] != false || sum["client_id"] != "perf-producer-client" {
		t.Fatalf("summary %v", sum)
	}

	out = perfOK(t, "consume", "--bootstrap-server", env.Bootstrap,
		"--topic", "exact", "--from-beginning", "--num-records", "1000", "--group", "g1", "--client-id", "c1", "--json")
	_, sum = jsonLines(t, out)
	if got := num(t, sum, "records"); got != 1000 {
		t.Fatalf("consumed %v records, want 1000", got)
	}
	if sum["client_id"] != "c1" || num(t, sum, "responses") == 0 {
		t.Fatalf("summary %v", sum)
	}
}

// SIGINT (here: the context) stops the run early and still prints the
// summary.
func TestInterruptPrintsSummary(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	code, out, _ := perfRun(t, ctx, "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "intr", "--record-size", "100", "--throughput", "500", "--json")
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want %d", code, ExitInterrupted)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v to stop", el)
	}
	_, sum := jsonLines(t, out)
	if sum["interrupted"] != true || num(t, sum, "records") == 0 {
		t.Fatalf("summary %v", sum)
	}
}

func TestUnreachableBootstrap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, mode := range []string{"produce", "consume"} {
		start := time.Now()
		code, out, errs := perfRun(t, context.Background(), mode, "--bootstrap-server", addr, "--topic", "x", "--timeout", "3s")
		if code != 1 || !strings.Contains(errs, "cannot connect to bootstrap server "+addr) || out != "" {
			t.Fatalf("%s: exit %d, stderr %q, stdout %q", mode, code, errs, out)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("%s: took %v", mode, el)
		}
	}
}

// A SASL client against a listener without SASL fails before the run
// starts, with a message that points at the security settings. (Tollgate's
// listeners have no SASL yet, so a wrong password cannot be tested here.)
func TestSASLAgainstPlaintextListener(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	props := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(props, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="wrong";
`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out, errs := perfRun(t, context.Background(), "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "x", "--command-config", props, "--timeout", "3s")
	if code != 1 || !strings.Contains(errs, "tollgate perf: cannot connect to bootstrap server") ||
		!strings.Contains(errs, "SASL") || out != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errs, out)
	}
	if el := time.Since(start); el > 6*time.Second {
		t.Fatalf("took %v", el)
	}
}

func TestConsumeMissingTopic(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	code, _, errs := perfRun(t, context.Background(), "consume", "--bootstrap-server", env.Bootstrap, "--topic", "nope")
	if code != 1 || !strings.Contains(errs, "topic nope does not exist") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bench"},
		{"produce"}, // no --topic
		{"produce", "--topic", "t", "--acks", "2"},
		{"produce", "--topic", "t", "--compression", "brotli"},
		{"produce", "--topic", "t", "--num-records", "0"},
		{"produce", "--topic", "t", "--throughput", "0"},
		{"produce", "--topic", "t", "--interval", "0s"},
		{"consume", "--topic", "t", "--record-size", "10"}, // produce-only flag
		{"produce", "--topic", "t", "--group", "g"},        // consume-only flag
		{"produce", "--topic", "t", "extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
	cfg, code := parseFlags("produce", []string{"--topic", "t"}, &bytes.Buffer{})
	if code != -1 || cfg.duration != 30*time.Second || cfg.numRecords != 0 || cfg.throughput != -1 {
		t.Fatalf("defaults: %+v %d", cfg, code)
	}
	cfg, _ = parseFlags("produce", []string{"--topic", "t", "--num-records", "5"}, &bytes.Buffer{})
	if cfg.duration != 0 || cfg.numRecords != 5 {
		t.Fatalf("--num-records alone is the only bound: %+v", cfg)
	}
}

// A consumer that gets no record for --timeout stops, so --num-records alone
// is bounded in time.
func TestConsumeIdleTimeout(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	if code, _, _ := perfRun(t, context.Background(), "produce", "--bootstrap-server", env.Bootstrap,
		"--topic", "idle", "--num-records", "10"); code != 0 {
		t.Fatalf("produce: exit %d", code)
	}
	start := time.Now()
	// At the latest offset: nothing more will come.
	code, out, errs := perfRun(t, context.Background(), "consume", "--bootstrap-server", env.Bootstrap,
		"--topic", "idle", "--num-records", "10", "--timeout", "1s", "--json")
	if code != 0 || !strings.Contains(errs, "no record for 1s (--timeout); stopping after 0 of 10 records") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("took %v", el)
	}
	if _, sum := jsonLines(t, out); num(t, sum, "records") != 0 {
		t.Fatalf("summary %v", sum)
	}
}
