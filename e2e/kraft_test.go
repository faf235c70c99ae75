package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// KRaft's own views through the gateway. DescribeCluster (at every
// version the gateway offers) names the upstream's cluster id, a
// controller among its brokers, and each broker at the gateway's port,
// never its own address. DescribeQuorum reaches the real cluster's
// metadata quorum and comes back with its leader and voters but none of
// the controllers' listener addresses (the gateway has no port for
// them). kfake has no DescribeQuorum (it advertises none; its row checks
// DescribeCluster).
func TestKRaftViewsThroughGateway(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 30*time.Second)
		info := upstreamMetadata(t, env)
		gw := env.GatewayAddrs()
		raw := dialRaw(t, env.Bootstrap)
		av := raw.do(t, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		var dcMax, dqMax int16 = -1, -1
		for _, k := range av.ApiKeys {
			switch k.ApiKey {
			case int16(kmsg.DescribeCluster):
				dcMax = k.MaxVersion
			case int16(kmsg.DescribeQuorum):
				dqMax = k.MaxVersion
			}
		}
		if dcMax < 0 {
			t.Fatal("the gateway does not advertise DescribeCluster")
		}
		for v := int16(0); v <= dcMax; v++ {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version = v
			resp := raw.do(t, req).(*kmsg.DescribeClusterResponse)
			what := "DescribeCluster v" + strconv.Itoa(int(v))
			if resp.ErrorCode != 0 || resp.ClusterID != info.ClusterID || !info.Brokers[resp.ControllerID] || len(resp.Brokers) != 3 {
				t.Errorf("%s: error %d, cluster %q (upstream %q), controller %d, %d brokers", what, resp.ErrorCode, resp.ClusterID, info.ClusterID, resp.ControllerID, len(resp.Brokers))
			}
			for _, b := range resp.Brokers {
				if a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); !gw[a] || !info.Brokers[b.NodeID] {
					t.Errorf("%s: broker %d at %s, not a gateway address", what, b.NodeID, a)
				}
			}
		}
		if !up.Real() || dqMax < 0 {
			t.Logf("%s: DescribeQuorum advertised up to v%d", up.Name, dqMax)
			return
		}
		controllers := map[string]bool{}
		for _, n := range up.Kafka.Nodes() {
			controllers[n.Controller] = true
		}
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.Version = dqMax
		topic := kmsg.NewDescribeQuorumRequestTopic()
		topic.Topic = "__cluster_metadata"
		topic.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
		req.Topics = []kmsg.DescribeQuorumRequestTopic{topic}
		resp, err := req.RequestWith(ctx, newClient(t, env, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("DescribeQuorum v%d: %+v", dqMax, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID < 1 || len(p.CurrentVoters) != 3 {
			t.Errorf("DescribeQuorum: leader %d, voters %+v (error %d); want a leader among three voters", p.LeaderID, p.CurrentVoters, p.ErrorCode)
		}
		for _, n := range resp.Nodes {
			for _, l := range n.Listeners {
				a := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
				if controllers[a] || strings.Contains(a, up.Kafka.Nodes()[0].Controller) {
					t.Errorf("DescribeQuorum names controller %d's listener %s %s through the gateway", n.NodeID, l.Name, a)
				}
			}
		}
		t.Logf("%s: DescribeQuorum v%d: leader %d, %d voters, %d nodes with their listeners removed", up.Name, dqMax, p.LeaderID, len(p.CurrentVoters), len(resp.Nodes))
	})
}
