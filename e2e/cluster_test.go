package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/devcluster"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// A Tollgate cluster: three gateway instances with one cluster.id in front
// of one Kafka cluster, over real sockets; three `tollgate serve`
// processes of one, one of them killed; and one quota for a cluster, in
// virtual time.

// startCluster runs n instances in front of a 3-broker kfake cluster the
// test owns (it outlives every instance), each with its own data_dir, a
// PLAINTEXT listener whose 127.0.0.2 is the quota admin "admin", and a
// SASL_PLAINTEXT one; the admin port's admin key is in adminKey. It waits
// until every instance lists all n.
func startTollgateCluster(t *testing.T, n int, opts func(i int) app.Options, edit ...func(i int, c *app.Config)) (envs []*testkit.Env, upstream []string, adminKey string) {
	t.Helper()
	testkit.SkipIfRealOnly(t)
	return startTollgateClusterOn(t, &testkit.Upstream{Name: "kfake"}, n, opts, edit...)
}

// tollgateClusterID is the cluster.id startTollgateClusterOn gives the
// instances: "e2e" on a kfake cluster of the test's own, one of the test's
// own on the shared real cluster (the id names the cluster's topics).
func tollgateClusterID(t *testing.T, up *testkit.Upstream) string {
	if up.Real() {
		return up.Topic(t, "e2e")
	}
	return "e2e"
}

// startTollgateClusterOn is startTollgateCluster in front of up: a kfake
// cluster of the test's own, or the shared real cluster (the Tollgate
// cluster's topics on it, replicated).
func startTollgateClusterOn(t *testing.T, up *testkit.Upstream, n int, opts func(i int) app.Options, edit ...func(i int, c *app.Config)) (envs []*testkit.Env, upstream []string, adminKey string) {
	t.Helper()
	if up.Real() {
		upstream = up.Kafka.Bootstrap(kafka.Plaintext)
	} else {
		kc, err := kfake.NewCluster(kfake.NumBrokers(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kc.Close)
		upstream = kc.ListenAddrs()
	}
	clusterID := tollgateClusterID(t, up)
	credFile, keys := writeCredentials(t, nil, "admin")
	for i := range n {
		var o app.Options
		if opts != nil {
			o = opts(i)
		}
		cfgEdit := func(c *app.Config) {
			c.Upstream.Bootstrap = upstream
			c.Cluster.ID = clusterID
			c.Cluster.InstanceID = fmt.Sprintf("tg-%c", 'a'+i)
			c.Cluster.ExchangeInterval = 200 * time.Millisecond
			// Generous: the race detector and a loaded machine delay
			// reports; a false "cut off" would fail the test, not the code.
			c.Cluster.SessionTimeout = 3 * time.Second
			c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{{CIDR: "127.0.0.2/32", Principal: "admin"}}
			c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"})
			c.Authorization.QuotaAdmins = []string{"admin"}
			c.CredentialsFile = credFile
			for _, e := range edit {
				e(i, c)
			}
		}
		envs = append(envs, up.Start(t, o, cfgEdit))
	}
	waitMembers(t, envs, n)
	return envs, upstream, keys[0]
}

// waitMembers waits until every env lists n live instances.
func waitMembers(t *testing.T, envs []*testkit.Env, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("every instance lists %d", n), 20*time.Millisecond, 20*time.Second, func() bool {
		for _, e := range envs {
			st, ok := e.App.Cluster()
			if !ok || st.Live != n || !st.ConfigLog.Ready {
				return false
			}
		}
		return true
	})
}

func describeAlice(t *testing.T, ctx context.Context, adm *kadm.Client) (float64, bool) {
	t.Helper()
	qs, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kadmStr("alice"), MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		for _, v := range q.Values {
			if v.Key == "producer_byte_rate" {
				return v.Value, true
			}
		}
	}
	return 0, false
}

func kadmStr(s string) *string { return &s }

// setAliceRate sets user alice's producer_byte_rate through adm.
func setAliceRate(t *testing.T, ctx context.Context, adm *kadm.Client, v float64) {
	t.Helper()
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kadmStr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: v}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
}

