package doctor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func cluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func want(t *testing.T, r Result, s Status, substr ...string) {
	t.Helper()
	if r.Status != s {
		t.Errorf("%s: status %s, want %s; detail %q; fix %q", r.Check, r.Status, s, r.Detail, r.Fix)
	}
	for _, sub := range substr {
		if !strings.Contains(r.Detail+" | "+r.Fix, sub) {
			t.Errorf("%s: %q / %q lacks %q", r.Check, r.Detail, r.Fix, sub)
		}
	}
	if s != OK && r.Fix == "" {
		t.Errorf("%s: %s without a fix", r.Check, s)
	}
}

func TestUpstreamReachable(t *testing.T) {
	c := cluster(t)
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second})
	ctx := testCtx(t)
	want(t, r.upstream(ctx), OK, "3 brokers", "node ids 0, 1, 2")
	want(t, r.advertised(ctx), OK, "all resolve", c.ListenAddrs()[0])

	// One dead seed of two: it works today, a restart may not.
	r = newRunner(Target{Upstream: []string{closedAddr(t), c.ListenAddrs()[1]}, DialTimeout: 5 * time.Second})
	want(t, r.upstream(ctx), Warn, "unreachable seeds", "refused")
}

func TestUpstreamUnreachable(t *testing.T) {
	r := newRunner(Target{Upstream: []string{closedAddr(t)}, DialTimeout: 2 * time.Second, ClockTopic: DefaultClockTopic})
	ctx := testCtx(t)
	want(t, r.upstream(ctx), Fail, "no bootstrap server reachable", "connection refused", "upstream.bootstrap")
	// What depends on the brokers says so rather than guessing.
	want(t, r.advertised(ctx), Warn, "not checked")
	want(t, r.clock(ctx), Warn, "not checked")

	// Something listens but does not speak Kafka: Metadata fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	r = newRunner(Target{Upstream: []string{ln.Addr().String()}, DialTimeout: 2 * time.Second})
	want(t, r.upstream(ctx), Fail, "Metadata failed")
}

// rewriteMetadata makes the cluster advertise other broker addresses, as a
// real cluster does whose advertised.listeners name hosts this machine
// cannot resolve or reach.
func rewriteMetadata(c *kfake.Cluster, addr func(id int32) (string, int32)) {
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ClusterID = kmsg.StringPtr("doctor-test")
		resp.ControllerID = 0
		for id := range int32(3) {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID = id
			b.Host, b.Port = addr(id)
			resp.Brokers = append(resp.Brokers, b)
		}
		return resp, nil, true
	})
}

func TestAdvertisedAddressesDoNotResolve(t *testing.T) {
	c := cluster(t)
	rewriteMetadata(c, func(id int32) (string, int32) {
		return fmt.Sprintf("broker-%d.tollgate-doctor.invalid", id), 9092 // RFC 6761: never resolves
	})
	r := newRunner(Target{Upstream: c.ListenAddrs()[:1], DialTimeout: 5 * time.Second})
	ctx := testCtx(t)
	want(t, r.upstream(ctx), OK, "cluster doctor-test")
	want(t, r.advertised(ctx), Fail, "broker-0.tollgate-doctor.invalid, which does not resolve here", "broker 2 advertises", "advertised.listeners", "/etc/hosts")
}

func TestAdvertisedAddressUnreachable(t *testing.T) {
	c := cluster(t)
	real := c.ListenAddrs()
	dead := closedAddr(t)
	rewriteMetadata(c, func(id int32) (string, int32) {
		a := real[id]
		if id == 1 {
			a = dead
		}
		h, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		return h, int32(n)
	})
	r := newRunner(Target{Upstream: real[:1], DialTimeout: 5 * time.Second})
	ctx := testCtx(t)
	want(t, r.upstream(ctx), OK)
	res := r.advertised(ctx)
	want(t, res, Fail, "broker 1 at "+dead+" is unreachable")
	if strings.Contains(res.Detail, "broker 0") || strings.Contains(res.Detail, "broker 2") {
		t.Errorf("reachable brokers reported: %q", res.Detail)
	}
}

// brokerClock makes kfake answer as a Kafka broker does for a topic with
// message.timestamp.type=LogAppendTime: every appended batch carries the
// broker's clock (here the test's clock plus skew), which ListOffsets then
// reports as the partition's largest timestamp. kfake itself keeps the
// producer's timestamps whatever the topic config says, and its own
// LogAppendTime path (the batch's timestamp-type bit) leaves the batch CRC
// stale, so the stamp is written here, before kfake appends, with the CRC
// the batch format defines.
func brokerClock(t *testing.T, c *kfake.Cluster, skew time.Duration) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range kreq.(*kmsg.ProduceRequest).Topics {
			for i := range tp.Partitions {
				p := &tp.Partitions[i]
				var b kmsg.RecordBatch
				if err := b.ReadFrom(p.Records); err != nil {
					t.Errorf("produce shim: %v", err)
					continue
				}
				now := time.Now().Add(skew).UnixMilli()
				b.FirstTimestamp, b.MaxTimestamp = now, now
				raw := b.AppendTo(nil)
				binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], castagnoli))
				p.Records = raw
			}
		}
		return nil, nil, false // kfake appends it as usual
	})
}

