package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"net"
	"slices"
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
	for _, up := range a.env.UpstreamAddrs() {
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

// adminOracle is the upstream asked directly, not through the gateway:
// the answers the gateway's must agree with (the cluster id, the broker
// ids, coordinators, broker configs), the same on kfake and on Kafka.
type adminOracle struct {
	up      *testkit.Upstream
	cl      *kgo.Client
	adm     *kadm.Client
	cluster string
	ids     []int32 // sorted
}

func newAdminOracle(t *testing.T, ctx context.Context, env *testkit.Env, up *testkit.Upstream) *adminOracle {
	t.Helper()
	cl := franzClient(t, kgo.SeedBrokers(env.UpstreamAddrs()...))
	o := &adminOracle{up: up, cl: cl, adm: kadm.NewClient(cl)}
	md, err := o.adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("the upstream's metadata: %v", err)
	}
	o.cluster = md.Cluster
	for _, b := range md.Brokers {
		o.ids = append(o.ids, b.NodeID)
	}
	slices.Sort(o.ids)
	if len(o.ids) != 3 || o.cluster == "" {
		t.Fatalf("the upstream: cluster %q, brokers %v; want 3", o.cluster, o.ids)
	}
	return o
}

func (o *adminOracle) isBroker(id int32) bool { return slices.Contains(o.ids, id) }

// checkBrokers reports whether ids are the upstream's brokers, each once.
func (o *adminOracle) checkBrokers(t *testing.T, what string, ids []int32) {
	t.Helper()
	got := slices.Clone(ids)
	slices.Sort(got)
	if !slices.Equal(got, o.ids) {
		t.Errorf("%s: brokers %v, want the upstream's %v", what, got, o.ids)
	}
}

// coordinators asks the upstream which node coordinates each key
// (coordinator type typ: 0 groups, 1 transactional ids): every broker,
// until all of them name the same node for each key. A real cluster
// creates __consumer_offsets and __transaction_state on first use, and a
// KRaft broker applies the metadata log on its own: one broker can still
// answer COORDINATOR_NOT_AVAILABLE (it does not know the topic's leaders
// yet) while another already names the coordinator.
func (o *adminOracle) coordinators(t *testing.T, ctx context.Context, typ int8, keys ...string) map[string]int32 {
	t.Helper()
	var out map[string]int32
	eventually(t, 30*time.Second, fmt.Sprintf("every upstream broker naming the coordinators of type %d", typ), func() error {
		var first map[string]int32
		for _, id := range o.ids {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType = typ
			req.CoordinatorKeys = keys
			resp, err := req.RequestWith(ctx, o.cl.Broker(int(id)))
			if err != nil {
				return fmt.Errorf("broker %d: %w", id, err)
			}
			got := map[string]int32{}
			for _, c := range resp.Coordinators {
				if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
					return fmt.Errorf("broker %d: key %s: %w", id, c.Key, err)
				}
				got[c.Key] = c.NodeID
			}
			if len(got) != len(keys) {
				return fmt.Errorf("broker %d: %d coordinators for %d keys", id, len(got), len(keys))
			}
			if first != nil && !maps.Equal(first, got) {
				return fmt.Errorf("broker %d names other coordinators than broker %d", id, o.ids[0])
			}
			first = got
		}
		out = first
		return nil
	})
	return out
}

// coordinatorKeys are keys whose coordinators of type typ are on distinct
// nodes, one a node, so that a batched FindCoordinator carries more than
// one broker, and the upstream's coordinator of each. kfake spreads them
// over its three brokers; on a real cluster a node may lead none of the
// coordinator topic's partitions (leadership moves when a broker of the
// shared cluster restarts), so two nodes are enough there.
func (o *adminOracle) coordinatorKeys(t *testing.T, ctx context.Context, typ int8) ([]string, map[string]int32) {
	t.Helper()
	var cands []string
	for i := range 100 {
		cands = append(cands, "coord-key-"+strconv.Itoa(i))
	}
	all := o.coordinators(t, ctx, typ, cands...)
	byNode := map[int32]string{}
	for _, k := range cands {
		if _, ok := byNode[all[k]]; !ok {
			byNode[all[k]] = k
		}
	}
	var keys []string
	want := map[string]int32{}
	for _, id := range o.ids {
		if k, ok := byNode[id]; ok {
			keys = append(keys, k)
			want[k] = id
		}
	}
	need := len(o.ids)
	if o.up.Real() {
		need = 2
	}
	if len(keys) < need {
		t.Fatalf("coordinators of type %d of %d keys are on nodes %v only; want %d of %v", typ, len(cands), keys, need, o.ids)
	}
	if len(keys) < len(o.ids) {
		t.Logf("coordinators of type %d of %d keys are on %d of the nodes %v only", typ, len(cands), len(keys), o.ids)
	}
	return keys, want
}