// TestClusterSharedControlPlane: a quota set through A is read back at once
// through A and reaches B and C; alterations through two instances at once
// converge; an API key created on A logs in on C; a SCRAM credential set
// through B logs in on A; a broker config set through C is described
// through A; the audit event is written once, by the instance that took
// the change; GET /api/v1/cluster lists every instance.
func TestClusterSharedControlPlane(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, clusterSharedControlPlane)
}

func clusterSharedControlPlane(t *testing.T, up *testkit.Upstream) {
	envs, _, adminKey := startTollgateClusterOn(t, up, 3, nil)
	logins := up.Topic(t, "cluster-logins")
	a, b, c := envs[0], envs[1], envs[2]
	ctx := ctxT(t, 2*time.Minute)
	defer http.DefaultClient.CloseIdleConnections()
	admA, admB, admC := adminAs(t, a, "127.0.0.2"), adminAs(t, b, "127.0.0.2"), adminAs(t, c, "127.0.0.2")

	alter := func(adm *kadm.Client, v float64) { t.Helper(); setAliceRate(t, ctx, adm, v) }
	alter(admA, 1<<20)
	if v, ok := describeAlice(t, ctx, admA); !ok || v != 1<<20 {
		t.Fatalf("A does not read its own write back: %v %v", v, ok)
	}
	start := time.Now()
	for _, adm := range []*kadm.Client{admB, admC} {
		waitUntil(t, "B and C apply A's change", 5*time.Millisecond, 30*time.Second, func() bool {
			v, ok := describeAlice(t, ctx, adm)
			return ok && v == 1<<20
		})
	}
	t.Logf("B and C applied A's change within %v", time.Since(start))
	// Enforced on B too: the engine there has alice's quota.
	if r := b.App.Engine().Resolve(0, "alice", "x", time.Now()); r.Quota != 1<<20 {
		t.Fatalf("B's engine resolves alice to %v", r.Quota)
	}

	// Two instances altering one key at once end with one value.
	var wg sync.WaitGroup
	for i, adm := range []*kadm.Client{admA, admB} {
		wg.Go(func() {
			for j := range 10 {
				alter(adm, float64(1000*(i+1)+j))
			}
		})
	}
	wg.Wait()
	var seen []float64
	waitUntil(t, "all three agree", 10*time.Millisecond, 30*time.Second, func() bool {
		seen = seen[:0]
		for _, adm := range []*kadm.Client{admA, admB, admC} {
			v, _ := describeAlice(t, ctx, adm)
			seen = append(seen, v)
		}
		return seen[0] == seen[1] && seen[1] == seen[2]
	})
	if seen[0] != 1009 && seen[0] != 2009 {
		t.Fatalf("converged on %v, not either instance's last write", seen[0])
	}

	// An API key created on A logs in on C.
	body, _ := json.Marshal(map[string]string{"identity": "team-c"})
	req, _ := http.NewRequest("POST", "http://"+a.App.HTTPAddr()+"/api/v1/apikeys", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID, Key string }
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create API key on A: %d", resp.StatusCode)
	}
	if _, err := admA.CreateTopic(ctx, 1, -1, nil, logins); err != nil {
		t.Fatal(err)
	}
	login := func(env *testkit.Env, opt kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(env.App.Gateway().BootstrapAddrs()["SASL"]), opt, kgo.DefaultProduceTopic(logins),
			kgo.RecordDeliveryTimeout(2*time.Second), kgo.RecordRetries(1))
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	waitUntil(t, "the key created on A logs in on C", 20*time.Millisecond, 30*time.Second, func() bool {
		return login(c, kgo.SASL(plain.Auth{User: "token", Pass: created.Key}.AsMechanism())) == nil
	})

	// A SCRAM credential set through B logs in on A.
	res, err := admB.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs through B: %v %v", err, res.Error())
	}
	waitUntil(t, "carol logs in on A", 20*time.Millisecond, 30*time.Second, func() bool {
		return login(a, kgo.SASL(scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha256Mechanism())) == nil
	})

	// A broker config set through C is described through A.
	if _, err := admC.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "max.connections.per.ip", Value: kadmStr("50")}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "A describes C's broker config", 20*time.Millisecond, 30*time.Second, func() bool {
		rc, err := admA.DescribeBrokerConfigs(ctx)
		if err != nil {
			return false
		}
		for _, r := range rc {
			for _, kv := range r.Configs {
				if kv.Key == "max.connections.per.ip" && kv.Value != nil && *kv.Value == "50" {
					return true
				}
			}
		}
		return false
	})

	// The audit event of the first change: on A, not on B.
	countAlters := func(env *testkit.Env) int {
		code, out := apiCall(t, "GET", "http://"+env.App.HTTPAddr()+"/api/v1/audit?limit=1000", adminKey, nil)
		if code != 200 {
			t.Fatalf("audit: %d %s", code, out)
		}
		var evs []struct {
			Action  string `json:"action"`
			Outcome string `json:"outcome"`
			Changes []struct {
				New json.RawMessage `json:"new"`
			} `json:"changes"`
		}
		if err := json.Unmarshal(out, &evs); err != nil {
			var wrapped struct {
				Events json.RawMessage `json:"events"`
			}
			if json.Unmarshal(out, &wrapped) != nil || json.Unmarshal(wrapped.Events, &evs) != nil {
				t.Fatalf("audit: %s", out)
			}
		}
		n := 0
		for _, ev := range evs {
			if ev.Action == "alter_client_quotas" && ev.Outcome == "applied" && len(ev.Changes) == 1 && string(ev.Changes[0].New) == "1048576" {
				n++
			}
		}
		return n
	}
	waitUntil(t, "A's audit log has its change", 20*time.Millisecond, 30*time.Second, func() bool { return countAlters(a) > 0 })
	if nb := countAlters(b); nb != 0 {
		t.Fatalf("the audit event of A's change: %d on B (want it once, on A)", nb)
	}

	// The instance list.
	// Under load a report can come late: the list is waited for, as
	// members are (the session timeout is 3 s here).
	var (
		code int
		out  []byte
	)
	var st struct {
		ClusterID string `json:"cluster_id"`
		Instances []struct {
			ID   string `json:"instance_id"`
			Self bool   `json:"self"`
		} `json:"instances"`
	}
	listed := func() bool {
		code, out = apiCall(t, "GET", "http://"+b.App.HTTPAddr()+"/api/v1/cluster", adminKey, nil)
		st.Instances = nil
		json.Unmarshal(out, &st)
		return code == 200 && len(st.Instances) == 3
	}
	waitUntil(t, "B lists three instances", 50*time.Millisecond, 30*time.Second, listed)
	if code != 200 || st.ClusterID != tollgateClusterID(t, up) || len(st.Instances) != 3 || st.Instances[0].ID != "tg-b" || !st.Instances[0].Self {
		t.Fatalf("GET /api/v1/cluster on B: %d %s", code, out)
	}

	// On a real cluster, the Tollgate cluster's own topics are replicated
	// by the brokers: every partition on three replicas.
	if up.Real() {
		md, err := kadm.NewClient(directClient(t, up.Kafka)).Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for name, td := range md.Topics {
			if !strings.Contains(name, tollgateClusterID(t, up)) {
				continue
			}
			found++
			for _, p := range td.Partitions {
				if len(p.Replicas) != 3 || len(p.ISR) < 2 {
					t.Errorf("the Tollgate cluster's topic %s partition %d: replicas %v, ISR %v; want 3 replicas", name, p.Partition, p.Replicas, p.ISR)
				}
			}
		}
		if found < 2 {
			t.Errorf("found %d topics of the Tollgate cluster %s on the real cluster, want its configuration and exchange topics", found, tollgateClusterID(t, up))
		}
	}
}

