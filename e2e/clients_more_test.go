package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

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
