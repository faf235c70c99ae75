//go:build linux

package e2e

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/devcluster"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
	"github.com/tollgate/tollgate/internal/testkit/proc"
)

// Upgrades that drop nothing (docs/operations.md, Upgrades): `tollgate
// serve` hands its listening sockets to a new binary, which takes them
// over (it opens none of its ports afresh), and then drains and exits.

// handoverRig is `tollgate serve` run from a path the test can replace (as
// a package upgrade replaces /usr/bin/tollgate), in front of a cluster in
// this process, with a service manager's notify socket.
type handoverRig struct {
	bin, live, cfg, dir string
	upstream            []string // the brokers' addresses
	base                int      // bootstrap; admin port base+1; brokers base+2...
	boot, admin         string
	ports               []int // every listening port: bootstrap, admin, brokers
	cmd                 *exec.Cmd
	exited              chan struct{}
	stdout, stderr      string // files both processes write
	notify              *net.UnixConn
	notes               chan string
}

// newHandoverRigOn is a handover rig in front of up: a kfake cluster of
// the rig's own, or the shared real cluster.
func newHandoverRigOn(t *testing.T, up *testkit.Upstream, bin string) *handoverRig {
	t.Helper()
	dir := t.TempDir()
	r := &handoverRig{bin: bin, dir: dir, live: filepath.Join(dir, "bin", "tollgate"), cfg: filepath.Join(dir, "tollgate.yaml"),
		stdout: filepath.Join(dir, "stdout.log"), stderr: filepath.Join(dir, "stderr.log"), notes: make(chan string, 16)}
	os.MkdirAll(filepath.Dir(r.live), 0o755)
	r.install(t, bin)
	if up.Real() {
		r.upstream = up.Kafka.Bootstrap(kafka.Plaintext)
	} else {
		cluster, err := devcluster.Start(devcluster.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cluster.Close)
		r.upstream = cluster.Addrs()
	}
	// Broker ports are broker_port_base (base+2) + node id: kfake's
	// nodes are 0-2, the real cluster's 1-3.
	nodes := []int{0, 1, 2}
	if up.Real() {
		nodes = nil
		for _, n := range up.Kafka.Nodes() {
			nodes = append(nodes, int(n.ID))
		}
	}
	r.base = freePorts(t, 3+slices.Max(nodes))
	r.boot = loopback(r.base)
	r.admin = "http://" + loopback(r.base+1)
	r.ports = []int{r.base, r.base + 1}
	for _, id := range nodes {
		r.ports = append(r.ports, r.base+2+id)
	}
	r.writeConfig(t, "")
	// The service manager's side of sd_notify.
	sock := filepath.Join(dir, "notify.sock")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	r.notify = nc
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := nc.Read(b)
			if err != nil {
				return
			}
			select {
			case r.notes <- string(b[:n]):
			default:
			}
		}
	}()
	t.Cleanup(func() { nc.Close(); <-done })
	return r
}

// install puts a copy of src at the live path, replacing the file there
// (a new inode, as a package manager does).
func (r *handoverRig) install(t *testing.T, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := r.live + ".new"
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.live); err != nil {
		t.Fatal(err)
	}
}

func (r *handoverRig) writeConfig(t *testing.T, extra string) {
	t.Helper()
	yaml := gatewayYAML(filepath.Join(r.dir, "data"), r.base, r.upstream, "500ms",
		"authorization:\n  quota_admins: [ANONYMOUS]\nshutdown_timeout: 10s\n"+extra)
	tmp := r.cfg + ".new"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.cfg); err != nil {
		t.Fatal(err)
	}
}

// start runs `tollgate serve` from the live path. Its output goes to files:
// the new process of a handover inherits them and writes on after this one
// has exited (a pipe read by this test would be closed under it).
func (r *handoverRig) start(t *testing.T) {
	t.Helper()
	out, err := os.OpenFile(r.stdout, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.OpenFile(r.stderr, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	r.cmd = exec.Command(r.live, "serve", "--config", r.cfg)
	r.cmd.Stdout, r.cmd.Stderr = out, errf
	r.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+r.notify.LocalAddr().String())
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.exited = make(chan struct{})
	go func() { r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			b, _ := os.ReadFile(r.stderr)
			t.Logf("tollgate stderr:\n%s", b)
		}
	})
	waitUntil(t, "tollgate ready", 10*time.Millisecond, 30*time.Second, func() bool { return r.readyLines() >= 1 })
}

