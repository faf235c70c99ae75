package quota

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Resolve reports a bucket's rate and this instance's part of it exactly as
// Usage does: outside a Tollgate cluster the part is the whole; in one, the
// traffic of this instance's own connections, while the rate also counts
// what the other instances reported.
func TestResolveInstanceRateMatchesUsage(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, inCluster := range []bool{false, true} {
		eng, err := NewEngine(EngineConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var q model.Quotas
		q.Set(model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 1<<20)
		eng.SetQuotas(q)
		if inCluster {
			eng.JoinCluster(500*time.Millisecond, now)
			eng.Tick(ClusterTick{Live: 2, Connected: true, Decided: true}, now)
		}
		at := now
		// 30 s: longer than the quota window, so that the rate is steady.
		for range 60 {
			at = at.Add(500 * time.Millisecond)
			eng.Client("alice", "app").RecordProduce(1000, at)
			if inCluster {
				eng.DrainUsage(nil, at)
				eng.ApplyRemote([]Delta{{Key: model.ProducerByteRate, User: "alice", Client: "other", Value: 3000}}, at)
				eng.Tick(ClusterTick{Live: 2, Connected: true, Decided: true}, at)
			}
		}
		res := eng.Resolve(model.ProducerByteRate, "alice", "app", at)
		var u Usage
		for _, x := range eng.Usage(at) {
			if x.Key == model.ProducerByteRate && x.User == "alice" {
				u = x
			}
		}
		if res.Rate != u.Rate || res.InstanceRate != u.InstanceRate || res.Rate <= 0 {
			t.Errorf("cluster %v: Resolve rate %v (this instance %v), Usage rate %v (this instance %v)",
				inCluster, res.Rate, res.InstanceRate, u.Rate, u.InstanceRate)
		}
		switch {
		case !inCluster && res.InstanceRate != res.Rate:
			t.Errorf("outside a cluster: this instance's part %v is not the rate %v", res.InstanceRate, res.Rate)
		case inCluster && (res.InstanceRate < 0.2*res.Rate || res.InstanceRate > 0.3*res.Rate):
			// A quarter of the traffic is this instance's.
			t.Errorf("in a cluster: this instance's part %v of %v, want a quarter", res.InstanceRate, res.Rate)
		}
	}
}
