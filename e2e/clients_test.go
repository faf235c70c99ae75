package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

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
