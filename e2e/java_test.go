package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// The Java client and Kafka's own command-line tools through the gateway,
// on kfake and on the real Kafka: every JVM runs on the Kafka release's
// jars (kafka.Tool; the kfake row uses the same cached classpath), and
// every connection its Kafka clients opened — Kafka's NetworkClient logs
// each one it initiates, at DEBUG, to a file of the run's own — went to a
// gateway address, never to an upstream broker.

// javaVersion is the Kafka release whose jars the upstream's row runs:
// the real cluster's, or the default line for kfake.
func javaVersion(up *testkit.Upstream) string {
	if up.Real() {
		return up.Kafka.Version
	}
	return kafka.DefaultVersion()
}

// javaLog4j is javaLog4j2 for Kafka 3.x's reload4j.
func javaLog4j(dials string) string {
	return `log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.dials=org.apache.log4j.FileAppender
log4j.appender.dials.File=` + dials + `
log4j.appender.dials.layout=org.apache.log4j.PatternLayout
log4j.appender.dials.layout.ConversionPattern=%m%n
log4j.logger.org.apache.kafka.clients.NetworkClient=DEBUG, dials
log4j.additivity.org.apache.kafka.clients.NetworkClient=false
`
}

// javaLog4j2 routes a JVM's log: NetworkClient's DEBUG lines to dials
// (read by javaDials), everything else at WARN to stderr, so that stdout
// is the program's own.
func javaLog4j2(dials string) string {
	return `status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
appender.dials.type = File
appender.dials.name = dials
appender.dials.fileName = ` + dials + `
appender.dials.layout.type = PatternLayout
appender.dials.layout.pattern = %m%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
logger.net.name = org.apache.kafka.clients.NetworkClient
logger.net.level = DEBUG
logger.net.additivity = false
logger.net.appenderRef.dials.ref = dials
`
}

// javaRun is one JVM's run: its output and the addresses its Kafka
// clients dialed.
type javaRun struct {
	Stdout, Stderr string
	Dials          []string
}