// TestClusterInstanceCutOff: an instance whose every connection to the
// upstream is blackholed drops out of the others' lists, says it is cut
// off, refuses alterations with a clear error and keeps enforcing the
// quotas it had; when the upstream comes back it rejoins.
func TestClusterInstanceCutOff(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, clusterInstanceCutOff)
}

func clusterInstanceCutOff(t *testing.T, up *testkit.Upstream) {
	faults := &testkit.FaultDialer{}
	envs, upstream, _ := startTollgateClusterOn(t, up, 3, func(i int) app.Options {
		if i == 2 {
			return app.Options{UpstreamDial: faults.DialContext}
		}
		return app.Options{}
	}, func(i int, c *app.Config) {
		if i == 2 {
			c.Upstream.RequestTimeout = 2 * time.Second
		}
	})
	ctx := ctxT(t, 60*time.Second)
	admA := adminAs(t, envs[0], "127.0.0.2")
	res, err := admA.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kadmStr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	cEnv := envs[2]
	waitUntil(t, "C applies the quota", 10*time.Millisecond, 10*time.Second, func() bool {
		return cEnv.App.Engine().Resolve(0, "alice", "x", time.Now()).Quota == 4096
	})
	for _, addr := range upstream {
		faults.Set(addr, testkit.Fault{Blackhole: true})
	}
	waitUntil(t, "C sees itself cut off", 20*time.Millisecond, 20*time.Second, func() bool {
		st, _ := cEnv.App.Cluster()
		return !st.Connected
	})
	waitMembers(t, envs[:2], 2)
	// An alteration through C is refused, clearly, and changes nothing.
	admC := adminAs(t, cEnv, "127.0.0.2")
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	res, err = admC.AlterClientQuotas(actx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kadmStr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}},
	}})
	cancel()
	if err == nil && res[0].Err == nil {
		t.Fatal("C acknowledged an alteration while cut off from the upstream")
	}
	if err == nil {
		t.Logf("C refused: %v %s", res[0].Err, res[0].ErrMessage)
	}
	if q := cEnv.App.Engine().Resolve(0, "alice", "x", time.Now()).Quota; q != 4096 {
		t.Fatalf("C's engine no longer enforces the last known quota: %v", q)
	}
	for _, addr := range upstream {
		faults.Clear(addr)
	}
	waitMembers(t, envs, 3)
	waitUntil(t, "C hears the exchange again", 20*time.Millisecond, 20*time.Second, func() bool {
		st, _ := cEnv.App.Cluster()
		return st.Connected
	})
}