// clockTopic creates a topic with partition i led by broker i (kfake picks
// leaders at random; a real cluster leads with the first replica the doctor
// assigns).
func clockTopic(t *testing.T, ctx context.Context, c *kfake.Cluster, name string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, map[string]*string{"message.timestamp.type": kmsg.StringPtr("LogAppendTime")}, name); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if err := c.MoveTopicPartition(name, p, p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClockAgrees(t *testing.T) {
	c := cluster(t)
	ctx := testCtx(t)
	brokerClock(t, c, 0)
	clockTopic(t, ctx, c, "doctor-clock", 3)
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, ClockTopic: "doctor-clock"})
	want(t, r.upstream(ctx), OK)
	want(t, r.clock(ctx), OK, "broker 0: ", "broker 1: ", "broker 2: ")
	// Again: the partitions' largest stamps are the new probes.
	want(t, r.clock(ctx), OK, "broker 0: ", "broker 1: ", "broker 2: ")
}

// Ten minutes apart, either way, is refused.
func TestClockSkewFails(t *testing.T) {
	ctx := testCtx(t)
	c := cluster(t)
	clockTopic(t, ctx, c, "doctor-clock", 3)
	brokerClock(t, c, 0)
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, ClockTopic: "doctor-clock", Now: ahead})
	want(t, r.upstream(ctx), OK)
	want(t, r.clock(ctx), Fail, "broker 0: -", "broker 2: -", "of broker 0, 1, 2 with NTP")
	skewNear(t, r.clock(ctx).Detail, -10*time.Minute)

	c = cluster(t)
	clockTopic(t, ctx, c, "doctor-clock", 3)
	brokerClock(t, c, 10*time.Minute)
	r = newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, ClockTopic: "doctor-clock"})
	want(t, r.upstream(ctx), OK)
	want(t, r.clock(ctx), Fail, "broker 1: +")

	// Two seconds: noticed, not refused.
	c = cluster(t)
	clockTopic(t, ctx, c, "doctor-clock", 3)
	brokerClock(t, c, 2*time.Second)
	r = newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, ClockTopic: "doctor-clock"})
	want(t, r.upstream(ctx), OK)
	res := r.clock(ctx)
	want(t, res, Warn, "broker 0: +", "NTP")
	skewNear(t, res.Detail, 2*time.Second)
}

// The doctor creates its topic: one partition per broker, stamped by the
// brokers, short retention.
func TestClockCreatesTopic(t *testing.T) {
	c := cluster(t)
	ctx := testCtx(t)
	brokerClock(t, c, 0)
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, ClockTopic: "doctor-clock"})
	want(t, r.upstream(ctx), OK)
	res := r.clock(ctx)
	if res.Status == Fail {
		t.Fatalf("clock: %+v", res)
	}
	for id := range 3 { // measured, or reported as not covered (kfake's leaders are random)
		if !strings.Contains(res.Detail, fmt.Sprintf("broker %d: ", id)) && !strings.Contains(res.Detail, "were not compared") {
			t.Errorf("broker %d missing from %q", id, res.Detail)
		}
	}
	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, "doctor-clock")
	if err != nil || len(tds["doctor-clock"].Partitions) != 3 {
		t.Fatalf("topic: %v %+v", err, tds)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "doctor-clock")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cfg := range rcs[0].Configs {
		if cfg.Value != nil {
			got[cfg.Key] = *cfg.Value
		}
	}
	if got["message.timestamp.type"] != "LogAppendTime" || got["retention.ms"] != "3600000" || got["cleanup.policy"] != "delete" {
		t.Errorf("topic configs: %v", got)
	}
}

func TestClockCannotTell(t *testing.T) {
	c := cluster(t)
	ctx := testCtx(t)
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, ClockTopic: "doctor-clock"})
	want(t, r.upstream(ctx), OK)
	want(t, r.clock(ctx), Warn, "kept the producer's timestamp", "message.timestamp.type=LogAppendTime")

	r.t.ClockTopic = ""
	want(t, r.clock(ctx), Warn, "not checked", "chronyc")

	// An existing one-partition topic covers one broker only.
	brokerClock(t, c, 0)
	clockTopic(t, ctx, c, "small-clock", 1)
	r.t.ClockTopic = "small-clock"
	want(t, r.clock(ctx), Warn, "broker 0: +", "brokers [1 2] lead no partition", "delete topic small-clock")
}

func TestClockEmbeddedCluster(t *testing.T) {
	r := newRunner(Target{ClockTopic: DefaultClockTopic})
	ctx := testCtx(t)
	want(t, r.upstream(ctx), Warn, "embedded development cluster", "upstream.bootstrap")
	want(t, r.advertised(ctx), OK)
	want(t, r.clock(ctx), OK, "this host's clock")
}

func TestSkewBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lo, hi := skew(t0, t0.Add(20*time.Millisecond), t0.Add(10*time.Millisecond))
	if lo != -10*time.Millisecond || hi != 11*time.Millisecond {
		t.Errorf("skew: [%s, %s]", lo, hi)
	}
	for _, c := range []struct {
		lo, hi time.Duration
		want   Status
	}{
		{-10 * time.Millisecond, 11 * time.Millisecond, OK},
		{-time.Second, time.Second, OK},
		{500 * time.Millisecond, 1500 * time.Millisecond, Warn}, // may exceed the tolerance
		{2 * time.Second, 3 * time.Second, Warn},
		{-6 * time.Minute, -5*time.Minute - time.Second, Fail},
		{5*time.Minute + time.Millisecond, 6 * time.Minute, Fail},
		{4 * time.Minute, 6 * time.Minute, Warn}, // not certainly beyond the limit
	} {
		if got := skewVerdict(c.lo, c.hi); got != c.want {
			t.Errorf("skewVerdict(%s, %s) = %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
}

// skewNear checks that broker 0's skew in a clock check's detail is want
// within the uncertainty the check reports with it (half the probe's round
// trip) and a millisecond of rounding: the estimate is as good as it says,
// however slow this machine is.
func skewNear(t *testing.T, detail string, want time.Duration) {
	t.Helper()
	m := regexp.MustCompile(`broker 0: ([+-]?)(\S+) ±(\S+)`).FindStringSubmatch(strings.TrimSuffix(detail, ";"))
	if m == nil {
		t.Fatalf("no skew for broker 0 in %q", detail)
	}
	got, err1 := time.ParseDuration(m[2])
	unc, err2 := time.ParseDuration(strings.TrimRight(m[3], ";,"))
	if err1 != nil || err2 != nil {
		t.Fatalf("skew %q ± %q in %q: %v %v", m[2], m[3], detail, err1, err2)
	}
	if m[1] == "-" {
		got = -got
	}
	if d := got - want; d < -unc-time.Millisecond || d > unc+time.Millisecond {
		t.Errorf("skew of %v reported as %v ±%v (%q)", want, got, unc, detail)
	}
}

// Quotas the brokers enforce themselves would throttle a client twice:
// the doctor warns, naming them as kafka-configs does.
func TestBrokerQuotas(t *testing.T) {
	c := cluster(t)
	ctx := testCtx(t)
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second})
	want(t, r.upstream(ctx), OK)
	want(t, r.brokerQuotas(ctx), OK, "no client quotas")

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	alice := "alice"
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &alice}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("%v %+v", err, res)
	}
	got := r.brokerQuotas(ctx)
	want(t, got, Warn, "1 client quota entities", "user=alice producer_byte_rate=1024", "throttled twice")
	if !strings.Contains(got.Fix, "kafka-configs") {
		t.Errorf("fix %q does not say how to remove them", got.Fix)
	}

	r = newRunner(Target{})
	want(t, r.brokerQuotas(ctx), OK, "embedded cluster")
}

// TestClusterTopics: the check names the principals other than
// Tollgate's that an ACL lets write the Tollgate cluster's topics
// (literal, prefixed, wildcard), and says when records are not signed.
func TestClusterTopics(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableACLs(), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := testCtx(t)
	login := kgo.SASL(plain.Auth{User: "admin", Pass: "admin-pw"}.AsMechanism())
	ct := &ClusterTopics{Config: "_tollgate-x-config", Exchange: "_tollgate-x-exchange", Signed: true, Principal: "User:svc"}
	r := newRunner(Target{Upstream: c.ListenAddrs(), DialTimeout: 5 * time.Second, Client: []kgo.Opt{login}, Cluster: ct})
	want(t, r.upstream(ctx), OK)
	want(t, r.clusterTopics(ctx), OK, "no ACL lets a principal other than Tollgate's")

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), login)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	grant := func(principal string, b *kadm.ACLBuilder) {
		t.Helper()
		b = b.Allow(principal).AllowHosts().Operations(kadm.OpWrite)
		res, err := adm.CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	grant("User:svc", kadm.NewACLs().Topics(ct.Config, ct.Exchange))
	want(t, r.clusterTopics(ctx), OK)
	grant("User:tenant", kadm.NewACLs().Topics("_tollgate-").ResourcePatternType(kadm.ACLPatternPrefixed))
	grant("User:*", kadm.NewACLs().Topics("*"))
	got := r.clusterTopics(ctx)
	want(t, got, Warn, "other than Tollgate's (User:svc)", "User:tenant on _tollgate-x-config (prefixed _tollgate-)", "User:* on _tollgate-x-exchange (literal *)")
	if strings.Contains(got.Detail, "User:svc on") {
		t.Errorf("Tollgate's own principal listed: %s", got.Detail)
	}
	ct.Principal = ""
	want(t, r.clusterTopics(ctx), Warn, "cannot tell which one is Tollgate's", "User:svc on _tollgate-x-config (literal _tollgate-x-config)")
	ct.Signed = false
	want(t, r.clusterTopics(ctx), Warn, "cluster.secret_file is not set")
}
