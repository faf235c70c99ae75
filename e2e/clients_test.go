package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Client families through the gateway: franz-go, kcat (librdkafka), the
// confluent-kafka Python client and kafkajs; and the config
// scripts/kafka-dev.sh prints for a newcomer's first client. sarama,
// kafka-go and the Java clients have files of their own.

// Produce and consume with a consumer group through the gateway across 3
// brokers: every record arrives, in order per partition, and the client
// only ever dials gateway addresses.
func TestFranzGoProduceConsumeGroup(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		franzGoProduceConsumeGroup(t, env, up.Topic(t, "orders"), up.GroupID(t, "g1"))
	})
}

func franzGoProduceConsumeGroup(t *testing.T, env *testkit.Env, topic, group string) {
	ctx := ctxT(t, 60*time.Second)
	dialer := &testkit.Dialer{}
	const partitions, perPartition = 6, 200

	adm := kadm.NewClient(newClient(t, env, dialer))
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	// Spread leadership over all three brokers.
	env.SpreadLeaders(t, topic, partitions)

	prod := newClient(t, env, dialer, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	cons := newClient(t, env, dialer, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int{}
	total := 0
	for total < partitions*perPartition {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, partitions*perPartition, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("%d-%d", r.Partition, next[r.Partition])
			if string(r.Value) != want {
				t.Fatalf("partition %d: got %q, want %q", r.Partition, r.Value, want)
			}
			next[r.Partition]++
			total++
		})
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.At != perPartition {
			t.Errorf("committed offset of partition %d = %+v, want %d", p, o, perPartition)
		}
	}

	dialed := dialer.Addrs()
	checkDialsGatewayOnly(t, "the client", env, dialed)
	for _, up := range env.UpstreamAddrs() {
		for _, a := range dialed {
			if a == up {
				t.Errorf("client dialed upstream broker %s directly", up)
			}
		}
	}
}

// kcatPath finds kcat. scripts/test.sh installs it, so its absence is a
// broken environment, not a reason to skip.
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found in PATH (%v): install it (Debian package kcat; scripts/test.sh does) to run the librdkafka end-to-end test", err)
	}
	return p
}

