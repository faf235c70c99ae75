package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/devcluster"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// Restarts: the gateway killed (kill -9) and restarted under load, and what
// a restart does to quota state.

// buildTollgate builds the tollgate binary into dir.
func buildTollgate(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "tollgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tollgate/tollgate/cmd/tollgate").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePorts returns n consecutive loopback ports free right now.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := ln.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{ln}
		ok := base+n <= 65536
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, l)
		}
		for _, l := range lns {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// loopback is the address of port on 127.0.0.1.
func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// gatewayYAML is a `tollgate serve` config of the tests that run the
// binary: data_dir, a PLAINTEXT listener on 127.0.0.1:base with broker
// ports from base+2, the admin port on base+1, the upstream's brokers
// (and its metadata_refresh, when refresh is set), JSON logs; then more,
// other top-level keys.
func gatewayYAML(dataDir string, base int, upstream []string, refresh, more string) string {
	up := ""
	if refresh != "" {
		up = "\n  metadata_refresh: " + refresh
	}
	return fmt.Sprintf(`data_dir: %s
listeners:
  - name: PLAINTEXT
    bootstrap: %s
    broker_port_base: %d
http:
  address: %s
upstream:
  bootstrap: [%s]%s
log:
  format: json
%s`, dataDir, loopback(base), base+2, loopback(base+1), strings.Join(upstream, ", "), up, more)
}

// gatewayProc is a `tollgate serve` child process.
type gatewayProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveBinary starts `tollgate serve --config cfg` and waits until it says
// it is ready.
func serveBinary(t *testing.T, bin, cfg string) *gatewayProc {
	t.Helper()
	p := &gatewayProc{cmd: exec.Command(bin, "serve", "--config", cfg), stderr: &syncBuffer{}}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("tollgate (pid %d) stderr:\n%s", p.cmd.Process.Pid, p.stderr.String())
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), "Tollgate is ready") {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("tollgate exited before it was ready:\n%s", p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tollgate not ready within 30 s:\n%s", p.stderr.String())
	}
	return p
}

// kill9 kills the gateway with SIGKILL and waits until nothing listens on
// addrs any more (its acceptor helper, which holds the listening sockets
// too, dies with it by its parent-death signal).
func (p *gatewayProc) kill9(t *testing.T, addrs ...string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
	waitUntil(t, "the killed gateway's ports closed", 10*time.Millisecond, 10*time.Second, func() bool {
		for _, a := range addrs {
			if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				c.Close()
				return false
			}
		}
		return true
	})
}

// apiCall makes a request to the admin port with an API key.
func apiCall(t *testing.T, method, url, key string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// kill -9 of `tollgate serve` while a producer (franz-go, idempotent,
// acks=all) and a consumer group run through it, in front of a cluster that
// lives on (in this test process). Restarted on the same ports and data
// directory, the clients reconnect by themselves and carry on; afterwards
// every record the cluster acknowledged is in the topic and was consumed
// through the gateway, and every control-plane change acknowledged before
// the kill is there: a client quota, a SCRAM credential, an API key.
func TestRestartKill9UnderLoad(t *testing.T) {
	// Not parallel: bounds the wall time of the kill and restart.
	bin := buildTollgate(t, t.TempDir())
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) { restartKill9UnderLoad(t, up, bin) })
}

