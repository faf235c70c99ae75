package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/testkit"
)

// Helpers for the client-family tests that run on both upstreams
// (testkit.EachUpstream): what the upstream itself says, asked directly
// (not through the gateway), so that a test can check that the gateway
// shows the client the upstream's truth — broker ids, the controller, the
// cluster id — whichever cluster it fronts (kfake's brokers are 0..2 and
// its cluster id "tollgate-dev"; the real cluster's are 1..3 and a random
// id).

// upstreamInfo is the upstream's own view of itself.
type upstreamInfo struct {
	// Brokers are the upstream's broker ids.
	Brokers map[int32]bool
	// ClusterID is the upstream's cluster id.
	ClusterID string
}

// upstreamMetadata asks the upstream brokers (env.UpstreamAddrs) for their
// brokers and cluster id.
func upstreamMetadata(t *testing.T, env *testkit.Env) upstreamInfo {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctxT(t, 15*time.Second), cl)
	if err != nil {
		t.Fatalf("upstream metadata: %v", err)
	}
	info := upstreamInfo{Brokers: map[int32]bool{}}
	if resp.ClusterID != nil {
		info.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		info.Brokers[b.NodeID] = true
	}
	if len(info.Brokers) != 3 {
		t.Fatalf("the upstream lists brokers %v, want 3", info.Brokers)
	}
	return info
}

// checkNoUpstreamDials checks that none of dialed is an upstream broker's
// address: the client reached the cluster only through the gateway.
func checkNoUpstreamDials(t *testing.T, who string, env *testkit.Env, dialed []string) {
	t.Helper()
	for _, up := range env.UpstreamAddrs() {
		for _, a := range dialed {
			if a == up {
				t.Errorf("%s dialed upstream broker %s directly", who, up)
			}
		}
	}
}