// runKcat runs kcat with args and stdin, bounded by timeout, and returns its
// stdout; any failure is fatal and shows stderr.
func runKcat(t *testing.T, ctx context.Context, timeout time.Duration, stdin string, args ...string) string {
	t.Helper()
	kcatPath(t)
	stdout, stderr, d, err := kcatTry(ctx, timeout, stdin, args...)
	if err != nil {
		t.Fatalf("kcat %s: %v after %v (limit %v, test context: %v)\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), err, d.Round(time.Millisecond), timeout, ctx.Err(), stdout, stderr)
	}
	return stdout
}

// kcatTry runs kcat bounded by timeout and returns its output and error.
func kcatTry(ctx context.Context, timeout time.Duration, stdin string, args ...string) (stdout, stderr string, d time.Duration, err error) {
	path, err := exec.LookPath("kcat")
	if err != nil {
		return "", "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	start := time.Now()
	err = cmd.Run()
	return o.String(), e.String(), time.Since(start), err
}

// kcatMetadata is the part of `kcat -L -J` the test reads.
type kcatMetadata struct {
	OriginatingBroker struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"originating_broker"`
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
		} `json:"partitions"`
	} `json:"topics"`
}

// kcatListing parses the output of kcat -L -J and checks what every
// listing shows: three brokers, all at gateway addresses, and only topic,
// without error, with its partitions.
func kcatListing(t *testing.T, env *testkit.Env, out, topic string, partitions int) kcatMetadata {
	t.Helper()
	var md kcatMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("parse kcat -L -J output: %v\n%s", err, out)
	}
	gw := env.GatewayAddrs()
	if len(md.Brokers) != 3 {
		t.Errorf("kcat -L: %d brokers, want 3:\n%s", len(md.Brokers), out)
	}
	for _, b := range md.Brokers {
		if !gw[b.Name] {
			t.Errorf("kcat -L: broker %d at %s is not a gateway address (gateway: %v)", b.ID, b.Name, keys(gw))
		}
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic || md.Topics[0].Error != "" || len(md.Topics[0].Partitions) != partitions {
		t.Fatalf("kcat -L: topics %+v, want %s with %d partitions", md.Topics, topic, partitions)
	}
	return md
}

// kcat (librdkafka) through the gateway: metadata lists the three brokers at
// gateway addresses and the topic's leaders; records produced with keys
// (lz4-compressed, acks=all) read back in order per key, both with a
// simple consumer from the beginning and with a balanced consumer group; on
// kfake and on the real Kafka.
func TestKcat(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		testKcat(t, env, up.Topic(t, "kcat-orders"), up.GroupID(t, "kcat-g1"))
	})
}

func testKcat(t *testing.T, env *testkit.Env, topic, group string) {
	ctx := ctxT(t, 90*time.Second)
	const partitions, perKey, nkeys = 3, 20, 5
	upInfo := upstreamMetadata(t, env)

	adm := kadm.NewClient(newClient(t, env, nil))
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	upLeaders := env.SpreadLeaders(t, topic, partitions)
	env.WaitTopic(t, topic, int32(partitions))

	out := runKcat(t, ctx, 20*time.Second, "", "-b", env.Bootstrap, "-L", "-J", "-t", topic, "-m", "10")
	md := kcatListing(t, env, out, topic, partitions)
	gw := env.GatewayAddrs()
	ids := map[int32]bool{}
	for _, b := range md.Brokers {
		ids[b.ID] = true
	}
	for id := range upInfo.Brokers {
		if !ids[id] {
			t.Errorf("kcat -L: broker ids %v, want the upstream's %v", ids, upInfo.Brokers)
		}
	}
	if len(ids) != 3 {
		t.Errorf("kcat -L: broker ids %v, want 3", ids)
	}
	if !ids[md.ControllerID] {
		t.Errorf("kcat -L: controller %d is not a listed broker", md.ControllerID)
	}
	// originating_broker.name is "host:port/id".
	if ob, _, _ := strings.Cut(md.OriginatingBroker.Name, "/"); !gw[ob] {
		t.Errorf("kcat -L: originating broker %q is not a gateway address", md.OriginatingBroker.Name)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != upLeaders[p.Partition] {
			t.Errorf("kcat -L: %s/%d led by %d, want the upstream's %d", topic, p.Partition, p.Leader, upLeaders[p.Partition])
		}
	}

	// Produce keyed records; a key always lands on one partition, so each
	// key's values must come back in order.
	var in strings.Builder
	for i := 0; i < perKey; i++ {
		for k := 0; k < nkeys; k++ {
			fmt.Fprintf(&in, "key%d:v%d-%d\n", k, k, i)
		}
	}
	runKcat(t, ctx, 20*time.Second, in.String(), "-P", "-b", env.Bootstrap, "-t", topic, "-K", ":",
		"-z", "lz4", "-X", "acks=all", "-X", "linger.ms=5")

	const total = perKey * nkeys
	hw := int64(0)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) { hw += o.Offset })
	if hw != total {
		t.Fatalf("after kcat -P the topic holds %d records, want %d", hw, total)
	}

	check := func(name, out string) {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != total {
			t.Fatalf("%s: %d lines, want %d:\n%s", name, len(lines), total, out)
		}
		next := map[string]int{}
		part := map[string]string{}
		parts := map[string]bool{}
		for _, l := range lines {
			f := strings.Fields(l) // key value partition offset
			if len(f) != 4 {
				t.Fatalf("%s: malformed line %q", name, l)
			}
			k, v, p := f[0], f[1], f[2]
			kn, err := strconv.Atoi(strings.TrimPrefix(k, "key"))
			if err != nil || kn < 0 || kn >= nkeys {
				t.Fatalf("%s: unexpected key in %q", name, l)
			}
			if want := fmt.Sprintf("v%d-%d", kn, next[k]); v != want {
				t.Fatalf("%s: key %s: got %s, want %s (line %q)", name, k, v, want, l)
			}
			if pp, ok := part[k]; ok && pp != p {
				t.Fatalf("%s: key %s on partitions %s and %s", name, k, pp, p)
			}
			part[k] = p
			parts[p] = true
			next[k]++
		}
		for k := 0; k < nkeys; k++ {
			if n := next["key"+strconv.Itoa(k)]; n != perKey {
				t.Errorf("%s: key%d: %d records, want %d", name, k, n, perKey)
			}
		}
		if len(parts) < 2 {
			t.Errorf("%s: all keys on partitions %v; want them spread", name, parts)
		}
	}

	out = runKcat(t, ctx, 20*time.Second, "", "-C", "-b", env.Bootstrap, "-t", topic, "-o", "beginning",
		"-c", strconv.Itoa(total), "-e", "-f", "%k %s %p %o\n")
	check("kcat -C", out)

	// A balanced consumer group (JoinGroup, SyncGroup, OffsetFetch,
	// Heartbeat, LeaveGroup through the gateway's coordinator port).
	out = runKcat(t, ctx, 30*time.Second, "", "-b", env.Bootstrap, "-G", group, "-o", "beginning",
		"-c", strconv.Itoa(total), "-f", "%k %s %p %o\n",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		"-X", "auto.commit.interval.ms=100", topic)
	check("kcat -G", out)
	groups, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("describe group %s: %v", group, err)
	}
	g, ok := groups[group]
	if !ok || g.Err != nil || g.ProtocolType != "consumer" {
		t.Errorf("kcat group after kcat -G: %+v", g)
	}
	if g.State != "Empty" || len(g.Members) != 0 {
		t.Errorf("kcat group after kcat -G exited: state %s, %d members; want Empty, 0", g.State, len(g.Members))
	}
	// kcat commits what it consumed when it closes.
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	var committed []string
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := offs.Lookup(topic, o.Partition)
		if !ok || c.At != o.Offset {
			t.Errorf("kcat -G committed %+v for partition %d, want %d", c, o.Partition, o.Offset)
		}
		committed = append(committed, fmt.Sprintf("%d:%d", o.Partition, c.At))
	})
	sort.Strings(committed)
	t.Logf("kcat -G committed %v", committed)
}

// Two more client families through the gateway, on both upstreams: the
// confluent-kafka Python client (PyPI's wheel, with the librdkafka it
// bundles) and kafkajs (npm, pure JavaScript). Each produces 300 records
// (acks=all, idempotent), reads them back in a consumer group, and names
// only gateway addresses as brokers. scripts/test.sh installs both into
// the test cache (TOLLGATE_PYTHON, TOLLGATE_KAFKAJS) and sets
// TOLLGATE_REQUIRE_CLIENTS=1, which makes a missing one a failure.
func TestMoreClientFamilies(t *testing.T) {
	t.Parallel()
	families := []struct {
		name, env, how string
		cmd            func(ctx context.Context, dir string, args ...string) *exec.Cmd
	}{
		{"confluent-kafka-python", "TOLLGATE_PYTHON", "a python with confluent-kafka installed (scripts/test.sh makes one)",
			func(ctx context.Context, py string, args ...string) *exec.Cmd {
				return exec.CommandContext(ctx, py, append([]string{"testdata/python/produce_consume.py"}, args...)...)
			}},
		{"kafkajs", "TOLLGATE_KAFKAJS", "a directory with node_modules/kafkajs (scripts/test.sh makes one)",
			func(ctx context.Context, dir string, args ...string) *exec.Cmd {
				cmd := exec.CommandContext(ctx, "node", append([]string{"testdata/kafkajs/produce_consume.js"}, args...)...)
				cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
				return cmd
			}},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tool := os.Getenv(f.env)
			if tool == "" {
				if os.Getenv("TOLLGATE_REQUIRE_CLIENTS") == "1" {
					t.Fatalf("%s is not set: it names %s", f.env, f.how)
				}
				t.Skipf("%s is not set (%s); scripts/test.sh sets it", f.env, f.how)
			}
			testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
				env := up.Start(t, app.Options{})
				ctx := ctxT(t, 2*time.Minute)
				topic, group := up.Topic(t, "clients"), up.GroupID(t, "clients")
				if _, err := kadm.NewClient(newClient(t, env, nil)).CreateTopic(ctx, 3, -1, nil, topic); err != nil {
					t.Fatal(err)
				}
				// Every broker agrees on the new topic's leaders before
				// the first send: once, on Kafka 3.9, kafkajs's
				// idempotent producer wrote part of its first batch
				// twice to a topic created a moment before (records at
				// two offsets each; nothing in Tollgate's log).
				env.WaitTopic(t, topic, 3)
				runClientFamily(t, env, f.cmd(ctx, tool, env.Bootstrap, topic, group, "300"), 300)
			})
		})
	}
}

// clientReport is what the scripts print.
type clientReport struct {
	Version, Librdkafka string
	Brokers             []string
	Acked, Consumed     [][]any
	Errors              []string
	Unflushed           int
}

func runClientFamily(t *testing.T, env *testkit.Env, cmd *exec.Cmd, n int) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep clientReport
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil {
		t.Fatalf("%s: %v %v\nstdout: %s\nstderr: %s", cmd.Args[1], err, jerr, out, stderr.String())
	}
	if len(rep.Errors) > 0 || rep.Unflushed > 0 {
		t.Fatalf("client errors %v (%d unflushed)\nstderr: %s", rep.Errors, rep.Unflushed, stderr.String())
	}
	gw := env.GatewayAddrs()
	if len(rep.Brokers) != 3 {
		t.Errorf("the client's metadata names brokers %v, want 3", rep.Brokers)
	}
	for _, b := range rep.Brokers {
		if !gw[b] {
			t.Errorf("the client's metadata names %s, not a gateway address (gateway: %v)", b, keys(gw))
		}
	}
	seen := map[string]int{}
	last := map[float64]float64{}
	for _, r := range rep.Consumed {
		p, o, v := r[0].(float64), r[1].(float64), r[2].(string)
		if prev, ok := last[p]; ok && o <= prev {
			t.Errorf("partition %v: offset %v after %v", p, o, prev)
		}
		last[p] = o
		seen[v]++
	}
	prefix := "py-"
	if strings.Contains(cmd.Args[1], "kafkajs") {
		prefix = "js-"
	}
	for i := range n {
		if v := fmt.Sprintf("%s%d", prefix, i); seen[v] != 1 {
			t.Errorf("record %s consumed %d times, want once", v, seen[v])
		}
	}
	t.Logf("%s (version %s, librdkafka %q): %d acknowledgements, %d records consumed, brokers %v", cmd.Args[1], rep.Version, rep.Librdkafka, len(rep.Acked), len(rep.Consumed), rep.Brokers)
}

// The config scripts/kafka-dev.sh prints for a newcomer is one Tollgate
// loads as it is and that fronts the real cluster: each of its three
// upstream blocks (PLAINTEXT, and the SSL and SASL_PLAINTEXT ones in its
// comments) validates, and a client produces and consumes through a
// gateway started from it. The kfake row checks that the plain config
// needs nothing but its listener (no upstream: the embedded cluster).
func TestKafkaDevConfig(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		text := "listeners:\n  - name: PLAINTEXT\n    bootstrap: 127.0.0.1:9092\n"
		if up.Real() {
			text = up.Kafka.TollgateConfig()
		}
		variants := []string{text}
		for _, l := range strings.Split(text, "\n") {
			if alt, ok := strings.CutPrefix(l, "#   upstream: "); ok {
				variants = append(variants, strings.Replace(text, "upstream:\n  bootstrap:", "upstream: "+alt+"\nunused_bootstrap:", 1))
			}
		}
		if up.Real() && len(variants) != 3 {
			t.Fatalf("the printed config shows %d upstream blocks, want PLAINTEXT, SSL and SASL_PLAINTEXT:\n%s", len(variants), text)
		}
		for i, v := range variants {
			// The commented alternatives replace the upstream block whole.
			v = cutUnused(v)
			p := filepath.Join(t.TempDir(), "tollgate.yaml")
			if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := app.Load(p)
			if err != nil {
				t.Fatalf("variant %d does not load: %v\n%s", i, err, v)
			}
			env := up.Start(t, app.Options{}, func(c *app.Config) {
				c.Upstream = cfg.Upstream
				c.Upstream.MetadataRefresh = 200 * time.Millisecond
			})
			ctx := ctxT(t, 60*time.Second)
			topic := up.Topic(t, "kafkadev")
			cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
				t.Fatalf("variant %d: produce through the gateway: %v\n%s", i, err, v)
			}
		}
	})
}

// cutUnused drops the PLAINTEXT bootstrap line a variant replaced.
func cutUnused(v string) string {
	var out []string
	for _, l := range strings.Split(v, "\n") {
		if !strings.HasPrefix(l, "unused_bootstrap:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