func restartKill9UnderLoad(t *testing.T, up *testkit.Upstream, bin string) {
	started := time.Now()
	var upstreamAddrs []string
	if up.Real() {
		upstreamAddrs = up.Kafka.Bootstrap(kafka.Plaintext)
	} else {
		cluster, err := devcluster.Start(devcluster.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer cluster.Close()
		upstreamAddrs = cluster.Addrs()
	}
	ctx := ctxT(t, 60*time.Second)
	defer http.DefaultClient.CloseIdleConnections()

	dir := t.TempDir()
	credFile, adminKeys := writeCredentials(t, nil, "ops")
	base := freePorts(t, 5) // bootstrap, admin port, brokers 0-2
	boot := loopback(base)
	admin := "http://" + loopback(base+1)
	kafkaAddrs := []string{boot}
	for n := 0; n < 3; n++ {
		kafkaAddrs = append(kafkaAddrs, loopback(base+2+n))
	}
	cfg := filepath.Join(dir, "tollgate.yaml")
	yaml := gatewayYAML(filepath.Join(dir, "data"), base, upstreamAddrs, "500ms",
		"authorization:\n  quota_admins: [ANONYMOUS, ops]\ncredentials_file: "+credFile+"\n")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := serveBinary(t, bin, cfg)

	// Control-plane changes, acknowledged before the kill.
	const quotaUser, scramUser = "kept-user", "kept-scram"
	adm := kadm.NewClient(newRestartClient(t, boot))
	qres, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr(quotaUser)}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 123456}},
	}})
	if err != nil || qres[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, qres)
	}
	sres, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: scramUser, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "kept-secret"}})
	if err != nil || sres.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, sres.Error())
	}
	code, body := apiCall(t, "POST", admin+"/api/v1/apikeys", adminKeys[0], map[string]string{"identity": "kept-key"})
	var created struct{ ID, Key string }
	json.Unmarshal(body, &created)
	if code != http.StatusCreated || created.Key == "" {
		t.Fatalf("create API key: %d %s", code, body)
	}

	// Load: a producer and a consumer group through the gateway.
	topic := up.Topic(t, "kill9")
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := newRestartClient(t, boot, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	cons := newRestartClient(t, boot, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(up.GroupID(t, "kill9-g")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var (
		seenMu   sync.Mutex
		seen     = map[string]bool{}
		consumed = make(chan struct{})
	)
	cctx, cstop := context.WithCancel(ctx)
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			seenMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			seenMu.Unlock()
		}
	}()
	acks := &acked{}
	stop := make(chan struct{})
	pdone := produceUntil(ctx, prod, topic, "rec", 100000, stop, acks)
	waitUntil(t, "records acknowledged before the kill", 10*time.Millisecond, 20*time.Second, func() bool { return acks.count() >= 500 })

	gw.kill9(t, kafkaAddrs...)
	atKill := acks.count()
	killed := time.Now()
	gw = serveBinary(t, bin, cfg)
	t.Logf("killed with %d records acknowledged; serving again after %v", atKill, time.Since(killed))
	waitUntil(t, "records acknowledged after the restart", 10*time.Millisecond, 20*time.Second, func() bool { return acks.count() >= atKill+500 })
	close(stop)
	<-pdone
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged %d records (%d after the restart), %d failed", acks.count(), acks.count()-atKill, acks.errs)
	if acks.errs > 0 {
		t.Errorf("%d records failed; an idempotent producer with unlimited retries should lose none", acks.errs)
	}

	// Every acknowledged record: in the cluster, and consumed through the
	// gateway.
	stored := readAll(t, ctx, topic, kgo.SeedBrokers(upstreamAddrs...))
	if missing := acks.missingFrom(stored); len(missing) > 0 {
		t.Errorf("%d acknowledged records are not in the topic, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	waitUntil(t, "every acknowledged record consumed", 10*time.Millisecond, 20*time.Second, func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return len(acks.missingFrom(seen)) == 0
	})
	cstop()
	<-consumed

	// Every control-plane change acknowledged before the kill.
	desc, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr(quotaUser)}})
	if err != nil || len(desc) != 1 || len(desc[0].Values) != 1 || desc[0].Values[0].Value != 123456 {
		t.Errorf("the client quota after kill -9: %v %+v", err, desc)
	}
	scram, err := adm.DescribeUserSCRAMs(ctx, scramUser)
	if err != nil || len(scram[scramUser].CredInfos) != 1 || scram[scramUser].CredInfos[0].Iterations != 4096 {
		t.Errorf("the SCRAM credential after kill -9: %v %+v", err, scram)
	}
	if code, body := apiCall(t, "GET", admin+"/api/v1/apikeys", created.Key, nil); code != http.StatusOK {
		t.Errorf("the API key created before the kill does not authenticate after it: %d %s", code, body)
	}
	if el := time.Since(started); el > 45*time.Second {
		t.Errorf("kill -9 and restart under load took %v", el)
	}
}