func (r *handoverRig) readyLines() int {
	b, _ := os.ReadFile(r.stdout)
	return strings.Count(string(b), "Tollgate is ready")
}

// logged returns the JSON log records whose message starts with msg.
func (r *handoverRig) logged(msg string) []map[string]any {
	f, err := os.Open(r.stderr)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			if m, _ := rec["msg"].(string); strings.HasPrefix(m, msg) {
				out = append(out, rec)
			}
		}
	}
	return out
}

// note waits for the next sd_notify datagram.
func (r *handoverRig) note(t *testing.T) string {
	t.Helper()
	select {
	case n := <-r.notes:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no sd_notify datagram within 30 s")
		return ""
	}
}

// signal sends sig to the running process.
func (r *handoverRig) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// handOver signals the running process to hand over (SIGHUP, a reload
// that finds a new binary; or SIGUSR2) and waits for it to exit 0. It
// returns the pid of the new process, which is killed when the test ends.
func (r *handoverRig) handOver(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	r.signal(t, sig)
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the old process did not exit within 60 s of the handover")
	}
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the old process exited %d, want 0", code)
	}
	pid := r.successorPid(t)
	killWhenDone(t, pid)
	return pid
}

// successorPid is the pid the old process logged for the new one once it
// served.
func (r *handoverRig) successorPid(t *testing.T) int {
	t.Helper()
	recs := r.logged("handover: the new process serves")
	if len(recs) != 1 {
		t.Fatalf("%d records of a completed handover, want 1", len(recs))
	}
	pid, _ := recs[0]["pid"].(float64)
	if pid <= 0 {
		t.Fatalf("no pid in %v", recs[0])
	}
	return int(pid)
}

// killWhenDone ends a successor (no longer this test's child: it outlived
// its parent) when the test ends, and waits for it to be gone.
func killWhenDone(t *testing.T, pid int) {
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		waitGone(t, pid, 10*time.Second)
	})
}

// waitGone waits until pid has exited (gone, or a zombie nobody reaps).
func waitGone(t *testing.T, pid int, limit time.Duration) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("process %d gone", pid), 10*time.Millisecond, limit, func() bool {
		s, err := proc.ReadStat(pid)
		return err != nil || s.State == 'Z'
	})
}

// listeningInodes maps each port to the inode of the socket listening on
// it (/proc/net/tcp): the same inode after a handover is the same socket.
func listeningInodes(t *testing.T, ports []int) map[int]string {
	t.Helper()
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	out := map[int]string{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err == nil && want[int(p)] {
				out[int(p)] = f[9]
			}
		}
	}
	if len(out) != len(ports) {
		t.Fatalf("listening sockets on %v: %v", ports, out)
	}
	return out
}

// dialLoop dials addr until stop closes or limit dials are done: the
// client dialing in a loop of the issue. Each connection is closed at
// once.
type dialLoop struct {
	mu      sync.Mutex
	dials   int
	refused int
	errs    []string
}

func (d *dialLoop) run(addr string, limit int, stop <-chan struct{}) {
	for range limit {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		d.mu.Lock()
		d.dials++
		switch {
		case err == nil:
			c.Close()
		case errors.Is(err, syscall.ECONNREFUSED):
			d.refused++
		default:
			d.errs = append(d.errs, err.Error())
		}
		d.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func (d *dialLoop) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

// startDialing dials each address from two goroutines until the returned
// stop is called (then it waits for them); at most perLoop dials each.
func startDialing(addrs []string, perLoop int) (map[string]*dialLoop, func()) {
	loops := map[string]*dialLoop{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, a := range addrs {
		d := &dialLoop{}
		loops[a] = d
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.run(a, perLoop, stop)
			}()
		}
	}
	var once sync.Once
	return loops, func() { once.Do(func() { close(stop); wg.Wait() }) }
}

func checkDials(t *testing.T, loops map[string]*dialLoop) {
	t.Helper()
	for a, d := range loops {
		d.mu.Lock()
		t.Logf("%s: %d dials, %d refused, %d other errors", a, d.dials, d.refused, len(d.errs))
		if d.refused > 0 {
			t.Errorf("%s: %d of %d dials refused", a, d.refused, d.dials)
		}
		if len(d.errs) > 0 {
			t.Errorf("%s: %d dials failed, e.g. %s", a, len(d.errs), d.errs[0])
		}
		d.mu.Unlock()
	}
}

// alterQuota sets user's consumer_byte_rate through the gateway and reads
// it back.
func alterQuota(t *testing.T, ctx context.Context, adm *kadm.Client, user string, v float64) {
	t.Helper()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr(user)}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: v}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas %s: %v %+v", user, err, res)
	}
}

