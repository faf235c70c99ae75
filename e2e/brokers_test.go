package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/cli"
	"github.com/tollgate/tollgate/internal/quota/model"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/doctor"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The upstream's brokers behind the gateway: brokers added, removed and
// dead, their configs described and altered through it, and their own
// throttles beside Tollgate's.

// A broker added to or removed from the upstream cluster is reflected in
// the metadata the gateway serves, with a gateway address, and its port
// opens and closes without a restart.
func TestBrokerAddedAndRemoved(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, env, nil)
	dev := env.App.DevCluster()

	brokers := func() map[int32]string {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		var resp *kmsg.MetadataResponse
		var err error
		for try := 0; try < 20; try++ { // a connection to a removed broker fails; clients retry
			if resp, err = req.RequestWith(ctx, cl); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]string{}
		for _, b := range resp.Brokers {
			out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		return out
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if got := brokers(); len(got) != 3 {
		t.Fatalf("metadata lists %d brokers, want 3: %v", len(got), got)
	}
	id, upPort, err := dev.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	eventually("the new broker in metadata", func() bool {
		addr = brokers()[id]
		return addr != ""
	})
	if !env.GatewayAddrs()[addr] {
		t.Fatalf("new broker %d advertised as %s, not a gateway address", id, addr)
	}
	if _, p, _ := net.SplitHostPort(addr); p == strconv.Itoa(upPort) {
		t.Fatalf("new broker advertised with its upstream port %d", upPort)
	}
	// The new port really reaches node id: ask it directly.
	direct, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	// (kfake's fresh listener occasionally refuses a connection in its
	// first milliseconds; the gateway then closes the client connection
	// with upstream_unreachable and the client retries, as here.)
	eventually("an answer through the new broker port", func() bool {
		_, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, direct)
		return err == nil
	})

	if err := dev.RemoveNode(id); err != nil {
		t.Fatal(err)
	}
	eventually("the removed broker gone from metadata", func() bool {
		_, ok := brokers()[id]
		return !ok
	})
	eventually("the removed broker's gateway port closed", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	// The rest of the cluster keeps working.
	p := newClient(t, env, nil, kgo.DefaultProduceTopic("after-removal"), kgo.AllowAutoTopicCreation())
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after removal: %v", err)
	}
}

// An upstream broker that dies closes only the connections that reach it;
// clients recover through fresh metadata and the gateway keeps running.
// The death is the gateway's dialer's (testkit.FaultDialer cuts every
// connection to the broker's address and refuses new ones until revived),
// so it is the same on kfake and on the real cluster, whose broker lives on.
func TestUpstreamBrokerDies(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, upstreamBrokerDies)
}

func upstreamBrokerDies(t *testing.T, up *testkit.Upstream) {
	faults := &testkit.FaultDialer{}
	env := up.Start(t, app.Options{ProxyOpts: []proxy.Option{proxy.WithDialFunc(faults.DialContext)}})
	ctx := ctxT(t, 60*time.Second)
	topic := up.Topic(t, "resilient")
	freshTopics(t, up, topic)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	leaders := env.SpreadLeaders(t, topic, 3)
	// A second client holds a connection to every broker.
	other := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		if err := other.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	node := leaders[1]
	victim := upstreamAddrOf(t, ctx, env, node)
	if n := faults.Kill(victim); n == 0 {
		t.Fatalf("no gateway connection reached node %d (%s)", node, victim)
	}
	if !env.Logs.WaitFor(fmt.Sprintf("node=%d reason=upstream_closed", node), 5*time.Second) {
		t.Fatalf("no client connection to node %d was closed", node)
	}
	// Connections to the other brokers keep working meanwhile.
	for _, p := range []int32{0, 2} {
		if err := other.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("during")}).FirstErr(); err != nil {
			t.Fatalf("partition %d (a live broker) failed while node %d was down: %v", p, node, err)
		}
	}
	for _, p := range []int32{0, 2} {
		if strings.Contains(env.Logs.String(), fmt.Sprintf("node=%d reason=upstream_closed", leaders[p])) {
			t.Fatalf("connections to live broker %d were closed", leaders[p])
		}
	}
	// The broker comes back; the client recovers through fresh metadata.
	faults.Revive(victim)
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce to node %d after it came back: %v", node, err)
	}
}