// runJava runs main (a class of the jars, or a .java source file) with
// args and stdin in a directory of its own, bounded by timeout; a failure
// (exit status, timeout) is fatal and shows the output.
func runJava(t *testing.T, up *testkit.Upstream, timeout time.Duration, stdin, main string, args ...string) javaRun {
	t.Helper()
	dir := t.TempDir()
	dials := filepath.Join(dir, "dials.log")
	if err := os.WriteFile(filepath.Join(dir, kafka.ToolLog4j2), []byte(javaLog4j2(dials)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, kafka.ToolLog4j), []byte(javaLog4j(dials)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, err := kafka.Tool(javaVersion(up), dir, main, args...)
	if err != nil {
		t.Fatalf("java: %v", err)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("java %s: %v", main, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		cmd.Process.Kill()
		<-done
		err = fmt.Errorf("killed after %v", timeout)
	}
	name := filepath.Base(main)
	if err != nil {
		t.Fatalf("java %s %s: %v after %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err,
			time.Since(start).Round(time.Millisecond), tail(o.String(), 40), tail(e.String(), 60))
	}
	t.Logf("java %s %s: %v", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return javaRun{Stdout: o.String(), Stderr: e.String(), Dials: javaDials(t, dials)}
}

// initiating is NetworkClient's line for each connection it opens:
// "Initiating connection to node <host>:<port> (id: <id> rack: ...) using
// address <name>/<ip>".
var initiating = regexp.MustCompile(`Initiating connection to node (\S+):(\d+) \(id: (-?\d+)[^)]*\) using address (\S*)$`)

// javaDials reads the addresses (ip:port) a JVM's Kafka clients dialed.
func javaDials(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		m := initiating.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		host := m[1]
		if _, ip, ok := strings.Cut(m[4], "/"); ok && ip != "" {
			host = ip // the address actually dialed, resolved
		}
		out = append(out, host+":"+m[2])
	}
	return out
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkJavaDials checks that the JVMs dialed the bootstrap and the three
// broker ports of the gateway and nothing else — no upstream broker.
func checkJavaDials(t *testing.T, who string, env *testkit.Env, dials []string) {
	t.Helper()
	distinct := map[string]bool{}
	for _, d := range dials {
		distinct[d] = true
	}
	list := make([]string, 0, len(distinct))
	for d := range distinct {
		list = append(list, d)
	}
	checkDialsGatewayOnly(t, who, env, list)
	checkNoUpstreamDials(t, who, env, list)
	if !distinct[env.Bootstrap] {
		t.Errorf("%s never dialed the gateway's bootstrap %s: %v", who, env.Bootstrap, list)
	}
}

// The Java client (testdata/java/ProduceConsume.java) produces 6×200
// records with a KafkaProducer (acks=all, idempotence on) to partitions led
// by all three brokers and reads them back with a KafkaConsumer in a
// consumer group, with the classic group protocol and with KIP-848's
// (Kafka 4's): every record arrives once, in order per partition, the
// group's offsets are committed, and the clients dialed only the gateway.
func TestJavaClient(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		protocols := []string{"classic"}
		if !strings.HasPrefix(javaVersion(up), "3.") {
			// KIP-848's protocol is generally available from Kafka 4.0.
			protocols = append(protocols, "consumer")
		}
		for _, protocol := range protocols {
			t.Run(protocol, func(t *testing.T) {
				env := up.Start(t, app.Options{})
				javaProduceConsume(t, env, up, up.Topic(t, "java-orders"), up.GroupID(t, "java-g1"), protocol)
			})
		}
	})
}

func javaProduceConsume(t *testing.T, env *testkit.Env, up *testkit.Upstream, topic, group, protocol string) {
	ctx := ctxT(t, 3*time.Minute)
	const partitions, perPartition = 6, 200
	adm := kadm.NewClient(newClient(t, env, nil))
	if _, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	env.SpreadLeaders(t, topic, partitions)
	env.WaitTopic(t, topic, int32(partitions))

	run := runJava(t, up, 150*time.Second, "", filepath.Join("testdata", "java", "ProduceConsume.java"),
		env.Bootstrap, topic, group, strconv.Itoa(partitions), strconv.Itoa(perPartition), protocol)

	lines := strings.Split(strings.TrimSuffix(run.Stdout, "\n"), "\n")
	next := map[int]int{}
	committed := map[int]int64{}
	records, done := 0, false
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case done:
			t.Fatalf("output after DONE: %q", l)
		case len(f) == 5 && f[0] == "RECORD":
			p, err1 := strconv.Atoi(f[1])
			off, err2 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil || p < 0 || p >= partitions {
				t.Fatalf("malformed record line %q", l)
			}
			// In order per partition, each record once: partition p's
			// records are offsets 0, 1, ... with values p-0, p-1, ...
			wantKey, wantValue := "k"+strconv.Itoa(p), fmt.Sprintf("%d-%d", p, next[p])
			if off != next[p] || f[3] != wantKey || f[4] != wantValue {
				t.Fatalf("partition %d: got %s=%s at offset %d, want %s=%s at offset %d", p, f[3], f[4], off, wantKey, wantValue, next[p])
			}
			next[p]++
			records++
		case len(f) == 3 && f[0] == "COMMITTED":
			p, err1 := strconv.Atoi(f[1])
			off, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("malformed committed line %q", l)
			}
			committed[p] = off
		case l == "DONE":
			done = true
		default:
			t.Fatalf("unexpected output line %q\nstderr:\n%s", l, tail(run.Stderr, 40))
		}
	}
	if !done {
		t.Fatalf("no DONE line:\n%s", tail(run.Stdout, 20))
	}
	if records != partitions*perPartition {
		t.Errorf("consumed %d records, want %d", records, partitions*perPartition)
	}
	for p := range partitions {
		if next[p] != perPartition {
			t.Errorf("partition %d: consumed %d records, want %d", p, next[p], perPartition)
		}
		if committed[p] != perPartition {
			t.Errorf("the consumer sees partition %d committed at %d, want %d", p, committed[p], perPartition)
		}
	}

	// The broker's view, asked through the gateway with franz-go.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != perPartition {
			t.Errorf("partition %d ends at %d (%v), want %d", o.Partition, o.Offset, o.Err, perPartition)
		}
	})
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	for p := range int32(partitions) {
		if o, ok := offs.Lookup(topic, p); !ok || o.At != perPartition {
			t.Errorf("committed offset of partition %d = %+v, want %d", p, o, perPartition)
		}
	}
	checkJavaDials(t, "the Java client", env, run.Dials)
}