func storedQuota(t *testing.T, ctx context.Context, adm *kadm.Client, user string) float64 {
	t.Helper()
	desc, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr(user)}})
	if err != nil || len(desc) != 1 || len(desc[0].Values) != 1 {
		t.Fatalf("DescribeClientQuotas %s: %v %+v", user, err, desc)
	}
	return desc[0].Values[0].Value
}

// An upgrade under load: the binary at the service's path is replaced and
// `tollgate serve` gets SIGHUP (systemctl reload). It reloads its config,
// sees the new binary and hands over to it. Clients dialing the bootstrap
// port and a broker port in a loop throughout are never refused; the new
// process serves on the very same listening sockets (bootstrap, brokers,
// admin port); it tells the service manager it is the main process; the
// old one drains and exits 0; a producer's acknowledged records are all in
// the topic and a control-plane change made before is there after.
func TestHandoverUpgradeRefusesNothing(t *testing.T) {
	// Not parallel: bounds wall time, and counts dials.
	bin := buildTollgate(t, t.TempDir())
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) { handoverUpgradeRefusesNothing(t, up, bin) })
}

func handoverUpgradeRefusesNothing(t *testing.T, up *testkit.Upstream, bin string) {
	started := time.Now()
	r := newHandoverRigOn(t, up, bin)
	r.start(t)
	ctx := ctxT(t, 90*time.Second)
	defer http.DefaultClient.CloseIdleConnections()
	if n := r.note(t); !strings.Contains(n, "READY=1") || strings.Contains(n, "MAINPID") {
		t.Fatalf("first sd_notify %q, want READY=1 alone", n)
	}
	before := listeningInodes(t, r.ports)

	adm := kadm.NewClient(newRestartClient(t, r.boot))
	alterQuota(t, ctx, adm, "before", 111)
	topic := up.Topic(t, "handover")
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := newRestartClient(t, r.boot, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	acks := &acked{}
	stopProd := make(chan struct{})
	pdone := produceUntil(ctx, prod, topic, "rec", 100000, stopProd, acks)
	waitUntil(t, "records acknowledged before the handover", 10*time.Millisecond, 20*time.Second, func() bool { return acks.count() >= 300 })

	brokerPort := loopback(r.ports[2])
	loops, stopDials := startDialing([]string{r.boot, brokerPort}, 5000)
	defer stopDials()
	waitUntil(t, "dials before the handover", time.Millisecond, 10*time.Second, func() bool { return loops[r.boot].count() >= 100 })

	// The upgrade: a new binary at the path, then systemctl reload.
	r.install(t, bin)
	pid := r.handOver(t, syscall.SIGHUP)
	if n := r.note(t); n != "STATUS=Handing over to a new process" {
		t.Errorf("sd_notify at the handover %q", n)
	}
	if n := r.note(t); !strings.HasPrefix(n, fmt.Sprintf("MAINPID=%d\nREADY=1", pid)) {
		t.Errorf("sd_notify of the new process %q, want MAINPID=%d and READY=1", n, pid)
	}
	atExit := acks.count()
	dialsAtExit := loops[r.boot].count()
	waitUntil(t, "dials after the handover", time.Millisecond, 10*time.Second, func() bool { return loops[r.boot].count() >= dialsAtExit+100 })
	stopDials()
	checkDials(t, loops)
	if after := listeningInodes(t, r.ports); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("listening sockets (port: inode) %v before the handover, %v after: the new process opened a port afresh", before, after)
	}

	// The new process serves: the producer carries on, the control plane
	// (its data_dir now) answers and has what was stored before.
	waitUntil(t, "records acknowledged after the handover", 10*time.Millisecond, 20*time.Second, func() bool { return acks.count() >= atExit+300 })
	close(stopProd)
	<-pdone
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if acks.errs > 0 {
		t.Errorf("%d records failed", acks.errs)
	}
	stored := readAll(t, ctx, topic, kgo.SeedBrokers(r.upstream...))
	if missing := acks.missingFrom(stored); len(missing) > 0 {
		t.Errorf("%d acknowledged records are not in the topic, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	if q := storedQuota(t, ctx, adm, "before"); q != 111 {
		t.Errorf("the quota stored before the handover reads %v after it", q)
	}
	alterQuota(t, ctx, adm, "after", 222)
	if q := storedQuota(t, ctx, adm, "after"); q != 222 {
		t.Errorf("a quota stored after the handover reads %v", q)
	}
	resp, err := http.Get(r.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the admin port after the handover: %d", resp.StatusCode)
	}
	if recs := r.logged("handover failed"); len(recs) > 0 {
		t.Errorf("handover failures logged: %v", recs)
	}
	t.Logf("%d records acknowledged (%d after the handover); %v of wall time",
		acks.count(), acks.count()-atExit, time.Since(started))
	if el := time.Since(started); el > 50*time.Second {
		t.Errorf("the handover under load took %v", el)
	}

	// The new process stops as a service does: SIGTERM, drained, gone.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 30*time.Second)
}

// A handover that fails leaves the old process serving as before: a new
// binary that exits at once (not a tollgate), and a new process that fails
// after it has taken data_dir over (its config names an audit file it
// cannot create). Each is logged with why; the old process takes data_dir
// back (the control plane answers and stores again), nothing it serves is
// refused, no process is left behind; and it can still hand over.
func TestHandoverFailureKeepsServing(t *testing.T) {
	// Not parallel: counts dials and children.
	bin := buildTollgate(t, t.TempDir())
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) { handoverFailureKeepsServing(t, up, bin) })
}

