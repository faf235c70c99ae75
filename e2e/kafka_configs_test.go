package e2e

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// Kafka's own kafka-configs, unchanged, differentially (issue 21 point 1):
// every command line runs against the real broker and against Tollgate,
// and the two outputs — exit status, stdout, stderr — must be equal line
// for line once the bootstrap address is normalised. Tollgate answers the
// client quotas, SCRAM credentials and connection limits itself; the
// broker is the reference. A row whose difference is on purpose says so
// in its diff (a documented extension), and then Tollgate's output must be
// exactly that.

// toolResult is one command's outcome in testdata/java/Tools.java.
type toolResult struct {
	exit           int
	stdout, stderr string
}

var toolHeader = regexp.MustCompile(`^=== (\d+) exit=(-?\d+)$`)

// runTools runs each command line (a main class and its arguments) in one
// JVM, in order, and returns what each printed.
func runTools(t *testing.T, up *testkit.Upstream, cmds [][]string) []toolResult {
	t.Helper()
	var in strings.Builder
	for _, c := range cmds {
		in.WriteString(strings.Join(c, "\t"))
		in.WriteByte('\n')
	}
	r := runJava(t, up, time.Duration(len(cmds))*20*time.Second+30*time.Second, in.String(), "testdata/java/Tools.java")
	var out []toolResult
	var cur *toolResult
	var into *string
	for _, l := range strings.SplitAfter(r.Stdout, "\n") {
		line := strings.TrimSuffix(l, "\n")
		switch m := toolHeader.FindStringSubmatch(line); {
		case m != nil:
			code, _ := strconv.Atoi(m[2])
			out = append(out, toolResult{exit: code})
			cur, into = &out[len(out)-1], nil
		case line == "=== end":
			cur, into = nil, nil
		case cur != nil && line == "--- stdout":
			into = &cur.stdout
		case cur != nil && line == "--- stderr":
			into = &cur.stderr
		case into != nil:
			*into += l
		}
	}
	want := 0
	for _, c := range cmds {
		if !strings.HasPrefix(c[0], "sleep ") {
			want++
		}
	}
	if len(out) != want {
		t.Fatalf("Tools.java ran %d of %d commands:\n%s\nstderr:\n%s", len(out), want, tail(r.Stdout, 40), tail(r.Stderr, 40))
	}
	return out
}

// againstTheBroker runs a differential test on the real upstream's row:
// the reference is the real broker, which the kfake row has not.
func againstTheBroker(f func(*testing.T, *testkit.Upstream)) func(*testing.T, *testkit.Upstream) {
	return func(t *testing.T, up *testkit.Upstream) {
		if !up.Real() {
			t.Skip("the reference is the real broker: this row is the real upstream's")
		}
		f(t, up)
	}
}

// startLoopbackAdmin runs Tollgate in front of up with every connection
// from 127.0.0.1 — the JVM tools' — the quota admin.
func startLoopbackAdmin(t *testing.T, up *testkit.Upstream) *testkit.Env {
	t.Helper()
	return up.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{{CIDR: "127.0.0.1/32", Principal: "admin"}}
		c.Authorization.QuotaAdmins = []string{"admin"}
	})
}

// configCommand is kafka-configs' main class in the release.
func configCommand(version string) string {
	if strings.HasPrefix(version, "3.") {
		return "kafka.admin.ConfigCommand"
	}
	return "org.apache.kafka.tools.ConfigCommand"
}

func TestKafkaConfigsAgainstKafka(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, againstTheBroker(kafkaConfigsDifferential))
}

