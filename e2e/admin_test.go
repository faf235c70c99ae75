package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// adminAddrs is what a client of the gateway must be told about brokers:
// node id -> the gateway's port for that node.
type adminAddrs struct {
	env   *testkit.Env
	host  string
	ports map[int32]int32
}

func newAdminAddrs(t *testing.T, env *testkit.Env) *adminAddrs {
	t.Helper()
	host, _, err := net.SplitHostPort(env.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	ports := env.App.Gateway().BrokerPorts("PLAINTEXT")
	if len(ports) != 3 {
		t.Fatalf("gateway has ports for %d brokers, want 3: %v", len(ports), ports)
	}
	return &adminAddrs{env: env, host: host, ports: ports}
}

// check reports whether node id at host:port is the gateway's address for
// that node, and never an upstream one.
func (a *adminAddrs) check(t *testing.T, what string, id int32, host string, port int32) {
	t.Helper()
	got := net.JoinHostPort(host, strconv.Itoa(int(port)))
	for _, up := range a.env.App.DevCluster().Addrs() {
		if got == up {
			t.Errorf("%s: node %d at upstream address %s leaked to the client", what, id, got)
			return
		}
	}
	want, ok := a.ports[id]
	if !ok {
		t.Errorf("%s: node %d at %s: the gateway has no port for node %d (ports %v)", what, id, got, id, a.ports)
		return
	}
	if host != a.host || port != want {
		t.Errorf("%s: node %d at %s, want gateway address %s", what, id, got, net.JoinHostPort(a.host, strconv.Itoa(int(want))))
	}
}

// Admin through the gateway with franz-go's kadm: topics (create, create
// partitions, configs, incremental and legacy alter, delete), groups (list,
// describe with a live member, delete), offsets by position and time, and
// every response that names a broker (Metadata, FindCoordinator for groups
// and transactions, DescribeCluster) at every version the gateway offers,
// both via kgo and on a raw connection: each must name the gateway's port
// for the right node, never an upstream address.
func TestAdmin(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	dialer := &testkit.Dialer{}
	cl := newClient(t, env, dialer)
	adm := kadm.NewClient(cl)
	addrs := newAdminAddrs(t, env)
	dev := env.App.DevCluster()
	const ta, tb, group = "adm-a", "adm-b", "adm-g"

	// CreateTopics, with a config, and again (TOPIC_ALREADY_EXISTS).
	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, ta, tb)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, topic := range []string{ta, tb} {
		r, ok := created[topic]
		if !ok || r.Err != nil || r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID == (kadm.TopicID{}) {
			t.Errorf("create %s: %+v (present %v)", topic, r, ok)
		}
	}
	again, err := adm.CreateTopics(ctx, 1, 1, nil, ta)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(again[ta].Err, kerr.TopicAlreadyExists) {
		t.Errorf("creating %s again: %v, want %v", ta, again[ta].Err, kerr.TopicAlreadyExists)
	}

	// CreatePartitions: 3 -> 5; shrinking is refused.
	cp, err := adm.CreatePartitions(ctx, 2, ta)
	if err != nil || cp[ta].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cp)
	}
	shrink, err := adm.UpdatePartitions(ctx, 4, ta)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(shrink[ta].Err, kerr.InvalidPartitions) {
		t.Errorf("shrinking %s to 4 partitions: %v, want %v", ta, shrink[ta].Err, kerr.InvalidPartitions)
	}
	for p := int32(0); p < 5; p++ {
		if err := dev.MoveTopicPartition(ta, p, p%3); err != nil {
			t.Fatal(err)
		}
	}

	// Metadata: brokers at the gateway's ports, the moved leaders.
	md, err := adm.Metadata(ctx, ta)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != "tollgate-dev" || md.Controller < 0 || md.Controller > 2 || len(md.Brokers) != 3 {
		t.Errorf("metadata: cluster %q controller %d brokers %+v", md.Cluster, md.Controller, md.Brokers)
	}
	for _, b := range md.Brokers {
		addrs.check(t, "kadm Metadata", b.NodeID, b.Host, b.Port)
	}
	if n := len(md.Topics[ta].Partitions); n != 5 {
		t.Errorf("metadata: %s has %d partitions, want 5", ta, n)
	}
	for _, p := range md.Topics[ta].Partitions {
		if p.Leader != p.Partition%3 || p.Leader != dev.LeaderFor(ta, p.Partition) {
			t.Errorf("metadata: %s/%d led by %d, want %d", ta, p.Partition, p.Leader, p.Partition%3)
		}
	}

	// DescribeConfigs (topic): the create-time config is dynamic.
	rc, err := adm.DescribeTopicConfigs(ctx, ta)
	if err != nil {
		t.Fatal(err)
	}
	wantConfig(t, "describe "+ta, rc, ta, "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)

	// IncrementalAlterConfigs on a topic.
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, ta)
	if err != nil || len(alt) != 1 || alt[0].Err != nil || alt[0].Name != ta {
		t.Fatalf("incremental alter %s: %v %+v", ta, err, alt)
	}
	rc, err = adm.DescribeTopicConfigs(ctx, ta)
	if err != nil {
		t.Fatal(err)
	}
	wantConfig(t, "after incremental alter "+ta, rc, ta, "retention.ms", "7200000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, "after incremental alter "+ta, rc, ta, "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)

	// AlterConfigs (legacy, replaces the whole set) on a topic.
	alt, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kmsg.StringPtr("123456")}}, tb)
	if err != nil || len(alt) != 1 || alt[0].Err != nil || alt[0].Name != tb {
		t.Fatalf("alter %s: %v %+v", tb, err, alt)
	}
	rc, err = adm.DescribeTopicConfigs(ctx, tb)
	if err != nil {
		t.Fatal(err)
	}
	wantConfig(t, "after alter "+tb, rc, tb, "max.message.bytes", "123456", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, "after alter "+tb, rc, tb, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	// DescribeConfigs (broker): each broker answers for itself.
	for _, id := range []int32{0, 2} {
		bc, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil {
			t.Fatalf("describe broker %d configs: %v", id, err)
		}
		name := strconv.Itoa(int(id))
		wantConfig(t, "describe broker "+name, bc, name, "broker.id", name, kmsg.ConfigSourceStaticBrokerConfig)
		wantConfig(t, "describe broker "+name, bc, name, "broker.rack", "krack", kmsg.ConfigSourceStaticBrokerConfig)
	}

	// Produce two batches with distinct timestamps to every partition.
	t1 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	t2 := t1.Add(30 * time.Minute)
	prod := newClient(t, env, dialer, kgo.DefaultProduceTopic(ta), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, ts := range []time.Time{t1, t2} {
		var recs []*kgo.Record
		for p := int32(0); p < 5; p++ {
			for i := 0; i < 10; i++ {
				recs = append(recs, &kgo.Record{Partition: p, Timestamp: ts, Value: fmt.Appendf(nil, "%d-%d", p, i)})
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	// ListOffsets: start, end, and by time.
	wantOffsets := func(name string, lo kadm.ListedOffsets, err error, want int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		lo.Each(func(o kadm.ListedOffset) {
			n++
			if o.Err != nil || o.Offset != want {
				t.Errorf("%s: %s/%d = %d (%v), want %d", name, o.Topic, o.Partition, o.Offset, o.Err, want)
			}
		})
		if n != 5 {
			t.Errorf("%s: %d partitions, want 5", name, n)
		}
	}
	lo, err := adm.ListStartOffsets(ctx, ta)
	wantOffsets("start offsets", lo, err, 0)
	lo, err = adm.ListEndOffsets(ctx, ta)
	wantOffsets("end offsets", lo, err, 20)
	lo, err = adm.ListOffsetsAfterMilli(ctx, t1.UnixMilli(), ta)
	wantOffsets("offsets at t1", lo, err, 0)
	lo, err = adm.ListOffsetsAfterMilli(ctx, t1.UnixMilli()+1, ta)
	wantOffsets("offsets after t1", lo, err, 10)

	// Groups: consume everything in a group, describe it while its member
	// is alive (and fail to delete it), then list, delete it.
	cons := newClient(t, env, dialer, kgo.ConsumeTopics(ta), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("adm-consumer"))
	for n, i := 0, 0; n < 100; i++ {
		if i == 100 {
			t.Fatalf("consumed %d of 100 after %d polls", n, i)
		}
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 100: %v", n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	g := dg[group]
	if g.Err != nil || g.State != "Stable" || g.ProtocolType != "consumer" || len(g.Members) != 1 || g.Members[0].ClientID != "adm-consumer" {
		t.Errorf("describe group: %+v", g)
	}
	if assigned := g.AssignedPartitions(); len(assigned[ta]) != 5 {
		t.Errorf("describe group: assigned %v, want all 5 partitions of %s", assigned, ta)
	}
	if g.Coordinator.NodeID != dev.CoordinatorFor(group) {
		t.Errorf("describe group: coordinator %d, want %d", g.Coordinator.NodeID, dev.CoordinatorFor(group))
	}
	addrs.check(t, "DescribeGroups coordinator", g.Coordinator.NodeID, g.Coordinator.Host, g.Coordinator.Port)
	del, err := adm.DeleteGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(del[group].Err, kerr.NonEmptyGroup) {
		t.Errorf("deleting a group with a live member: %v, want %v", del[group].Err, kerr.NonEmptyGroup)
	}
	cons.Close() // leaves the group
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := lg[group]; !ok || l.ProtocolType != "consumer" || l.State != "Empty" || l.Coordinator != dev.CoordinatorFor(group) {
		t.Errorf("list groups: %s = %+v (present %v), want Empty consumer group on node %d", group, l, ok, dev.CoordinatorFor(group))
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 5; p++ {
		if o, ok := offs.Lookup(ta, p); !ok || o.At != 20 {
			t.Errorf("group offset of %s/%d = %+v, want 20", ta, p, o)
		}
	}
	del, err = adm.DeleteGroups(ctx, group)
	if err != nil || del[group].Err != nil {
		t.Fatalf("delete group: %v %+v", err, del)
	}
	lg, err = adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lg[group]; ok {
		t.Errorf("group %s still listed after delete: %+v", group, lg)
	}
	dg, err = adm.DescribeGroups(ctx, group)
	var gone bool
	if err == nil {
		g := dg[group]
		gone = errors.Is(g.Err, kerr.GroupIDNotFound) || (g.Err == nil && g.State == "Dead")
	} else {
		gone = errors.Is(err, kerr.GroupIDNotFound)
	}
	if !gone {
		t.Errorf("describe deleted group: %+v, %v; want GROUP_ID_NOT_FOUND or Dead", dg[group], err)
	}

	// DeleteTopics.
	dt, err := adm.DeleteTopics(ctx, tb)
	if err != nil || dt[tb].Err != nil {
		t.Fatalf("delete topic: %v %+v", err, dt)
	}
	for i := 0; ; i++ {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !td.Has(tb) && td.Has(ta) {
			break
		}
		if i == 50 {
			t.Fatalf("after deleting %s, topics are %v", tb, td.Names())
		}
		time.Sleep(20 * time.Millisecond)
	}

	adminBrokerAddresses(t, ctx, env, cl, addrs, dialer)

	checkDialsGatewayOnly(t, "the clients", env, dialer.Addrs())
}

// wantConfig checks one config of one resource.
func wantConfig(t *testing.T, what string, rcs kadm.ResourceConfigs, resource, key, value string, src kmsg.ConfigSource) {
	t.Helper()
	for _, rc := range rcs {
		if rc.Name != resource {
			continue
		}
		if rc.Err != nil {
			t.Errorf("%s: %v", what, rc.Err)
			return
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				if c.Value == nil || *c.Value != value || c.Source != src {
					v := "<nil>"
					if c.Value != nil {
						v = *c.Value
					}
					t.Errorf("%s: %s = %q (source %v), want %q (source %v)", what, key, v, c.Source, value, src)
				}
				return
			}
		}
		t.Errorf("%s: no config %s among %d", what, key, len(rc.Configs))
		return
	}
	t.Errorf("%s: no resource %q in the response", what, resource)
}

// adminBrokerAddresses checks every response that names brokers, through
// kgo (which negotiates the newest version) and on a raw connection at each
// version the gateway advertises.
func adminBrokerAddresses(t *testing.T, ctx context.Context, env *testkit.Env, cl *kgo.Client, addrs *adminAddrs, d *testkit.Dialer) {
	t.Helper()
	dev := env.App.DevCluster()

	// Keys whose coordinators are on different nodes, so a batched
	// FindCoordinator carries more than one broker.
	var keysByNode [3]string
	for i := 0; i < 100; i++ {
		k := "coord-key-" + strconv.Itoa(i)
		if n := dev.CoordinatorFor(k); n >= 0 && n < 3 && keysByNode[n] == "" {
			keysByNode[n] = k
		}
	}
	for n, k := range keysByNode {
		if k == "" {
			t.Fatalf("no key found whose coordinator is node %d", n)
		}
	}

	// DescribeCluster via kgo.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe cluster: %v", err)
	}
	checkDescribeCluster(t, "kgo DescribeCluster", dcr, addrs)

	// FindCoordinator via kgo, batched over groups and transactional ids.
	for _, typ := range []int8{0, 1} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType = typ
		fc.CoordinatorKeys = keysByNode[:]
		fcr, err := fc.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("find coordinator (type %d): %v", typ, err)
		}
		checkCoordinators(t, fmt.Sprintf("kgo FindCoordinator type %d", typ), fcr, keysByNode[:], addrs, dev.CoordinatorFor)
	}

	// The versions the gateway advertises.
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for key, min := range map[int16]int16{3: 9, 10: 4, 60: 0} {
		if r, ok := ranges[key]; !ok || r[1] < min {
			t.Fatalf("gateway advertises %s versions %v; want max >= %d", kmsg.NameForKey(key), r, min)
		}
	}

	raw := dialRawVia(t, ctx, d, env.Bootstrap)
	for v := ranges[3][0]; v <= ranges[3][1]; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		topic := "adm-a"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		req.AllowAutoTopicCreation = false
		resp := raw.do(t, req).(*kmsg.MetadataResponse)
		what := fmt.Sprintf("Metadata v%d", v)
		if len(resp.Brokers) != 3 {
			t.Errorf("%s: %d brokers, want 3", what, len(resp.Brokers))
		}
		for _, b := range resp.Brokers {
			addrs.check(t, what, b.NodeID, b.Host, b.Port)
		}
		if v >= 1 && (resp.ControllerID < 0 || resp.ControllerID > 2) {
			t.Errorf("%s: controller %d", what, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "tollgate-dev") {
			t.Errorf("%s: cluster id %v", what, resp.ClusterID)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 5 {
			t.Errorf("%s: topics %+v", what, resp.Topics)
		}
	}
	for v := ranges[10][0]; v <= ranges[10][1]; v++ {
		for _, typ := range []int8{0, 1} {
			if v == 0 && typ == 1 {
				continue // v0 knows groups only
			}
			what := fmt.Sprintf("FindCoordinator v%d type %d", v, typ)
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = v
			req.CoordinatorType = typ
			if v < 4 {
				for _, k := range keysByNode {
					req.CoordinatorKey = k
					resp := raw.do(t, req).(*kmsg.FindCoordinatorResponse)
					if resp.ErrorCode != 0 || resp.NodeID != dev.CoordinatorFor(k) {
						t.Errorf("%s %s: error %d node %d, want node %d", what, k, resp.ErrorCode, resp.NodeID, dev.CoordinatorFor(k))
						continue
					}
					addrs.check(t, what, resp.NodeID, resp.Host, resp.Port)
				}
				continue
			}
			req.CoordinatorKeys = keysByNode[:]
			resp := raw.do(t, req).(*kmsg.FindCoordinatorResponse)
			checkCoordinators(t, what, resp, keysByNode[:], addrs, dev.CoordinatorFor)
		}
	}
	// Produce to a broker that does not lead the partition: NOT_LEADER with
	// the current leader and, from v10, its endpoint (KIP-951).
	md, err := kadm.NewClient(cl).Metadata(ctx, "adm-a")
	if err != nil {
		t.Fatal(err)
	}
	leader := md.Topics["adm-a"].Partitions[0].Leader
	notLeader := (leader + 1) % 3
	wrong := dialRawVia(t, ctx, d, net.JoinHostPort(addrs.host, strconv.Itoa(int(addrs.ports[notLeader]))))
	if r := ranges[0]; r[1] < 10 {
		t.Fatalf("gateway advertises Produce versions %v; want max >= 10", r)
	}
	for v := max(ranges[0][0], 3); v <= ranges[0][1]; v++ {
		what := fmt.Sprintf("Produce v%d to non-leader %d", v, notLeader)
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "adm-a"
		rt.TopicID = md.Topics["adm-a"].ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = 0
		rp.Records = adminRecordBatch([]byte(what))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := wrong.do(t, req).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Errorf("%s: response topics %+v", what, resp.Topics)
			continue
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Errorf("%s: error %d, want %d (NOT_LEADER_OR_FOLLOWER)", what, p.ErrorCode, kerr.NotLeaderForPartition.Code)
		}
		if v < 10 {
			continue
		}
		if p.CurrentLeader.LeaderID != leader {
			t.Errorf("%s: current leader %d, want %d", what, p.CurrentLeader.LeaderID, leader)
		}
		if len(resp.Brokers) == 0 {
			t.Errorf("%s: no node endpoints in the response", what)
		}
		for _, b := range resp.Brokers {
			addrs.check(t, what+" node endpoint", b.NodeID, b.Host, b.Port)
		}
	}

	// The same request to the leader appends (so the batch above is valid
	// and only the leadership differed).
	{
		req := kmsg.NewPtrProduceRequest()
		req.Version = ranges[0][1]
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "adm-a"
		rt.TopicID = md.Topics["adm-a"].ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = 0
		rp.Records = adminRecordBatch([]byte("to the leader"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		right := dialRawVia(t, ctx, d, net.JoinHostPort(addrs.host, strconv.Itoa(int(addrs.ports[leader]))))
		resp := right.do(t, req).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
			resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].BaseOffset != 20 {
			t.Errorf("Produce v%d to leader %d: %+v, want offset 20", req.Version, leader, resp.Topics)
		}
	}

	for v := ranges[60][0]; v <= ranges[60][1]; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		resp := raw.do(t, req).(*kmsg.DescribeClusterResponse)
		checkDescribeCluster(t, fmt.Sprintf("DescribeCluster v%d", v), resp, addrs)
	}
}

func checkDescribeCluster(t *testing.T, what string, r *kmsg.DescribeClusterResponse, addrs *adminAddrs) {
	t.Helper()
	if r.ErrorCode != 0 || r.ClusterID != "tollgate-dev" || r.ControllerID < 0 || r.ControllerID > 2 || len(r.Brokers) != 3 {
		t.Errorf("%s: error %d cluster %q controller %d, %d brokers", what, r.ErrorCode, r.ClusterID, r.ControllerID, len(r.Brokers))
	}
	seen := map[int32]bool{}
	for _, b := range r.Brokers {
		seen[b.NodeID] = true
		addrs.check(t, what, b.NodeID, b.Host, b.Port)
	}
	if len(seen) != 3 {
		t.Errorf("%s: broker ids %v, want 3 distinct", what, seen)
	}
}

func checkCoordinators(t *testing.T, what string, r *kmsg.FindCoordinatorResponse, keys []string, addrs *adminAddrs, coordinatorFor func(string) int32) {
	t.Helper()
	if len(r.Coordinators) != len(keys) {
		t.Errorf("%s: %d coordinators for %d keys: %+v", what, len(r.Coordinators), len(keys), r.Coordinators)
	}
	got := map[string]bool{}
	for _, c := range r.Coordinators {
		got[c.Key] = true
		if want := coordinatorFor(c.Key); c.ErrorCode != 0 || c.NodeID != want {
			t.Errorf("%s: key %s: error %d node %d, want node %d", what, c.Key, c.ErrorCode, c.NodeID, want)
			continue
		}
		addrs.check(t, what+" key "+c.Key, c.NodeID, c.Host, c.Port)
	}
	for _, k := range keys {
		if !got[k] {
			t.Errorf("%s: no coordinator for key %s", what, k)
		}
	}
}

// adminRecordBatch is a valid v2 record batch holding one record.
func adminRecordBatch(value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // null key
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // no headers
	records := binary.AppendVarint(nil, int64(len(rec)))
	records = append(records, rec...)

	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}
