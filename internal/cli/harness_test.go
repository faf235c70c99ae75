package cli

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/devcluster"
	"github.com/tollgate/tollgate/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// target is a server the CLI talks to: the embedded cluster directly, or a
// Tollgate gateway in front of its own embedded cluster.
type target struct {
	name      string
	bootstrap string
	cluster   *kfake.Cluster // nil for the gateway
}

// startCluster starts the embedded cluster (one broker unless opts say
// otherwise) and returns it as a target.
func startCluster(t *testing.T, opts ...kfake.Opt) *target {
	t.Helper()
	c, err := devcluster.Start(devcluster.Config{Brokers: 1}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &target{name: "kfake", bootstrap: strings.Join(c.Addrs(), ","), cluster: c.Cluster}
}

// startGateway starts Tollgate (testkit) and returns it as a target.
func startGateway(t *testing.T) *target {
	t.Helper()
	// The CLI's tests run as an unauthenticated client: make ANONYMOUS a
	// quota admin so Tollgate's control plane lets it alter.
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
	})
	return &target{name: "gateway", bootstrap: env.Bootstrap}
}

// bothTargets runs fn against the embedded cluster and against the gateway;
// both must produce the same transcript, so they share one golden file.
func bothTargets(t *testing.T, fn func(t *testing.T, tg *target)) {
	t.Run("kfake", func(t *testing.T) { fn(t, startCluster(t)) })
	t.Run("gateway", func(t *testing.T) { fn(t, startGateway(t)) })
}

// admin returns a plain franz-go admin client for seeding and checking.
func (tg *target) admin(t *testing.T, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(tg.bootstrap, ",")...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// seed sets quotas directly (not through the CLI). Each entry is an entity
// ("user=alice,client-id=<default>") and its key=value pairs.
func (tg *target) seed(t *testing.T, entries map[string]map[string]float64, opts ...kgo.Opt) {
	t.Helper()
	var alter []kadm.AlterClientQuotaEntry
	for ent, vals := range entries {
		var e kadm.ClientQuotaEntity
		for _, c := range strings.Split(ent, ",") {
			typ, name, _ := strings.Cut(c, "=")
			comp := kadm.ClientQuotaEntityComponent{Type: typ}
			if name != "<default>" {
				comp.Name = &name
			}
			e = append(e, comp)
		}
		var ops []kadm.AlterClientQuotaOp
		for k, v := range vals {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
		}
		alter = append(alter, kadm.AlterClientQuotaEntry{Entity: e, Ops: ops})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tg.admin(t, opts...).AlterClientQuotas(ctx, alter)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("seed %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
}

// session runs tollgate commands against a target and records a
// transcript: the command line, stdout, stderr lines prefixed with "! ",
// and the exit code when it is not 0.
type session struct {
	t   *testing.T
	tg  *target
	dir string
	out strings.Builder

	stdin    string
	terminal bool
	timeout  time.Duration
}

func newSession(t *testing.T, tg *target) *session {
	return &session{t: t, tg: tg, dir: t.TempDir()}
}

// file writes a file in the session's directory and returns its path.
func (s *session) file(name, content string) string {
	s.t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// note adds a comment line to the transcript.
func (s *session) note(text string) { s.out.WriteString("# " + text + "\n") }

// run runs `tollgate <args>`; "$BOOTSTRAP" in args is the target.
func (s *session) run(args ...string) int {
	s.t.Helper()
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = strings.ReplaceAll(a, "$BOOTSTRAP", s.tg.bootstrap)
	}
	var stdout, stderr strings.Builder
	env := &Env{
		Stdin:      strings.NewReader(s.stdin),
		Stdout:     &stdout,
		Stderr:     &stderr,
		IsTerminal: func() bool { return s.terminal },
		Timeout:    s.timeout,
	}
	if env.Timeout == 0 {
		env.Timeout = 30 * time.Second
	}
	var code int
	switch expanded[0] {
	case "configs":
		code = runConfigs(context.Background(), env, expanded[1:])
	case "quotas":
		code = runQuotas(context.Background(), env, expanded[1:])
	default:
		s.t.Fatalf("unknown command %q", expanded[0])
	}
	s.out.WriteString("$ tollgate " + loopbackPort.ReplaceAllString(strings.ReplaceAll(shellJoin(args), s.dir, "$DIR"), "127.0.0.1:$$PORT") + "\n")
	s.out.WriteString(s.sanitize(stdout.String()))
	for _, l := range strings.SplitAfter(s.sanitize(stderr.String()), "\n") {
		if l != "" {
			s.out.WriteString("! " + l)
		}
	}
	if !strings.HasSuffix(s.out.String(), "\n") {
		s.out.WriteString("\n")
	}
	if code != 0 {
		s.out.WriteString("[exit " + strconv.Itoa(code) + "]\n")
	}
	s.out.WriteString("\n")
	return code
}

// sanitize replaces what changes from run to run: addresses and paths.
func (s *session) sanitize(out string) string {
	out = strings.ReplaceAll(out, s.tg.bootstrap, "$BOOTSTRAP")
	out = strings.ReplaceAll(out, s.dir, "$DIR")
	return loopbackPort.ReplaceAllString(out, "127.0.0.1:$$PORT")
}

var loopbackPort = regexp.MustCompile(`127\.0\.0\.1:\d+`)

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || !plainArg.MatchString(a) {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9_.,=:/@%+$-]+$`)

// golden compares the transcript with testdata/<name>.golden, or rewrites
// it with -update.
func (s *session) golden(name string) {
	s.t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got := s.out.String()
	if *update && !strings.Contains(s.t.Name(), "/gateway") {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		s.t.Errorf("transcript differs from %s (run with -update to accept):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing lines of two transcripts.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
		}
	}
	return b.String()
}