// upstreamAddrOf is the address the gateway dials for upstream broker id.
func upstreamAddrOf(t *testing.T, ctx context.Context, env *testkit.Env, id int32) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	t.Fatalf("no upstream broker %d", id)
	return ""
}

// Tollgate's connection limits change live through Kafka's config API,
// like a broker's dynamic configs; keys it does not own still reach the
// upstream cluster, and the answers are merged.
//
// On the real cluster the forwarded half is the broker's: its answers,
// error codes and messages reach the client unchanged, and its dynamic
// configs change through its metadata log, so what it describes is waited
// for (bounded). The cluster is shared: the upstream key set is
// log.retention.ms at the cluster default, at a value no topic notices in a
// test's time (seven days and 123 ms, the default being seven days),
// deleted by the test (and on the cluster straight when it ends, should
// the test stop half-way); the legacy AlterConfigs, which replaces the
// resource's whole dynamic config, names the upstream's own dynamic
// defaults (the real cluster's min.insync.replicas) so that it keeps them.
func TestBrokerConfigsLive(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, brokerConfigsLive)
}

func brokerConfigsLive(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	ctx := ctxT(t, 60*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	direct := upstreamAdmin(t, env)
	const retention = "604800123"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := direct.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}); err != nil {
			t.Logf("delete the upstream's log.retention.ms: %v", err)
		}
	})

	// Incremental: one owned key and one upstream key in one resource.
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.connections.per.ip", Value: kmsg.StringPtr("2")},
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsg.StringPtr(retention)},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	got := brokerConfigValues(t, ctx, adm)
	if got["max.connections.per.ip"] != "2" {
		t.Errorf("described max.connections.per.ip = %q, want 2 (all: %v)", got["max.connections.per.ip"], got)
	}
	// The upstream cluster got log.retention.ms but not Tollgate's key;
	// the gateway's merged answer shows the upstream's value.
	eventually(t, 15*time.Second, "the upstream's log.retention.ms", func() error {
		upVals := brokerConfigValues(t, ctx, direct)
		if v, ok := upVals["max.connections.per.ip"]; ok && v == "2" {
			t.Fatalf("Tollgate's key reached the upstream cluster")
		}
		if upVals["log.retention.ms"] != retention {
			return fmt.Errorf("upstream log.retention.ms = %q, want %s", upVals["log.retention.ms"], retention)
		}
		if merged := brokerConfigValues(t, ctx, adm); merged["log.retention.ms"] != retention || merged["max.connections.per.ip"] != "2" {
			return fmt.Errorf("through the gateway: log.retention.ms = %q, max.connections.per.ip = %q", merged["log.retention.ms"], merged["max.connections.per.ip"])
		}
		return nil
	})

	// The upstream's refusal of its part passes unchanged: the same
	// (validate-only) request, through the gateway and straight, gets the
	// same code and message, beside Tollgate's key validated in the same
	// resource.
	invalid := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsg.StringPtr("lots")}}
	want, err := direct.ValidateAlterBrokerConfigs(ctx, invalid)
	if err != nil || len(want) != 1 || want[0].Err == nil {
		t.Fatalf("the upstream accepted log.retention.ms=lots: %v %+v", err, want)
	}
	gotBad, err := adm.ValidateAlterBrokerConfigs(ctx, append(invalid, kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("100")}))
	if err != nil || len(gotBad) != 1 || !errors.Is(gotBad[0].Err, want[0].Err) || gotBad[0].ErrMessage != want[0].ErrMessage {
		t.Errorf("through the gateway: %v %+v, want the upstream's %v %q", err, gotBad, want[0].Err, want[0].ErrMessage)
	}

	// The limit is in force: a third connection from one IP is refused.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	served := 0
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if apiVersions(t, c, 3*time.Second) {
			served++
		}
	}
	if served != 2 {
		t.Fatalf("%d of 3 connections from one IP served under max.connections.per.ip=2", served)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	// Invalid values get Kafka's INVALID_REQUEST and message; non-admins get 31.
	bad, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("lots")}})
	if err != nil || !errors.Is(bad[0].Err, kerr.InvalidRequest) || bad[0].ErrMessage != "Invalid value lots for configuration max.connections: Not a number of type INT" {
		t.Errorf("invalid value: %v %+v", err, bad)
	}
	alice := kadm.NewClient(newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.3"))))
	den, err := alice.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("5")}})
	if err != nil || den[0].Err == nil || !strings.Contains(den[0].Err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("non-admin alter: %v %+v", err, den)
	}

	// Delete, split too: back to unlimited, per-IP connections are served
	// again; the upstream's key is gone from the upstream.
	if res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: "max.connections.per.ip"},
		{Op: kadm.DeleteConfig, Name: "log.retention.ms"},
	}); err != nil || res[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, res)
	}
	eventually(t, 15*time.Second, "log.retention.ms deleted upstream", func() error {
		// Gone (Kafka's cluster default lists dynamic defaults only), or
		// back to the default (kfake lists every key).
		if v := brokerConfigValues(t, ctx, direct)["log.retention.ms"]; v == retention {
			return fmt.Errorf("upstream log.retention.ms = %q", v)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the closes above reach the gateway
	for i := 0; i < 3; i++ {
		conns = append(conns, dialServed(t, env.Bootstrap, 3*time.Second, fmt.Sprintf("connection %d after max.connections.per.ip was deleted", i+1)))
	}

	// Legacy AlterConfigs (replace semantics) through a raw request: it
	// names the upstream's dynamic cluster defaults, which it keeps.
	upDefaults := dynamicDefaults(t, ctx, direct)
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	cfg := kmsg.NewAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "max.connection.creation.rate", kmsg.StringPtr("50")
	r.Configs = append(r.Configs, cfg)
	for k, v := range upDefaults {
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, cfg)
	}
	req.Resources = append(req.Resources, r)
	cl := newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.2")))
	aresp, err := req.RequestWith(ctx, cl)
	if err != nil || len(aresp.Resources) != 1 || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, aresp)
	}
	vals := brokerConfigValues(t, ctx, adm)
	if vals["max.connection.creation.rate"] != "50" {
		t.Errorf("after AlterConfigs: max.connection.creation.rate = %q", vals["max.connection.creation.rate"])
	}
	// Every broker applies the change from the metadata log on its own:
	// the one asked may not have it yet.
	eventually(t, 15*time.Second, "the upstream's dynamic defaults kept", func() error {
		if after := dynamicDefaults(t, ctx, direct); !maps.Equal(after, upDefaults) {
			return fmt.Errorf("the upstream's dynamic defaults after AlterConfigs: %v, want %v (and not Tollgate's key)", after, upDefaults)
		}
		return nil
	})
}