// javaTools are the class names and options of Kafka's tools in a
// release: the console producer moved from kafka.tools to
// org.apache.kafka.tools in 4.0, which also renamed the property options.
type javaTools struct {
	consoleProducer              string
	readerProperty, producerProp string
	formatterProperty            string
}

func javaToolsOf(version string) javaTools {
	if strings.HasPrefix(version, "3.") {
		return javaTools{"kafka.tools.ConsoleProducer", "--property", "--producer-property", "--property"}
	}
	return javaTools{"org.apache.kafka.tools.ConsoleProducer", "--reader-property", "--command-property", "--formatter-property"}
}

const (
	topicCommand         = "org.apache.kafka.tools.TopicCommand"
	consoleConsumer      = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	consumerGroupCommand = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
)

// Kafka's own tools through the gateway: kafka-topics creates, describes
// (the upstream's leaders and replicas) and lists a topic; the console
// producer writes keyed records with acks=all; the console consumer reads
// them all back in a consumer group, in order per key; kafka-consumer-groups
// lists the group and describes its committed offsets (no lag). Every
// connection of every tool went to the gateway.
func TestJavaKafkaTools(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		javaKafkaTools(t, env, up, up.Topic(t, "java-tools"), up.GroupID(t, "java-tools-g"))
	})
}