// TestClusterConnectionLimitSplit: max.connections.per.ip set once, through
// A, holds for the Tollgate cluster: each of the three live instances takes
// ⌈3/3⌉ = 1 connection from an address, so the address gets 3 in all,
// however it spreads them.
func TestClusterConnectionLimitSplit(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, clusterConnectionLimitSplit)
}

func clusterConnectionLimitSplit(t *testing.T, up *testkit.Upstream) {
	envs, _, _ := startTollgateClusterOn(t, up, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	if _, err := adminAs(t, envs[0], "127.0.0.2").AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "max.connections.per.ip", Value: kadmStr("3")}}); err != nil {
		t.Fatal(err)
	}
	// open dials env from 127.0.0.9 and reports whether the gateway
	// answers ApiVersions on the connection (admitted) or closes it.
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	admitted := func(env *testkit.Env) bool {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
		c, err := d.Dial("tcp", env.Bootstrap)
		if err != nil {
			return false
		}
		open = append(open, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(probeRequest()); err != nil {
			return false
		}
		_, err = readFrame(c)
		c.SetDeadline(time.Time{})
		return err == nil
	}
	// Every instance applies the limit (split over three) before the probes.
	waitUntil(t, "every instance splits the limit", 20*time.Millisecond, 10*time.Second, func() bool {
		for _, e := range envs {
			if e.App.Admission().MaxConnectionsPerIP() != 1 {
				return false
			}
		}
		return true
	})
	got := []bool{admitted(envs[0]), admitted(envs[0]), admitted(envs[1]), admitted(envs[2]), admitted(envs[2])}
	if want := []bool{true, false, true, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("connections from one address to A, A, B, C, C: admitted %v, want %v", got, want)
	}
}