// dynamicDefaults are the cluster-wide dynamic broker configs adm's cluster
// describes (source DYNAMIC_DEFAULT_BROKER_CONFIG, not sensitive): key →
// value.
func dynamicDefaults(t *testing.T, ctx context.Context, adm *kadm.Client) map[string]string {
	t.Helper()
	vals, err := describeBrokerConfigs(t, ctx, adm, func(c kadm.Config) bool {
		return c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig && !c.Sensitive
	})
	if err != nil {
		t.Fatalf("describe the cluster default: %v", err)
	}
	return vals
}

// brokerConfigValues describes the broker configs through adm: key → value.
func brokerConfigValues(t *testing.T, ctx context.Context, adm *kadm.Client) map[string]string {
	t.Helper()
	vals, _ := describeBrokerConfigs(t, ctx, adm, func(kadm.Config) bool { return true })
	return vals
}

// describeBrokerConfigs describes the broker configs through adm: key →
// value of those keep takes, and the first error a resource came back with.
func describeBrokerConfigs(t *testing.T, ctx context.Context, adm *kadm.Client, keep func(kadm.Config) bool) (map[string]string, error) {
	t.Helper()
	desc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{}
	var rerr error
	for _, r := range desc {
		if r.Err != nil && rerr == nil {
			rerr = r.Err
		}
		for _, c := range r.Configs {
			if keep(c) {
				vals[c.Key] = c.MaybeValue()
			}
		}
	}
	return vals, rerr
}