func kafkaConfigsDifferential(t *testing.T, up *testkit.Upstream) {
	env := startLoopbackAdmin(t, up)
	p := up.Topic(t, "cfg")
	u, c := p+"-user", p+"-client"
	broker := strconv.Itoa(int(up.Kafka.Nodes()[0].ID))
	rows := []toolRow{
		{"users: add", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50"}, nil},
		{"users: describe", []string{"--describe", "--entity-type", "users", "--entity-name", u}, nil},
		{"users: delete one", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--delete-config", "request_percentage"}, nil},
		{"users: describe after delete", []string{"--describe", "--entity-type", "users", "--entity-name", u}, nil},
		{"clients: add", []string{"--alter", "--entity-type", "clients", "--entity-name", c, "--add-config", "producer_byte_rate=4096"}, nil},
		{"clients: describe", []string{"--describe", "--entity-type", "clients", "--entity-name", c}, nil},
		{"user and client: add", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--entity-type", "clients", "--entity-name", c, "--add-config", "consumer_byte_rate=8192"}, nil},
		{"user and client: describe", []string{"--describe", "--entity-type", "users", "--entity-name", u, "--entity-type", "clients", "--entity-name", c}, nil},
		{"user and default client: add", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=1000000000000"}, nil},
		{"user and default client: describe", []string{"--describe", "--entity-type", "users", "--entity-name", u, "--entity-type", "clients", "--entity-default"}, nil},
		// Every entity of a type: the shared cluster has other tests'
		// too, so only this test's lines are compared.
		{"users: describe all", []string{"--describe", "--entity-type", "users"}, []string{p}},
		{"clients: describe all", []string{"--describe", "--entity-type", "clients"}, []string{p}},
		{"users and clients: describe all", []string{"--describe", "--entity-type", "users", "--entity-type", "clients"}, []string{p}},
		{"users: describe one with no quotas", []string{"--describe", "--entity-type", "users", "--entity-name", p + "-nobody"}, nil},
		{"ips: add", []string{"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.77", "--add-config", "connection_creation_rate=100"}, nil},
		{"ips: describe", []string{"--describe", "--entity-type", "ips", "--entity-name", "127.0.0.77"}, nil},
		{"ips: describe all", []string{"--describe", "--entity-type", "ips"}, []string{"127.0.0.77"}},
		{"ips: delete", []string{"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.77", "--delete-config", "connection_creation_rate"}, nil},
		{"scram: add", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw-1],SCRAM-SHA-512=[password=pw-2]"}, nil},
		{"scram: describe", []string{"--describe", "--entity-type", "users", "--entity-name", u}, nil},
		{"scram: delete", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--delete-config", "SCRAM-SHA-512"}, nil},
		{"scram: describe after delete", []string{"--describe", "--entity-type", "users", "--entity-name", u}, nil},
		// Kafka's invalid inputs.
		{"invalid: a value that is no number", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "producer_byte_rate=abc"}, nil},
		{"invalid: an unknown quota key", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "no_such_quota=1"}, nil},
		{"invalid: a negative rate", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "producer_byte_rate=-1"}, nil},
		{"invalid: a fraction of a byte", []string{"--alter", "--entity-type", "clients", "--entity-name", c, "--add-config", "producer_byte_rate=1.5"}, nil},
		{"invalid: a connection quota on a user", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "connection_creation_rate=5"}, nil},
		{"invalid: a byte rate on an ip", []string{"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.78", "--add-config", "producer_byte_rate=5"}, nil},
		{"invalid: an ip that is not one", []string{"--alter", "--entity-type", "ips", "--entity-name", "not-an-ip..", "--add-config", "connection_creation_rate=5"}, nil},
		{"invalid: an ip with a client", []string{"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.78", "--entity-type", "clients", "--entity-name", c, "--add-config", "connection_creation_rate=5"}, nil},
		{"invalid: too few SCRAM iterations", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "SCRAM-SHA-256=[iterations=1000,password=x]"}, nil},
		{"invalid: an unknown SCRAM mechanism", []string{"--alter", "--entity-type", "users", "--entity-name", u, "--add-config", "SCRAM-SHA-1=[password=x]"}, nil},
		{"invalid: delete a quota never set", []string{"--alter", "--entity-type", "clients", "--entity-name", c, "--delete-config", "request_percentage"}, nil},
		// The connection limits Tollgate owns, on the brokers' default
		// (a broker's own view after the overrides are deleted again
		// keeps them for seconds on Kafka 3.9: it is described first).
		{"brokers: add max.connections", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections=100000"}, nil},
		{"brokers: describe max.connections", []string{"--describe", "--entity-type", "brokers", "--entity-default"}, []string{"max.connections=", "Default configs"}},
		{"brokers: describe a broker's limits", []string{"--describe", "--all", "--entity-type", "brokers", "--entity-name", broker}, []string{"max.connection", "All configs for broker"}},
		{"brokers: delete max.connections", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections"}, nil},
		{"brokers: add", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections.per.ip.overrides=[127.0.0.79:50]"}, nil},
		{"brokers: describe", []string{"--describe", "--entity-type", "brokers", "--entity-default"}, []string{"max.connections.per.ip.overrides", "Default configs"}},
		{"brokers: delete", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections.per.ip.overrides"}, nil},
		{"invalid brokers: a negative limit", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections=-5"}, nil},
		{"invalid brokers: not a number", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections=lots"}, nil},
		{"invalid brokers: a bad override", []string{"--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections.per.ip.overrides=[127.0.0.79:x]"}, nil},
	}
	version := javaVersion(up)
	main := configCommand(version)
	real := strings.Join(up.Kafka.Bootstrap(kafka.Plaintext), ",")
	t.Cleanup(func() {
		// The real cluster's defaults are shared by every test.
		runTools(t, up, [][]string{
			{main, "--bootstrap-server", real, "--alter", "--entity-type", "users", "--entity-name", u, "--entity-type", "clients", "--entity-default", "--delete-config", "producer_byte_rate"},
			{main, "--bootstrap-server", real, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections.per.ip.overrides"},
			{main, "--bootstrap-server", real, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections"},
		})
	})
	// Differences on purpose: none.
	toolsDifferential(t, up, env, main, rows, nil)
}

// toolRow is one command line of a differential table: the tool's
// arguments after --bootstrap-server.
type toolRow struct {
	name string
	// args follow --bootstrap-server; a first one that is no flag is
	// another tool's main class, the row's own.
	args []string
	// only keeps the lines that hold one of these (what other tests
	// share on the cluster, such as the brokers' own dynamic configs, is
	// not compared).
	only []string
}

// tool splits a row's arguments into its main class (main by default)
// and the tool's arguments.
func (r toolRow) tool(main string) (string, []string) {
	if len(r.args) > 0 && !strings.HasPrefix(r.args[0], "-") {
		return r.args[0], r.args[1:]
	}
	return main, r.args
}

// toolDiff is a documented difference: why, and Tollgate's exact output
// as it follows from Kafka's (the exit status is the same).
type toolDiff struct {
	why      string
	tollgate func(stdout, stderr string) (string, string)
}

// toolsDifferential runs rows against the real broker and then against
// Tollgate (env), and compares each row's exit status, stdout and stderr
// once the bootstrap address is normalised; a row in diffs must print
// exactly the documented difference through Tollgate.
func toolsDifferential(t *testing.T, up *testkit.Upstream, env *testkit.Env, main string, rows []toolRow, diffs map[string]toolDiff) {
	t.Helper()
	real := strings.Join(up.Kafka.Bootstrap(kafka.Plaintext), ",")
	cmds := func(boot string) [][]string {
		var out [][]string
		for i, r := range rows {
			if i > 0 && slices.ContainsFunc(r.args, func(a string) bool { return a == "--describe" || a == "--list" || a == "--delete" }) {
				// A real broker applies a change through its metadata
				// log a moment after it answers (measured on 3.9: up
				// to a second).
				out = append(out, []string{"sleep 1500"})
			}
			m, args := r.tool(main)
			out = append(out, append([]string{m, "--bootstrap-server", boot}, args...))
		}
		return out
	}
	want := runTools(t, up, cmds(real))
	got := runTools(t, up, cmds(env.Bootstrap))
	norm := func(s, boot string, only []string) string {
		s = strings.ReplaceAll(s, boot, "<bootstrap>")
		if only == nil {
			return s
		}
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			for _, o := range only {
				if strings.Contains(l, o) {
					keep = append(keep, l)
					break
				}
			}
		}
		// A describe of every entity lists them in the broker's map
		// order (Java's hash of each entity), which the random test
		// prefix in their names changes from run to run: compared as
		// a set.
		slices.Sort(keep)
		return strings.Join(keep, "\n")
	}
	for i, r := range rows {
		w, g := want[i], got[i]
		wo, ws := norm(w.stdout, real, r.only), norm(w.stderr, real, r.only)
		gout, gs := norm(g.stdout, env.Bootstrap, r.only), norm(g.stderr, env.Bootstrap, r.only)
		if wo+ws == "" && !strings.Contains(r.name, "no quotas") && !strings.Contains(r.name, "nothing") { // 3.9 prints nothing for none
			t.Errorf("%s: Kafka printed nothing to compare (exit %d)", r.name, w.exit)
		}
		if d, ok := diffs[r.name]; ok {
			if do, ds := d.tollgate(wo, ws); w.exit != g.exit || gout != do || gs != ds {
				t.Errorf("%s: the documented difference (%s) is not what Tollgate printed:\n  want exit %d\n%s\n  got exit %d\n%s",
					r.name, d.why, w.exit, indent(do+ds), g.exit, indent(gout+gs))
			}
			continue
		}
		if w.exit != g.exit || wo != gout || ws != gs {
			m, args := r.tool(main)
			t.Errorf("%s: %s %s\n  Kafka:    exit %d\n%s\n  Tollgate: exit %d\n%s", r.name, m, strings.Join(args, " "),
				w.exit, indent(wo+ws), g.exit, indent(gout+gs))
		}
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