// TestClusterInstanceKill9: three `tollgate serve` processes of one
// Tollgate cluster; one is killed with SIGKILL mid-run (no last report).
// The other two drop it after the session timeout and keep serving; the
// killed one, restarted on its data_dir, reads the shared state back
// (including a change made while it was down) and rejoins.
func TestClusterInstanceKill9(t *testing.T) {
	t.Parallel()
	bin := buildTollgate(t, t.TempDir())
	up, err := devcluster.Start(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ctx := ctxT(t, 90*time.Second)
	defer http.DefaultClient.CloseIdleConnections()

	base := freePorts(t, 15) // per instance: bootstrap, admin, brokers 0-2
	type inst struct {
		cfg, boot, admin string
		proc             *gatewayProc
	}
	var insts []*inst
	for i := range 3 {
		p := base + 5*i
		dir := t.TempDir()
		in := &inst{cfg: filepath.Join(dir, "tollgate.yaml"), boot: loopback(p), admin: "http://" + loopback(p+1)}
		yaml := gatewayYAML(filepath.Join(dir, "data"), p, up.Addrs(), "", fmt.Sprintf(`authorization:
  quota_admins: [ANONYMOUS]
  allow_anonymous_describe: true
cluster:
  id: kill9
  instance_id: i%d
  exchange_interval: 250ms
`, i))
		if err := os.WriteFile(in.cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		in.proc = serveBinary(t, bin, in.cfg)
		insts = append(insts, in)
	}
	live := func(in *inst) int {
		resp, err := http.Get(in.admin + "/api/v1/cluster")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var st struct {
			Live int `json:"live"`
		}
		json.NewDecoder(resp.Body).Decode(&st)
		return st.Live
	}
	waitUntil(t, "three instances", 20*time.Millisecond, 30*time.Second, func() bool {
		return live(insts[0]) == 3 && live(insts[1]) == 3 && live(insts[2]) == 3
	})

	// kill -9 the third.
	killed := time.Now()
	insts[2].proc.kill9(t, insts[2].boot)
	waitUntil(t, "the others drop the killed instance", 20*time.Millisecond, 30*time.Second, func() bool {
		return live(insts[0]) == 2 && live(insts[1]) == 2
	})
	t.Logf("dropped %v after the kill (session timeout 4 × 250 ms)", time.Since(killed))

	// The survivors serve and change the shared state meanwhile.
	adm := kadm.NewClient(newRestartClient(t, insts[1].boot))
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("while-down")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4242}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter through a survivor: %v %+v", err, res)
	}

	// Restarted on its data_dir, it reads the change and rejoins.
	insts[2].proc = serveBinary(t, bin, insts[2].cfg)
	waitUntil(t, "three instances again", 20*time.Millisecond, 30*time.Second, func() bool {
		return live(insts[0]) == 3 && live(insts[2]) == 3
	})
	qs, err := kadm.NewClient(newRestartClient(t, insts[2].boot)).DescribeClientQuotas(ctx, true,
		[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kmsg.StringPtr("while-down"), MatchType: kmsg.QuotasMatchTypeExact}})
	if err != nil || len(qs) != 1 || qs[0].Values[0].Value != 4242 {
		t.Fatalf("the restarted instance describes %+v (%v), want the change made while it was down", qs, err)
	}
	// A's metrics counted the leave by timeout and the rejoin.
	resp, err := http.Get(insts[0].admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, want := range []string{`tollgate_cluster_membership_events_total{event="leave",reason="timeout"} 1`, `tollgate_cluster_instances 3`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("A's /metrics lacks %q", want)
		}
	}
}

// One quota for a Tollgate cluster, in virtual time: three gateways and the
// embedded cluster in one synctest bubble, real franz-go producers spread
// unevenly over the gateways. The quota is set once, through the first
// gateway's Kafka API, and every gateway enforces it.