// A broker with quotas of its own behind Tollgate: the client sees, in
// each response, the larger of the two throttles (the gateway's and the
// broker's own throttle_time_ms), as a client of two chained quota
// managers should. On the real cluster a broker quota on the client-id
// far below Tollgate's throttles the client while Tollgate's bucket never
// does; with the quotas the other way round, Tollgate's throttle is the
// one the client sees. kfake enforces no quotas: its row has the second
// half only.
func TestBrokerThrottleCombined(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		brokerID, gatewayID := up.Topic(t, "broker-quota"), up.Topic(t, "gateway-quota")
		env := up.Start(t, app.Options{}, func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{
				{ClientID: &brokerID, ProducerByteRate: ptrF(64 << 20)},
				{ClientID: &gatewayID, ProducerByteRate: ptrF(64 << 10)},
			}
		})
		ctx := ctxT(t, 90*time.Second)
		topic := up.Topic(t, "broker-throttle")
		adm := kadm.NewClient(newClient(t, env, nil))
		if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
		tollgateThrottles := func(id string) int64 {
			for _, u := range env.App.Engine().Usage(time.Now()) {
				if u.Key == model.ProducerByteRate && u.ClientID == id {
					return u.Throttles
				}
			}
			return 0
		}

		if up.Real() {
			// The broker's quota: 64 KiB/s per broker; Tollgate's: 64 MiB/s.
			id := brokerID
			direct := kadm.NewClient(directClient(t, up.Kafka))
			setBroker := func(op kadm.AlterClientQuotaOp) {
				t.Helper()
				res, err := direct.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
					Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: &id}},
					Ops:    []kadm.AlterClientQuotaOp{op},
				}})
				if err != nil || res[0].Err != nil {
					t.Fatalf("broker quota on %s: %v %v", id, err, res)
				}
			}
			setBroker(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: 64 << 10})
			t.Cleanup(func() {
				setBroker(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Remove: true})
			})
			time.Sleep(time.Second) // the brokers apply it from the metadata log
			max := produceUntilThrottled(t, ctx, env, topic, id, 15*time.Second)
			if max == 0 {
				t.Fatal("a broker quota far below the gateway's never throttled the client through the gateway")
			}
			if n := tollgateThrottles(id); n != 0 {
				t.Errorf("Tollgate throttled %d times under a quota 1000× what was sent", n)
			}
			t.Logf("broker's own quota: the client saw throttles up to %v through the gateway, Tollgate none", max)
		}

		// Tollgate's quota far below the broker's (none, or kfake's).
		id := gatewayID
		max := produceUntilThrottled(t, ctx, env, topic, id, 15*time.Second)
		if max == 0 || tollgateThrottles(id) == 0 {
			t.Fatalf("Tollgate's quota did not throttle (client saw %v, Tollgate counted %d)", max, tollgateThrottles(id))
		}
	})
}

// produceUntilThrottled produces 16 KiB random records as client-id id
// until a response carries a throttle (or d passes) and returns the
// largest throttle seen.
func produceUntilThrottled(t *testing.T, ctx context.Context, env *testkit.Env, topic, id string, d time.Duration) time.Duration {
	t.Helper()
	h := &throttleSeen{}
	cl := newClient(t, env, nil, kgo.ClientID(id), kgo.DefaultProduceTopic(topic), kgo.WithHooks(h),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v := make([]byte, 16<<10)
		rand.Read(v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce as %s: %v", id, err)
		}
		if m := time.Duration(h.worst.Load()); m > 0 {
			return m
		}
	}
	return 0
}

// tollgate doctor warns when the brokers enforce client quotas of their
// own under Tollgate's (a client would be throttled twice), against kfake
// and the real broker (issue 21 point 6).
func TestDoctorBrokerQuotas(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 60*time.Second)
		user := up.Topic(t, "doctor-user")
		upstreamUserQuota(t, ctx, upstreamAdmin(t, env), user, map[string]float64{"producer_byte_rate": 2048})
		eventually(t, 15*time.Second, "the doctor's broker quotas check", func() error {
			got := doctorCheck(t, ctx, doctor.Target{Upstream: env.UpstreamAddrs(), DialTimeout: 5 * time.Second}, "broker quotas")
			if got.Status != doctor.Warn || !strings.Contains(got.Detail, "throttled twice") {
				return fmt.Errorf("%+v", got)
			}
			return nil
		})
	})
}