func handoverFailureKeepsServing(t *testing.T, up *testkit.Upstream, bin string) {
	r := newHandoverRigOn(t, up, bin)
	r.start(t)
	ctx := ctxT(t, 90*time.Second)
	r.note(t) // READY=1
	oldPid := r.cmd.Process.Pid
	adm := kadm.NewClient(newRestartClient(t, r.boot))
	loops, stopDials := startDialing([]string{r.boot}, 5000)
	defer stopDials()
	onlyHelper := func() {
		t.Helper()
		kids, err := proc.Children(oldPid)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			env, _ := proc.Environ(k.PID)
			for _, kv := range env {
				if strings.HasPrefix(kv, accept.HandoverEnv+"=") && k.State != 'Z' {
					t.Errorf("a failed new process (pid %d) is still running", k.PID)
				}
			}
		}
	}
	failed := func(n int, want string) {
		t.Helper()
		waitUntil(t, "the failed handover logged", 10*time.Millisecond, 30*time.Second, func() bool { return len(r.logged("handover failed")) >= n })
		rec := r.logged("handover failed")[n-1]
		if e, _ := rec["err"].(string); !strings.Contains(e, want) {
			t.Errorf("handover failure logged as %q, want %q in it", e, want)
		}
		select {
		case <-r.exited:
			t.Fatal("the old process exited after a failed handover")
		default:
		}
		onlyHelper()
	}

	// A new binary that is not a tollgate.
	script := filepath.Join(r.dir, "broken")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'not a tollgate' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.install(t, script)
	r.signal(t, syscall.SIGUSR2)
	failed(1, "exit status 3")
	alterQuota(t, ctx, adm, "one", 1)

	// A new process that fails once it has taken data_dir over.
	r.install(t, bin)
	r.writeConfig(t, "audit:\n  file: "+filepath.Join(r.dir, "no", "such", "dir", "audit.log")+"\n")
	r.signal(t, syscall.SIGUSR2)
	failed(2, "exited before it served: exit status 1")
	if len(r.logged("handover: data_dir released")) != 1 || len(r.logged("handover: data_dir taken back")) != 1 {
		t.Fatal("the old process did not release data_dir and take it back")
	}
	alterQuota(t, ctx, adm, "two", 2)
	if q := storedQuota(t, ctx, adm, "one"); q != 1 {
		t.Errorf("quota one reads %v", q)
	}
	if q := storedQuota(t, ctx, adm, "two"); q != 2 {
		t.Errorf("quota two, stored after data_dir was taken back, reads %v", q)
	}

	// It can still hand over.
	r.writeConfig(t, "")
	pid := r.handOver(t, syscall.SIGUSR2)
	alterQuota(t, ctx, adm, "three", 3)
	if q := storedQuota(t, ctx, adm, "two"); q != 2 {
		t.Errorf("quota two after the handover reads %v", q)
	}
	stopDials()
	checkDials(t, loops)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 30*time.Second)
}