// newRestartClient is a franz-go client of boot, closed when the test
// ends, retrying quickly (the gateway is away for a moment).
func newRestartClient(t *testing.T, boot string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return franzClient(t, append([]kgo.Opt{kgo.SeedBrokers(boot),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
}

// produceFlatOut produces 8 KiB records to topic as fast as the gateway
// lets a client, for d of virtual time, and reports what passed each
// second. The client is closed before it returns.
func produceFlatOut(t *testing.T, env *testkit.Env, topic string, d time.Duration) *perSecond {
	t.Helper()
	p := &perSecond{start: time.Now()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32<<10), kgo.WithHooks(p))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	val := make([]byte, 8<<10)
	for ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: val}, nil)
		for cl.BufferedProduceBytes() > 512<<10 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return p
}

// What a restart does to quota state, decided as a Kafka broker's restart
// does it (docs/quotas.md, "After a restart"): the quotas themselves are
// durable, the buckets are not, so after a restart a client gets one fresh
// start-up burst, Q·(N−1)·W, and is then held to Q. Measured through the
// gateway in virtual time, with a control: a new client of the same user
// without a restart gets no burst (the bucket remembers).
func TestRestartQuotaStartUpBurst(t *testing.T) {
	t.Parallel()
	const q = 256 << 10  // producer_byte_rate, bytes/s
	const burst = 10 * q // Q·(N−1)·W with N=11, W=1s
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// The quota is set through the Kafka API: stored, so it survives
		// the restart.
		setQuota := func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("ANONYMOUS")}},
				Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: q}},
			}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("AlterClientQuotas: %v %+v", err, res)
			}
		}
		setQuota()
		report := func(what string, p *perSecond) {
			t.Logf("%s: first 5 s %.1f Q, seconds 10-15 %.2f Q/s", what, p.sum(0, 5)/q, p.sum(10, 15)/5/q)
		}
		// burstThenQ checks that p's client had the start-up burst in its
		// first 5 s and was held to Q in seconds 10-15.
		burstThenQ := func(p *perSecond, who, want, after string) {
			t.Helper()
			if got := p.sum(0, 5); got < burst {
				t.Errorf("%s sent %.1f Q in its first 5 s, want %s (10 Q)", who, got/q, want)
			}
			if got := p.sum(10, 15) / 5; got < 0.8*q || got > 1.25*q {
				t.Errorf("after %s a client sent %.2f Q/s, want Q", after, got/q)
			}
		}

		fresh := produceFlatOut(t, env, "burst", 15*time.Second)
		report("fresh gateway", fresh)
		burstThenQ(fresh, "a fresh client", "at least the start-up burst", "its burst")

		// Control: the same user again, no restart. The bucket is
		// remembered: no second burst.
		again := produceFlatOut(t, env, "burst", 5*time.Second)
		report("new client, no restart", again)
		if got := again.sum(0, 5); got > 8*q {
			t.Errorf("a new client of a throttled user sent %.1f Q in 5 s without a restart, want about 5 Q (no new burst)", got/q)
		}

		env.Restart(t)
		desc, err := func() (kadm.DescribedClientQuotas, error) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext))
			if err != nil {
				return nil, err
			}
			defer cl.Close()
			return kadm.NewClient(cl).DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr("ANONYMOUS")}})
		}()
		if err != nil || len(desc) != 1 || len(desc[0].Values) != 1 || desc[0].Values[0].Value != q {
			t.Fatalf("the quota after the restart: %v %+v", err, desc)
		}
		restarted := produceFlatOut(t, env, "burst", 15*time.Second)
		report("after a restart", restarted)
		burstThenQ(restarted, "after a restart a client", "the start-up burst again", "the restart's burst")
	})
}