// brokerConfigs are broker id's configs asked of that broker directly.
func (o *adminOracle) brokerConfigs(t *testing.T, ctx context.Context, id int32) kadm.ResourceConfigs {
	t.Helper()
	rc, err := o.adm.DescribeBrokerConfigs(ctx, id)
	if err != nil {
		t.Fatalf("the upstream's broker %d configs: %v", id, err)
	}
	return rc
}

// Admin through the gateway with franz-go's kadm: topics (create, create
// partitions, configs, incremental and legacy alter, delete), groups (list,
// describe with a live member, delete), offsets by position and time, and
// every response that names a broker (Metadata, FindCoordinator for groups
// and transactions, DescribeCluster, Produce's NOT_LEADER with node
// endpoints) at every version the gateway offers, both via kgo and on a raw
// connection: each must name the gateway's port for the right node, never
// an upstream address.
//
// The right node, the cluster id, the broker ids and the broker configs
// are the upstream's own answers, asked of it directly (adminOracle): on
// the real cluster the coordinators are the leaders of __consumer_offsets
// and __transaction_state, the controller a random broker (KRaft), the
// leaders the controller's choice. Topics and the group are the test's own
// (the real cluster is shared), created with the cluster's replication
// factor.
func TestAdmin(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, admin)
}

// Long: one scenario, each step on the state the one before left.
func admin(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 120*time.Second)
	dialer := &testkit.Dialer{}
	cl := newClient(t, env, dialer)
	adm := kadm.NewClient(cl)
	addrs := newAdminAddrs(t, env)
	o := newAdminOracle(t, ctx, env, up)
	ta, tb, group := up.Topic(t, "adm-a"), up.Topic(t, "adm-b"), up.GroupID(t, "adm-g")
	freshTopics(t, up, ta, tb)

	// CreateTopics, with a config, and again (TOPIC_ALREADY_EXISTS).
	created, err := adm.CreateTopics(ctx, 3, -1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}, ta, tb)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	for _, topic := range []string{ta, tb} {
		r, ok := created[topic]
		if !ok || r.Err != nil || r.NumPartitions != 3 || r.ReplicationFactor != 3 || r.ID == (kadm.TopicID{}) {
			t.Errorf("create %s: %+v (present %v)", topic, r, ok)
		}
	}
	again, err := adm.CreateTopics(ctx, 1, -1, nil, ta)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(again[ta].Err, kerr.TopicAlreadyExists) {
		t.Errorf("creating %s again: %v, want %v", ta, again[ta].Err, kerr.TopicAlreadyExists)
	}
	env.WaitTopic(t, tb, 3)

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
	leaders := env.SpreadLeaders(t, ta, 5)

	// Metadata: the upstream's cluster and brokers at the gateway's
	// ports, the upstream's leaders and replicas.
	md, err := adm.Metadata(ctx, ta)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != o.cluster || !o.isBroker(md.Controller) {
		t.Errorf("metadata: cluster %q controller %d, want cluster %q and one of %v", md.Cluster, md.Controller, o.cluster, o.ids)
	}
	o.checkBrokers(t, "kadm Metadata", md.Brokers.NodeIDs())
	for _, b := range md.Brokers {
		addrs.check(t, "kadm Metadata", b.NodeID, b.Host, b.Port)
	}
	if n := len(md.Topics[ta].Partitions); n != 5 {
		t.Errorf("metadata: %s has %d partitions, want 5", ta, n)
	}
	for _, p := range md.Topics[ta].Partitions {
		if p.Leader != leaders[p.Partition] || len(p.Replicas) != 3 {
			t.Errorf("metadata: %s/%d led by %d, replicas %v; want led by %d, 3 replicas", ta, p.Partition, p.Leader, p.Replicas, leaders[p.Partition])
		}
	}

	// DescribeConfigs (topic): the create-time config is dynamic.
	describeTopic := func(what, topic string, want ...adminConfig) {
		t.Helper()
		eventually(t, 15*time.Second, what, func() error {
			rc, err := adm.DescribeTopicConfigs(ctx, topic)
			if err != nil {
				return err
			}
			var errs []error
			for _, w := range want {
				errs = append(errs, configErr(rc, topic, w))
			}
			return errors.Join(errs...)
		})
	}
	dynamic := kmsg.ConfigSourceDynamicTopicConfig
	describeTopic("describe "+ta, ta, adminConfig{"cleanup.policy", "compact", dynamic})

	// IncrementalAlterConfigs on a topic.
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, ta)
	if err != nil || len(alt) != 1 || alt[0].Err != nil || alt[0].Name != ta {
		t.Fatalf("incremental alter %s: %v %+v", ta, err, alt)
	}
	describeTopic("after incremental alter "+ta, ta,
		adminConfig{"retention.ms", "7200000", dynamic}, adminConfig{"cleanup.policy", "compact", dynamic})

	// AlterConfigs (legacy, replaces the whole set) on a topic.
	alt, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kmsg.StringPtr("123456")}}, tb)
	if err != nil || len(alt) != 1 || alt[0].Err != nil || alt[0].Name != tb {
		t.Fatalf("alter %s: %v %+v", tb, err, alt)
	}
	describeTopic("after alter "+tb, tb,
		adminConfig{"max.message.bytes", "123456", dynamic}, adminConfig{"cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig})

	// DescribeConfigs (broker): each broker answers for itself, as it
	// does asked directly.
	for _, id := range []int32{o.ids[0], o.ids[2]} {
		bc, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil {
			t.Fatalf("describe broker %d configs: %v", id, err)
		}
		name := strconv.Itoa(int(id))
		wantConfig(t, "describe broker "+name, bc, name, "broker.id", name, kmsg.ConfigSourceStaticBrokerConfig)
		direct := o.brokerConfigs(t, ctx, id)
		for _, key := range []string{"broker.id", "broker.rack", "sasl.enabled.mechanisms", "super.users"} {
			sameConfig(t, "describe broker "+name, bc, direct, name, key)
		}
	}

	adminOffsets(t, ctx, env, dialer, adm, ta)
	adminGroup(t, ctx, env, dialer, adm, addrs, o, ta, group)

	// DeleteTopics.
	dt, err := adm.DeleteTopics(ctx, tb)
	if err != nil || dt[tb].Err != nil {
		t.Fatalf("delete topic: %v %+v", err, dt)
	}
	eventually(t, 15*time.Second, "deleting "+tb, func() error {
		td, err := adm.ListTopics(ctx, ta, tb)
		if err != nil {
			return err
		}
		if td[tb].Err == nil || td[ta].Err != nil {
			return fmt.Errorf("%s: %v, %s: %v; want only %s", ta, td[ta].Err, tb, td[tb].Err, ta)
		}
		return nil
	})

	adminBrokerAddresses(t, ctx, env, cl, addrs, o, dialer, ta)

	checkDialsGatewayOnly(t, "the clients", env, dialer.Addrs())
}

// adminOffsets produces two batches with distinct timestamps to every
// partition of topic (5), then lists offsets: start, end, and by time.
// The topic is compacted: its records have keys (Kafka refuses a record
// without one as INVALID_RECORD; kfake does not check).
func adminOffsets(t *testing.T, ctx context.Context, env *testkit.Env, dialer *testkit.Dialer, adm *kadm.Client, topic string) {
	t.Helper()
	t1 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	t2 := t1.Add(30 * time.Minute)
	prod := newClient(t, env, dialer, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, ts := range []time.Time{t1, t2} {
		var recs []*kgo.Record
		for p := int32(0); p < 5; p++ {
			for i := 0; i < 10; i++ {
				recs = append(recs, &kgo.Record{Partition: p, Timestamp: ts, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d-%d", p, i)})
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

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
	lo, err := adm.ListStartOffsets(ctx, topic)
	wantOffsets("start offsets", lo, err, 0)
	lo, err = adm.ListEndOffsets(ctx, topic)
	wantOffsets("end offsets", lo, err, 20)
	lo, err = adm.ListOffsetsAfterMilli(ctx, t1.UnixMilli(), topic)
	wantOffsets("offsets at t1", lo, err, 0)
	lo, err = adm.ListOffsetsAfterMilli(ctx, t1.UnixMilli()+1, topic)
	wantOffsets("offsets after t1", lo, err, 10)
}

// adminGroup consumes everything of topic (5 partitions of 20 records) in
// group, describes the group while its member is alive (and fails to
// delete it), then lists it, fetches its offsets and deletes it. Its
// coordinator is the upstream's answer for the group.
//
// Long: one group's life, step by step.
func adminGroup(t *testing.T, ctx context.Context, env *testkit.Env, dialer *testkit.Dialer, adm *kadm.Client, addrs *adminAddrs, o *adminOracle, topic, group string) {
	t.Helper()
	coord := o.coordinators(t, ctx, 0, group)[group]
	cons := newClient(t, env, dialer, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
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
	if assigned := g.AssignedPartitions(); len(assigned[topic]) != 5 {
		t.Errorf("describe group: assigned %v, want all 5 partitions of %s", assigned, topic)
	}
	if g.Coordinator.NodeID != coord {
		t.Errorf("describe group: coordinator %d, want the upstream's %d", g.Coordinator.NodeID, coord)
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
	eventually(t, 15*time.Second, "the group empty after its member left", func() error {
		lg, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		if l, ok := lg[group]; !ok || l.ProtocolType != "consumer" || l.State != "Empty" || l.Coordinator != coord {
			return fmt.Errorf("list groups: %s = %+v (present %v), want Empty consumer group on node %d", group, l, ok, coord)
		}
		return nil
	})
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 5; p++ {
		if o, ok := offs.Lookup(topic, p); !ok || o.At != 20 {
			t.Errorf("group offset of %s/%d = %+v, want 20", topic, p, o)
		}
	}
	del, err = adm.DeleteGroups(ctx, group)
	if err != nil || del[group].Err != nil {
		t.Fatalf("delete group: %v %+v", err, del)
	}
	lg, err := adm.ListGroups(ctx)
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
}

// adminConfig is one config's expected value and source.
type adminConfig struct {
	key, value string
	src        kmsg.ConfigSource
}

// wantConfig checks one config of one resource.
func wantConfig(t *testing.T, what string, rcs kadm.ResourceConfigs, resource, key, value string, src kmsg.ConfigSource) {
	t.Helper()
	if err := configErr(rcs, resource, adminConfig{key, value, src}); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// configErr says how one config of one resource differs from want.
func configErr(rcs kadm.ResourceConfigs, resource string, want adminConfig) error {
	c, err := findConfig(rcs, resource, want.key)
	if err != nil {
		return err
	}
	if c.Value == nil || *c.Value != want.value || c.Source != want.src {
		return fmt.Errorf("%s: %s = %s (source %v), want %q (source %v)", resource, want.key, configValue(c), c.Source, want.value, want.src)
	}
	return nil
}

func findConfig(rcs kadm.ResourceConfigs, resource, key string) (kadm.Config, error) {
	for _, rc := range rcs {
		if rc.Name != resource {
			continue
		}
		if rc.Err != nil {
			return kadm.Config{}, fmt.Errorf("%s: %w", resource, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c, nil
			}
		}
		return kadm.Config{}, fmt.Errorf("%s: no config %s among %d", resource, key, len(rc.Configs))
	}
	return kadm.Config{}, fmt.Errorf("no resource %q in the response", resource)
}

func configValue(c kadm.Config) string {
	if c.Value == nil {
		return "<nil>"
	}
	return strconv.Quote(*c.Value)
}

// sameConfig checks that config key of resource is the same (value and
// source) in the gateway's answer as in the upstream's direct one.
func sameConfig(t *testing.T, what string, got, direct kadm.ResourceConfigs, resource, key string) {
	t.Helper()
	want, err := findConfig(direct, resource, key)
	if err != nil {
		t.Errorf("%s: asked directly: %v", what, err)
		return
	}
	c, err := findConfig(got, resource, key)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if configValue(c) != configValue(want) || c.Source != want.Source || c.Sensitive != want.Sensitive {
		t.Errorf("%s: %s = %s (source %v), the upstream says %s (source %v)", what, key, configValue(c), c.Source, configValue(want), want.Source)
	}
}

// adminBrokerAddresses checks every response that names brokers, through
// kgo (which negotiates the newest version) and on a raw connection at each
// version the gateway advertises, against the upstream's own answers.
// topic has 5 partitions of 20 records.
//
// Long: each response at each version, one after the other.
func adminBrokerAddresses(t *testing.T, ctx context.Context, env *testkit.Env, cl *kgo.Client, addrs *adminAddrs, o *adminOracle, d *testkit.Dialer, topic string) {
	t.Helper()

	// Keys whose coordinators are on different nodes, so a batched
	// FindCoordinator carries more than one broker: of each coordinator
	// type its own, as the upstream names them.
	var keys [2][]string
	var coords [2]map[string]int32
	for typ := range 2 {
		keys[typ], coords[typ] = o.coordinatorKeys(t, ctx, int8(typ))
	}

	// DescribeCluster via kgo.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe cluster: %v", err)
	}
	checkDescribeCluster(t, "kgo DescribeCluster", dcr, addrs, o)

	// FindCoordinator via kgo, batched over groups and transactional ids.
	for typ := range 2 {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType = int8(typ)
		fc.CoordinatorKeys = keys[typ]
		fcr, err := fc.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("find coordinator (type %d): %v", typ, err)
		}
		checkCoordinators(t, fmt.Sprintf("kgo FindCoordinator type %d", typ), fcr, keys[typ], addrs, coords[typ])
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
	for key, min := range map[int16]int16{0: 10, 3: 9, 10: 4, 60: 0} {
		if r, ok := ranges[key]; !ok || r[1] < min {
			t.Fatalf("gateway advertises %s versions %v; want max >= %d", kmsg.NameForKey(key), r, min)
		}
	}

	t.Logf("the gateway advertises Produce %v, Metadata %v, FindCoordinator %v, DescribeCluster %v", ranges[0], ranges[3], ranges[10], ranges[60])

	raw := dialRawVia(t, ctx, d, env.Bootstrap)
	for v := ranges[3][0]; v <= ranges[3][1]; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		req.AllowAutoTopicCreation = false
		resp := raw.do(t, req).(*kmsg.MetadataResponse)
		what := fmt.Sprintf("Metadata v%d", v)
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
			addrs.check(t, what, b.NodeID, b.Host, b.Port)
		}
		o.checkBrokers(t, what, ids)
		if v >= 1 && !o.isBroker(resp.ControllerID) {
			t.Errorf("%s: controller %d, want one of %v", what, resp.ControllerID, o.ids)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != o.cluster) {
			t.Errorf("%s: cluster id %v, want %q", what, resp.ClusterID, o.cluster)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 5 {
			t.Errorf("%s: topics %+v", what, resp.Topics)
		}
	}
	for v := ranges[10][0]; v <= ranges[10][1]; v++ {
		for typ := range int8(2) {
			if v == 0 && typ == 1 {
				continue // v0 knows groups only
			}
			what := fmt.Sprintf("FindCoordinator v%d type %d", v, typ)
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = v
			req.CoordinatorType = typ
			if v < 4 {
				for _, k := range keys[typ] {
					req.CoordinatorKey = k
					resp := raw.do(t, req).(*kmsg.FindCoordinatorResponse)
					if want := coords[typ][k]; resp.ErrorCode != 0 || resp.NodeID != want {
						t.Errorf("%s %s: error %d node %d, want the upstream's node %d", what, k, resp.ErrorCode, resp.NodeID, want)
						continue
					}
					addrs.check(t, what, resp.NodeID, resp.Host, resp.Port)
				}
				continue
			}
			req.CoordinatorKeys = keys[typ]
			resp := raw.do(t, req).(*kmsg.FindCoordinatorResponse)
			checkCoordinators(t, what, resp, keys[typ], addrs, coords[typ])
		}
	}

	adminNotLeader(t, ctx, cl, addrs, o, d, topic, ranges[0])

	for v := ranges[60][0]; v <= ranges[60][1]; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		resp := raw.do(t, req).(*kmsg.DescribeClusterResponse)
		checkDescribeCluster(t, fmt.Sprintf("DescribeCluster v%d", v), resp, addrs, o)
	}
}

// adminNotLeader produces to a broker that does not lead partition 0 of
// topic at each Produce version in produce (from v3): NOT_LEADER with the
// current leader and, from v10, its endpoint (KIP-951) at the gateway's
// port. Then the same request to the leader appends at offset 20 (so the
// batch was valid and only the leadership differed).
func adminNotLeader(t *testing.T, ctx context.Context, cl *kgo.Client, addrs *adminAddrs, o *adminOracle, d *testkit.Dialer, topic string, produce [2]int16) {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := md.Topics[topic].Partitions[0].Leader
	notLeader := o.ids[0]
	if notLeader == leader {
		notLeader = o.ids[1]
	}
	request := func(v int16, value string) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		req.Acks = -1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rt.TopicID = md.Topics[topic].ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = 0
		rp.Records = adminKeyedRecordBatch([]byte("key"), []byte(value)) // topic is compacted
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	wrong := dialRawVia(t, ctx, d, net.JoinHostPort(addrs.host, strconv.Itoa(int(addrs.ports[notLeader]))))
	for v := max(produce[0], 3); v <= produce[1]; v++ {
		what := fmt.Sprintf("Produce v%d to non-leader %d", v, notLeader)
		resp := wrong.do(t, request(v, what)).(*kmsg.ProduceResponse)
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

	right := dialRawVia(t, ctx, d, net.JoinHostPort(addrs.host, strconv.Itoa(int(addrs.ports[leader]))))
	req := request(produce[1], "to the leader")
	resp := right.do(t, req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].BaseOffset != 20 {
		t.Errorf("Produce v%d to leader %d: %+v, want offset 20", req.Version, leader, resp.Topics)
	}
}

func checkDescribeCluster(t *testing.T, what string, r *kmsg.DescribeClusterResponse, addrs *adminAddrs, o *adminOracle) {
	t.Helper()
	if r.ErrorCode != 0 || r.ClusterID != o.cluster || !o.isBroker(r.ControllerID) {
		t.Errorf("%s: error %d cluster %q controller %d; want cluster %q, controller one of %v", what, r.ErrorCode, r.ClusterID, r.ControllerID, o.cluster, o.ids)
	}
	var ids []int32
	for _, b := range r.Brokers {
		ids = append(ids, b.NodeID)
		addrs.check(t, what, b.NodeID, b.Host, b.Port)
	}
	o.checkBrokers(t, what, ids)
}

// checkCoordinators checks a batched FindCoordinator response: each key's
// coordinator is want's (the upstream's) at the gateway's port.
func checkCoordinators(t *testing.T, what string, r *kmsg.FindCoordinatorResponse, keys []string, addrs *adminAddrs, want map[string]int32) {
	t.Helper()
	if len(r.Coordinators) != len(keys) {
		t.Errorf("%s: %d coordinators for %d keys: %+v", what, len(r.Coordinators), len(keys), r.Coordinators)
	}
	got := map[string]bool{}
	for _, c := range r.Coordinators {
		got[c.Key] = true
		if w, ok := want[c.Key]; !ok || c.ErrorCode != 0 || c.NodeID != w {
			t.Errorf("%s: key %s: error %d node %d, want the upstream's node %d (asked %v)", what, c.Key, c.ErrorCode, c.NodeID, w, ok)
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

// adminRecordBatch is a valid v2 record batch holding one record with a
// null key.
func adminRecordBatch(value []byte) []byte { return adminKeyedRecordBatch(nil, value) }

// adminKeyedRecordBatch is a valid v2 record batch holding one record; a
// nil key is a null one.
func adminKeyedRecordBatch(key, value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	if key == nil {
		rec = binary.AppendVarint(rec, -1)
	} else {
		rec = binary.AppendVarint(rec, int64(len(key)))
		rec = append(rec, key...)
	}
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