// TestDoctorClusterTopics: the doctor's cluster topics check against
// kfake and a real broker: with no ACL naming the topics it says who may
// then write them, and it names a tenant an ACL lets write the
// configuration topic.
func TestDoctorClusterTopics(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 60*time.Second)
		id := up.Topic(t, "doctor-cluster")
		ct := &doctor.ClusterTopics{Config: "_tollgate-" + id + "-config", Exchange: "_tollgate-" + id + "-exchange", Signed: true}
		check := func() doctor.Result {
			return doctorCheck(t, ctx, doctor.Target{Upstream: env.UpstreamAddrs(), DialTimeout: 5 * time.Second, Cluster: ct}, "cluster topics")
		}
		if got := check(); got.Status != doctor.OK || !strings.Contains(got.Detail, "no ACL names them") {
			t.Fatalf("%+v", got)
		}
		adm := upstreamAdmin(t, env)
		b := kadm.NewACLs().Topics(ct.Config).Allow("User:tenant-" + id).AllowHosts().Operations(kadm.OpWrite)
		if _, err := adm.CreateACLs(ctx, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { adm.DeleteACLs(context.Background(), b) })
		eventually(t, 15*time.Second, "the doctor names the tenant", func() error {
			if got := check(); got.Status != doctor.Warn || !strings.Contains(got.Detail, "User:tenant-"+id+" on "+ct.Config) {
				return fmt.Errorf("%+v", got)
			}
			return nil
		})
	})
}

// TestQuotasImportFromUpstream: tollgate quotas import reads the quotas the
// upstream's brokers enforce (straight to them) and, applied, Tollgate
// enforces their cluster-wide equivalent; on the real cluster its three
// brokers scale the byte rates by 3.
func TestQuotasImportFromUpstream(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{}, func(c *app.Config) { c.Authorization.QuotaAdmins = []string{"ANONYMOUS"} })
		ctx := ctxT(t, 60*time.Second)
		user := up.Topic(t, "import-user")
		upstreamUserQuota(t, ctx, upstreamAdmin(t, env), user, map[string]float64{"producer_byte_rate": 4096, "controller_mutation_rate": 5})
		from := strings.Join(env.UpstreamAddrs(), ",")
		file := filepath.Join(t.TempDir(), "imported.yaml")
		var out, errb bytes.Buffer
		// A real broker learns of a quota from the metadata log a moment
		// after it answered.
		eventually(t, 15*time.Second, "the import lists the user", func() error {
			out.Reset()
			errb.Reset()
			if code := cli.Quotas([]string{"import", "--from", from, "--scale", "brokers", "-o", file, "--bootstrap-server", env.Bootstrap}, &out, &errb); code != 0 {
				return fmt.Errorf("exit %d: %s %s", code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), "user="+user) {
				return fmt.Errorf("not in the plan:\n%s", out.String())
			}
			return nil
		})
		brokers := len(upstreamMetadata(t, env).Brokers)
		for _, line := range []string{
			fmt.Sprintf("+ user=%s producer_byte_rate=%d", user, 4096*brokers),
			fmt.Sprintf("+ user=%s controller_mutation_rate=5", user),
		} {
			if !strings.Contains(out.String(), line) {
				t.Errorf("the plan lacks %q:\n%s", line, out.String())
			}
		}
		out.Reset()
		if code := cli.Quotas([]string{"apply", "--bootstrap-server", env.Bootstrap, "--yes", "-f", file}, &out, &errb); code != 0 {
			t.Fatalf("apply: exit %d: %s %s", code, out.String(), errb.String())
		}
		if r := env.App.Engine().Resolve(model.ProducerByteRate, user, "any", time.Now()); r.Quota != float64(4096*brokers) {
			t.Errorf("Tollgate enforces %v on the user, want %d", r.Quota, 4096*brokers)
		}
	})
}

// doctorCheck runs the doctor against target and returns the check named.
func doctorCheck(t *testing.T, ctx context.Context, target doctor.Target, name string) doctor.Result {
	t.Helper()
	for _, r := range doctor.Run(ctx, target) {
		if r.Check == name {
			return r
		}
	}
	t.Fatalf("the doctor ran no %q check", name)
	return doctor.Result{}
}

// upstreamUserQuota sets a user's quotas straight on the upstream's
// brokers and removes them when the test ends (the real cluster is
// shared).
func upstreamUserQuota(t *testing.T, ctx context.Context, adm *kadm.Client, user string, vals map[string]float64) {
	t.Helper()
	set := func(remove bool) {
		var ops []kadm.AlterClientQuotaOp
		for k, v := range vals {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v, Remove: remove})
		}
		res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &user}}, Ops: ops,
		}})
		if err != nil || res[0].Err != nil {
			t.Errorf("%v %+v", err, res)
		}
	}
	set(false)
	t.Cleanup(func() { set(true) })
}