// bubbleCluster starts n gateways in the caller's bubble: the first runs
// the embedded cluster, the others front it; all share cluster.id.
func bubbleCluster(t *testing.T, n int, edit func(c *app.Config)) []*testkit.Env {
	t.Helper()
	nw := &testkit.Network{}
	var envs []*testkit.Env
	for i := range n {
		o := app.Options{UpstreamDial: nw.DialContext}
		envs = append(envs, testkit.StartInBubbleOn(t, nw, o, func(c *app.Config) {
			c.Cluster.ID = "vt"
			c.Cluster.InstanceID = fmt.Sprintf("vt-%d", i)
			c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
			if i > 0 {
				c.Upstream.Bootstrap = envs[0].App.DevCluster().Addrs()
			}
			if edit != nil {
				edit(c)
			}
		}))
	}
	for deadline := time.Now().Add(time.Minute); ; {
		all := true
		for _, e := range envs {
			if st, ok := e.App.Cluster(); ok && (st.Live != n || !st.ConfigLog.Ready) {
				all = false
			}
		}
		if all {
			return envs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %d gateways did not find each other", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setTenantQuota sets producer_byte_rate q for client-id tenant through
// env's Kafka API and waits until every gateway enforces it.
func setTenantQuota(t *testing.T, envs []*testkit.Env, q float64) {
	t.Helper()
	adm := kadm.NewClient(bubbleClient(t, envs[0]))
	res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kadmStr("tenant")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: q}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter through the first gateway: %v %v", err, res)
	}
	for _, e := range envs {
		for e.App.Engine().Resolve(0, "ANONYMOUS", "tenant", time.Now()).Quota != q {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// spread runs franz-go producers of client-id tenant, conns[i] of them
// through gateway i, each at full speed from from to until (offsets from
// start), all counted into one perSecond.
func spread(t *testing.T, envs []*testkit.Env, p *perSecond, conns []int, from, until time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, n := range conns {
		for j := range n {
			cl := bubbleClient(t, envs[i], kgo.WithHooks(p), kgo.ClientID("tenant"), kgo.ProducerBatchMaxBytes(32<<10))
			wg.Go(func() {
				time.Sleep(time.Until(p.start.Add(from)))
				produceFor(cl, fmt.Sprintf("spread-%d-%d", i, j), until-from)
			})
		}
	}
	return &wg
}

// TestSynctestClusterOneQuota: a client with 1, 4 and 1 producers on three
// gateways gets Q in total — within ±5 % over 30 s after the start-up
// burst — and its start-up burst is one Q·(N−1)·W, not three.
func TestSynctestClusterOneQuota(t *testing.T) {
	t.Parallel()
	// The reference: the same six producers on one gateway, no cluster.
	var one float64
	synctest.Test(t, func(t *testing.T) {
		envs := bubbleCluster(t, 1, func(c *app.Config) { c.Cluster = app.ClusterConfig{} })
		setTenantQuota(t, envs, vq)
		p := &perSecond{start: time.Now()}
		spread(t, envs, p, []int{6}, 0, 12*time.Second).Wait()
		one = p.sum(0, 10) / vq
	})
	synctest.Test(t, func(t *testing.T) {
		envs := bubbleCluster(t, 3, nil)
		setTenantQuota(t, envs, vq)
		p := &perSecond{start: time.Now()}
		spread(t, envs, p, []int{1, 4, 1}, 0, 45*time.Second).Wait()
		got := p.sum(15, 45) / (vq * 30)
		first := p.sum(0, 10) / vq
		t.Logf("30 s after the burst: %.4f × Q; first 10 s: %.2f × Q (one gateway alone: %.2f × Q)", got, first, one)
		if got < 0.95 || got > 1.05 {
			t.Errorf("the three gateways gave the client %.4f × Q over 30 s, want within ±5 %%", got)
		}
		if first > 1.10*one || first < 0.9*one {
			t.Errorf("the first 10 s carried %.2f × Q through three gateways, %.2f through one: want one start-up burst, within 10 %%", first, one)
		}
	})
}

// TestSynctestClusterConnectionsMove: midway the client's producers move
// from two gateways to the third (clients reconnecting elsewhere); the
// total stays Q.
func TestSynctestClusterConnectionsMove(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		envs := bubbleCluster(t, 3, nil)
		setTenantQuota(t, envs, vq)
		p := &perSecond{start: time.Now()}
		before := spread(t, envs, p, []int{2, 1, 0}, 0, 30*time.Second)
		after := spread(t, envs, p, []int{0, 0, 3}, 30*time.Second, 50*time.Second)
		before.Wait()
		after.Wait()
		got := p.sum(15, 45) / (vq * 30)
		t.Logf("30 s around the move: %.4f × Q", got)
		if got < 0.95 || got > 1.05 {
			t.Errorf("%.4f × Q over the 30 s around the move, want within ±5 %%", got)
		}
	})
}
