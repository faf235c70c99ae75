package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
	"github.com/tollgate/tollgate/internal/cluster"
)

// names of the three instances, in the order they start: A runs the
// embedded cluster, B and C front it.
var names = [3]string{"A", "B", "C"}

// instance is one running `tollgate serve`.
type instance struct {
	name        string
	boot, admin string
	log         string // its stdout and stderr
	cmd         *exec.Cmd
	exited      chan struct{}
	waitErr     error
}

// trio is three instances in front of A's embedded cluster: one Tollgate
// cluster when clusterID is set, three independent gateways otherwise.
type trio struct {
	clusterID string
	inst      [3]*instance
	devPorts  []int
}

type trioConfig struct {
	bin, dir  string
	clusterID string        // "": each instance counts alone
	interval  time.Duration // cluster.exchange_interval; 0: the default
}

// freePorts returns n distinct loopback ports free a moment ago.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n && tries < 100; tries++ {
		_, p, err := net.SplitHostPort(benchkit.FreeAddr())
		if err != nil {
			return nil, err
		}
		port, _ := strconv.Atoi(p)
		if !seen[port] {
			seen[port] = true
			out = append(out, port)
		}
	}
	if len(out) < n {
		return nil, errors.New("no free ports")
	}
	return out, nil
}

// startTrio starts A (with the embedded cluster on fixed free ports), waits
// for it, then starts B and C in front of A's cluster, and waits until all
// three are ready (and, in a Tollgate cluster, see each other).
// onTrio starts three instances in a temporary directory (one Tollgate
// cluster if clustered, else three alone), runs fn on them and stops them;
// if fn fails, the instances' last log lines are printed.
func onTrio(o options, clustered bool, fn func(*trio, options) error) error {
	dir, err := os.MkdirTemp("", "tgclbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	id := ""
	if clustered {
		id = fmt.Sprintf("bench%d", os.Getpid())
	}
	t, err := startTrio(trioConfig{bin: o.bin, dir: dir, clusterID: id, interval: o.interval})
	if err != nil {
		return err
	}
	defer t.stop()
	if err := fn(t, o); err != nil {
		t.tailLogs()
		return err
	}
	return nil
}

func startTrio(c trioConfig) (*trio, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	t := &trio{clusterID: c.clusterID, devPorts: ports}
	var upstream []string
	for _, p := range ports {
		upstream = append(upstream, "127.0.0.1:"+strconv.Itoa(p))
	}
	start := func(i int) error {
		in := &instance{name: names[i], boot: benchkit.FreeAddr(), admin: benchkit.FreeAddr(), exited: make(chan struct{})}
		t.inst[i] = in
		dir := filepath.Join(c.dir, strings.ToLower(in.name))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		var yaml strings.Builder
		fmt.Fprintf(&yaml, "data_dir: %s\nlisteners:\n  - name: PLAINTEXT\n    bootstrap: %s\nhttp:\n  address: %s\n", filepath.Join(dir, "data"), in.boot, in.admin)
		yaml.WriteString("log:\n  level: warn\nauthorization:\n  quota_admins: [ANONYMOUS]\n  allow_anonymous_describe: true\nshutdown_timeout: 5s\n")
		if i == 0 {
			fmt.Fprintf(&yaml, "dev_cluster:\n  ports: [%d, %d, %d]\n", ports[0], ports[1], ports[2])
		} else {
			fmt.Fprintf(&yaml, "upstream:\n  bootstrap: [%s]\n", strings.Join(upstream, ", "))
		}
		if c.clusterID != "" {
			fmt.Fprintf(&yaml, "cluster:\n  id: %s\n  instance_id: %s\n", c.clusterID, strings.ToLower(in.name))
			if c.interval > 0 {
				fmt.Fprintf(&yaml, "  exchange_interval: %s\n", c.interval)
			}
		}
		cfg := filepath.Join(dir, "tollgate.yaml")
		if err := os.WriteFile(cfg, []byte(yaml.String()), 0o600); err != nil {
			return err
		}
		in.log = filepath.Join(dir, "tollgate.log")
		lf, err := os.Create(in.log)
		if err != nil {
			return err
		}
		in.cmd = exec.Command(c.bin, "serve", "--config", cfg)
		in.cmd.Stdout, in.cmd.Stderr = lf, lf
		if err := in.cmd.Start(); err != nil {
			lf.Close()
			return err
		}
		go func() { in.waitErr = in.cmd.Wait(); lf.Close(); close(in.exited) }()
		for _, a := range []string{in.boot, in.admin} {
			if err := benchkit.WaitDial(a); err != nil {
				return fmt.Errorf("instance %s: %w", in.name, err)
			}
		}
		return nil
	}
	if err := start(0); err != nil {
		t.stop()
		return nil, err
	}
	for _, a := range upstream {
		if err := benchkit.WaitDial(a); err != nil {
			t.stop()
			return nil, fmt.Errorf("A's embedded cluster: %w", err)
		}
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = start(i) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.stop()
		return nil, err
	}
	if err := t.waitReady(); err != nil {
		t.stop()
		return nil, err
	}
	return t, nil
}

// waitReady waits up to 60 s for /readyz on every instance and, in a
// Tollgate cluster, for every instance to count three live members.
func (t *trio) waitReady() error {
	deadline := time.Now().Add(60 * time.Second)
	for _, in := range t.inst {
		for {
			if err := in.alive(); err != nil {
				return err
			}
			ok := httpOK("http://" + in.admin + "/readyz")
			if ok && t.clusterID != "" {
				st, err := in.status()
				ok = err == nil && st.Live == 3
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("instance %s not ready after 60 s (log: %s)", in.name, in.log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func httpOK(url string) bool {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// status reads GET /api/v1/cluster.
func (in *instance) status() (cluster.Status, error) {
	var st cluster.Status
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + in.admin + "/api/v1/cluster")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("instance %s: GET /api/v1/cluster: %s", in.name, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// alive returns why the instance is gone, nil while it runs.
func (in *instance) alive() error {
	select {
	case <-in.exited:
		return fmt.Errorf("instance %s exited: %v (log: %s)", in.name, in.waitErr, in.log)
	default:
		return nil
	}
}

// cpu is the instance's CPU time and its children's (the acceptor helper).
func (in *instance) cpu() time.Duration {
	pid := in.cmd.Process.Pid
	t := benchkit.ProcCPU(pid)
	for _, kid := range benchkit.ChildPIDs(pid) {
		t += benchkit.ProcCPU(kid)
	}
	return t
}

// stop stops B and C, then A (whose embedded cluster they front): SIGTERM,
// then SIGKILL after 15 s.
func (t *trio) stop() {
	var wg sync.WaitGroup
	for i := 2; i >= 0; i-- {
		in := t.inst[i]
		if in == nil || in.cmd == nil || in.cmd.Process == nil {
			continue
		}
		if i == 0 {
			wg.Wait()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-in.exited:
				return
			default:
			}
			in.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-in.exited:
			case <-time.After(15 * time.Second):
				in.cmd.Process.Kill()
				<-in.exited
			}
		}()
	}
	wg.Wait()
}

// tailLogs prints the last lines of every instance's log, after a failure.
func (t *trio) tailLogs() {
	for _, in := range t.inst {
		if in == nil || in.log == "" {
			continue
		}
		f, err := os.Open(in.log)
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) > 20 {
				lines = lines[1:]
			}
		}
		f.Close()
		fmt.Fprintf(os.Stderr, "--- instance %s, last lines of %s\n%s\n", in.name, in.log, strings.Join(lines, "\n"))
	}
}

// adminClient returns a kadm client through instance in, which the caller
// closes.
func (in *instance) adminClient() (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(in.boot), kgo.ClientID("bench-admin"))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// createTopic creates topic with the given partitions through A.
func (t *trio) createTopic(ctx context.Context, topic string, partitions int32) error {
	adm, err := t.inst[0].adminClient()
	if err != nil {
		return err
	}
	defer adm.Close()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// setQuota sets one client-id quota (name nil: the default client-id)
// through the Kafka API: through A in a Tollgate cluster (its shared
// configuration topic takes it to B and C), through each instance
// otherwise. It waits until every instance describes it.
func (t *trio) setQuota(ctx context.Context, name *string, key string, v float64) error {
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: name}}
	via := t.inst[:]
	if t.clusterID != "" {
		via = via[:1]
	}
	for _, in := range via {
		adm, err := in.adminClient()
		if err != nil {
			return err
		}
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
		adm.Close()
		if err == nil && len(res) > 0 {
			err = res[0].Err
		}
		if err != nil {
			return fmt.Errorf("alter quota %s through %s: %w", entity, in.name, err)
		}
	}
	match := kadm.DescribeClientQuotaComponent{Type: "client-id", MatchName: name, MatchType: 0}
	if name == nil {
		match.MatchType = 1 // the default entity
	}
	for _, in := range t.inst {
		adm, err := in.adminClient()
		if err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{match})
			if err == nil && hasQuota(got, key, v) {
				break
			}
			if time.Now().After(deadline) {
				adm.Close()
				return fmt.Errorf("instance %s does not describe %s %s=%v after 30 s (last error %v)", in.name, entity, key, v, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		adm.Close()
	}
	return nil
}

func hasQuota(qs kadm.DescribedClientQuotas, key string, v float64) bool {
	for _, q := range qs {
		for _, val := range q.Values {
			if val.Key == key && val.Value == v {
				return true
			}
		}
	}
	return false
}