func javaKafkaTools(t *testing.T, env *testkit.Env, up *testkit.Upstream, topic, group string) {
	ctx := ctxT(t, 4*time.Minute)
	const partitions, perKey, nkeys = 3, 20, 6
	const total = perKey * nkeys
	tools := javaToolsOf(javaVersion(up))
	upInfo := upstreamMetadata(t, env)
	boot := env.Bootstrap
	var dials []string
	var stderr string
	run := func(stdin, main string, args ...string) string {
		t.Helper()
		r := runJava(t, up, 90*time.Second, stdin, main, append([]string{"--bootstrap-server", boot}, args...)...)
		dials = append(dials, r.Dials...)
		stderr = r.Stderr
		return r.Stdout
	}

	// kafka-topics --create, with the broker's default replication factor,
	// on the real Kafka. kfake's CreateTopics answer (v5+) is one Kafka's
	// admin client cannot read: a topic created without configs has a null
	// config list ("configs is null"), one with configs has each config's
	// source unset, -1 ("id should be positive"), where a real broker lists
	// the topic's configs with their sources. The embedded cluster is
	// kfake's (internal/devcluster), so there the topic is created with
	// franz-go, through the gateway as well.
	if up.Real() {
		out := run("", topicCommand, "--create", "--topic", topic, "--partitions", strconv.Itoa(partitions))
		if want := "Created topic " + topic + "."; strings.TrimSpace(out) != want {
			t.Fatalf("kafka-topics --create: %q, want %q", out, want)
		}
	} else if _, err := kadm.NewClient(newClient(t, env, nil)).CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	upLeaders := env.SpreadLeaders(t, topic, partitions)
	env.WaitTopic(t, topic, int32(partitions))

	// kafka-topics --describe: the upstream's partitions, leaders and
	// replicas (3: the default replication factor of both upstreams). On
	// kfake, franz-go's Metadata through the gateway: Kafka's admin client
	// describes with DescribeTopicPartitions (KIP-966), and kfake answers
	// it with null eligible-leader-replica lists, which the client cannot
	// read (a real broker sends empty ones).
	type layout struct {
		leader   int32
		replicas []int32
	}
	described := map[int32]layout{}
	if up.Real() {
		out := run("", topicCommand, "--describe", "--topic", topic)
		header := false
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			fs := describeFields(l)
			if fs["Topic"] != topic {
				t.Fatalf("kafka-topics --describe: line %q is not about %s:\n%s", l, topic, out)
			}
			if _, ok := fs["Partition"]; !ok {
				header = true
				if fs["PartitionCount"] != strconv.Itoa(partitions) || fs["ReplicationFactor"] != "3" {
					t.Errorf("kafka-topics --describe: %q, want %d partitions, replication factor 3", l, partitions)
				}
				continue
			}
			p, err1 := strconv.Atoi(fs["Partition"])
			leader, err2 := strconv.Atoi(fs["Leader"])
			if _, dup := described[int32(p)]; err1 != nil || err2 != nil || dup {
				t.Fatalf("kafka-topics --describe: malformed or repeated partition line %q", l)
			}
			lo := layout{leader: int32(leader)}
			for _, r := range strings.Split(fs["Replicas"], ",") {
				id, err := strconv.Atoi(r)
				if err != nil {
					t.Fatalf("kafka-topics --describe: partition %d: replicas %q", p, fs["Replicas"])
				}
				lo.replicas = append(lo.replicas, int32(id))
			}
			described[int32(p)] = lo
		}
		if !header {
			t.Errorf("kafka-topics --describe: no topic line:\n%s", out)
		}
	} else {
		md, err := kadm.NewClient(newClient(t, env, nil)).Metadata(ctx, topic)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		for _, p := range md.Topics[topic].Partitions {
			described[p.Partition] = layout{leader: p.Leader, replicas: p.Replicas}
		}
	}
	if len(described) != partitions {
		t.Errorf("described partitions %v, want %d", described, partitions)
	}
	for p, lo := range described {
		if lo.leader != upLeaders[p] {
			t.Errorf("described partition %d led by %d, want the upstream's %d", p, lo.leader, upLeaders[p])
		}
		leaderListed := false
		for _, id := range lo.replicas {
			if !upInfo.Brokers[id] {
				t.Errorf("described partition %d: replica %d is not an upstream broker (%v)", p, id, upInfo.Brokers)
			}
			leaderListed = leaderListed || id == lo.leader
		}
		if len(lo.replicas) != 3 || !leaderListed {
			t.Errorf("described partition %d: replicas %v, want 3 with the leader %d", p, lo.replicas, lo.leader)
		}
	}

	// kafka-topics --list.
	out := run("", topicCommand, "--list")
	if !containsLine(out, topic) {
		t.Errorf("kafka-topics --list lacks %s:\n%s", topic, out)
	}

	// The console producer: keyed records, acks=all.
	var in strings.Builder
	for i := range perKey {
		for k := range nkeys {
			fmt.Fprintf(&in, "key%d:v%d-%d\n", k, k, i)
		}
	}
	run(in.String(), tools.consoleProducer, "--topic", topic,
		tools.readerProperty, "parse.key=true", tools.readerProperty, "key.separator=:",
		tools.producerProp, "acks=all", tools.producerProp, "linger.ms=5")
	ends, err := kadm.NewClient(newClient(t, env, nil)).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	endOf := map[int32]int64{}
	sum := int64(0)
	ends.Each(func(o kadm.ListedOffset) {
		endOf[o.Partition] = o.Offset
		sum += o.Offset
	})
	if sum != total {
		t.Fatalf("after the console producer the topic holds %d records (%v), want %d", sum, endOf, total)
	}

	// The console consumer, in a group, from the beginning: each key's
	// records in order, on one partition, at consecutive offsets.
	out = run("", consoleConsumer, "--topic", topic, "--group", group, "--from-beginning",
		"--max-messages", strconv.Itoa(total), "--timeout-ms", "60000",
		tools.formatterProperty, "print.key=true", tools.formatterProperty, "print.partition=true",
		tools.formatterProperty, "print.offset=true")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != total {
		t.Fatalf("console consumer: %d lines, want %d:\n%s", len(lines), total, out)
	}
	nextVal := map[string]int{}
	nextOff := map[int32]int64{}
	partOf := map[string]int32{}
	for _, l := range lines {
		var p int32
		var off int64
		var k, v string
		if n, err := fmt.Sscanf(l, "Partition:%d\tOffset:%d\t%s\t%s", &p, &off, &k, &v); n != 4 || err != nil {
			t.Fatalf("console consumer: malformed line %q (%v)", l, err)
		}
		kn, err := strconv.Atoi(strings.TrimPrefix(k, "key"))
		if err != nil || kn < 0 || kn >= nkeys {
			t.Fatalf("console consumer: unexpected key in %q", l)
		}
		if want := fmt.Sprintf("v%d-%d", kn, nextVal[k]); v != want {
			t.Fatalf("console consumer: key %s: got %s, want %s (line %q)", k, v, want, l)
		}
		if pp, ok := partOf[k]; ok && pp != p {
			t.Fatalf("console consumer: key %s on partitions %d and %d", k, pp, p)
		}
		if off != nextOff[p] {
			t.Fatalf("console consumer: partition %d: offset %d, want %d (line %q)", p, off, nextOff[p], l)
		}
		partOf[k] = p
		nextVal[k]++
		nextOff[p]++
	}
	for p, end := range endOf {
		if nextOff[p] != end {
			t.Errorf("console consumer: partition %d: read to %d, want its end %d", p, nextOff[p], end)
		}
	}

	// kafka-consumer-groups --list and --describe: the group committed
	// every partition's end (the console consumer commits on close), and
	// has no members left. On kfake, franz-go's kadm through the gateway:
	// the tool describes the topic with DescribeTopicPartitions (kfake's
	// null eligible-leader-replica lists again), and kfake's ListGroups
	// answer does not list the group to it.
	if up.Real() {
		out = run("", consumerGroupCommand, "--list")
		if !containsLine(out, group) {
			t.Errorf("kafka-consumer-groups --list lacks %s:\n%s", group, out)
		}
		out = run("", consumerGroupCommand, "--describe", "--group", group)
		// (The note goes to stderr, the table to stdout.)
		if !strings.Contains(out+stderr, "Consumer group '"+group+"' has no active members.") {
			t.Errorf("kafka-consumer-groups --describe: the group should have no members left:\n%s\nstderr:\n%s", out, stderr)
		}
		rows := map[int32]bool{}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) < 6 || f[0] != group {
				continue
			}
			p, err := strconv.Atoi(f[2])
			if f[1] != topic || err != nil || rows[int32(p)] {
				t.Errorf("kafka-consumer-groups --describe: unexpected row %q", l)
				continue
			}
			rows[int32(p)] = true
			end := strconv.FormatInt(endOf[int32(p)], 10)
			if f[3] != end || f[4] != end || f[5] != "0" {
				t.Errorf("kafka-consumer-groups --describe: partition %d: current %s, log end %s, lag %s; want %s, %s, 0", p, f[3], f[4], f[5], end, end)
			}
		}
		if len(rows) != partitions {
			t.Errorf("kafka-consumer-groups --describe: rows for partitions %v, want %d:\n%s", rows, partitions, out)
		}
	} else {
		adm := kadm.NewClient(newClient(t, env, nil))
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("list groups: %v", err)
		}
		if _, ok := listed[group]; !ok {
			t.Errorf("list groups lacks %s: %v", group, listed.Groups())
		}
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatalf("describe group: %v", err)
		}
		if g := dg[group]; g.Err != nil || len(g.Members) != 0 {
			t.Errorf("group %s: %+v, want no members left", group, g)
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		for p, end := range endOf {
			if o, ok := offs.Lookup(topic, p); !ok || o.At != end {
				t.Errorf("group %s: partition %d committed %+v, want %d", group, p, o, end)
			}
		}
	}

	checkJavaDials(t, "Kafka's tools", env, dials)
	distinct := map[string]bool{}
	for _, d := range dials {
		distinct[d] = true
	}
	sorted := make([]string, 0, len(distinct))
	for d := range distinct {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	t.Logf("the tools dialed %v", sorted)
}

// describeFields parses a kafka-topics --describe line ("Topic: t\tTopicId:
// ...\tPartitionCount: 3 ..." or "\tTopic: t\tPartition: 0\tLeader: 1 ...")
// into its fields.
func describeFields(l string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Split(strings.TrimSpace(l), "\t") {
		k, v, _ := strings.Cut(f, ":")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// containsLine says whether one of out's lines is s.
func containsLine(out, s string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == s {
			return true
		}
	}
	return false
}
