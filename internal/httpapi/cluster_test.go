package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/cluster"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// clusterEngine is a quota engine with 30 s of alice's producer traffic
// (longer than the quota window): 1000 bytes every half second through
// this instance and, in a Tollgate cluster, 3000 more reported by another
// instance, so that this instance's part is a quarter of the rate.
func clusterEngine(t *testing.T, inCluster bool, now time.Time) *quota.Engine {
	t.Helper()
	var q model.Quotas
	q.Set(model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 1<<20)
	eng := engineWith(t, quota.EngineConfig{}, q)
	at := now.Add(-30 * time.Second)
	tick := quota.ClusterTick{Live: 2, Connected: true, Decided: true}
	if inCluster {
		eng.JoinCluster(500*time.Millisecond, at)
		eng.Tick(tick, at)
	}
	for at.Before(now) {
		at = at.Add(500 * time.Millisecond)
		eng.Client("alice", "app").RecordProduce(1000, at)
		if inCluster {
			eng.DrainUsage(nil, at)
			eng.ApplyRemote([]quota.Delta{{Key: model.ProducerByteRate, User: "alice", Client: "other", Value: 3000}}, at)
			eng.Tick(tick, at)
		}
	}
	return eng
}

type rates struct {
	Quota        string  `json:"quota"`
	Rate         float64 `json:"rate"`
	InstanceRate float64 `json:"instance_rate"`
	Utilization  float64 `json:"utilization"`
}

// /api/v1/buckets and /api/v1/resolve give each bucket's rate (in a
// Tollgate cluster, the cluster's) and this instance's part of it
// (instance_rate, equal to rate outside one); /api/v1/cluster answers 200
// with the cluster's state in one and a clear 404 outside, to readers only.
func TestClusterRatesAndStatus(t *testing.T) {
	now := time.Unix(1_700_000_000, 0) // newPort's stopped clock
	joined := now.Add(-time.Minute)
	status := cluster.Status{
		ClusterID: "prod", InstanceID: "tg-a", Connected: true, Live: 2,
		Members: []cluster.Member{
			{ID: "tg-a", Version: "1.2.0", Addr: "10.0.0.1:9644", Digest: "aaaa", Self: true, Joined: joined, LastSeen: now},
			{ID: "tg-b", Version: "1.2.0", Addr: "10.0.0.2:9644", Digest: "bbbb", Joined: joined, LastSeen: now},
		},
		ConfigLog:     cluster.LogStatus{Topic: "_tollgate-prod-config", Ready: true, Next: 7},
		Exchange:      cluster.ExchangeStats{Published: 120, Received: 240},
		DigestsDiffer: true,
	}
	for _, inCluster := range []bool{false, true} {
		eng := clusterEngine(t, inCluster, now)
		f := newPort(t, func(s *Sources) {
			s.Engine = eng
			if inCluster {
				s.Cluster = func() (cluster.Status, bool) { return status, true }
			} else {
				s.Cluster = func() (cluster.Status, bool) { return cluster.Status{}, false }
			}
		})
		cl := f.srv.Client()
		check := func(where string, r rates) {
			t.Helper()
			if r.Rate <= 0 {
				t.Errorf("cluster %v, %s: no rate: %+v", inCluster, where, r)
			}
			if !inCluster && r.InstanceRate != r.Rate {
				t.Errorf("outside a cluster, %s: instance_rate %v is not rate %v", where, r.InstanceRate, r.Rate)
			}
			if inCluster && (r.InstanceRate < 0.2*r.Rate || r.InstanceRate > 0.3*r.Rate) {
				t.Errorf("in a cluster, %s: instance_rate %v of rate %v, want a quarter", where, r.InstanceRate, r.Rate)
			}
			if want := r.Rate / (1 << 20); r.Utilization < 0.99*want || r.Utilization > 1.01*want {
				t.Errorf("cluster %v, %s: utilization %v, want rate ÷ quota %v", inCluster, where, r.Utilization, want)
			}
		}
		code, _, body := send(t, cl, f.srv.URL, "GET", "/api/v1/buckets", f.reader, "", "")
		var bs struct{ Buckets []rates }
		if err := json.Unmarshal([]byte(body), &bs); code != 200 || err != nil || len(bs.Buckets) != 1 {
			t.Fatalf("buckets: %d %v %s", code, err, body)
		}
		check("buckets", bs.Buckets[0])
		code, _, body = send(t, cl, f.srv.URL, "GET", "/api/v1/resolve?user=alice&client_id=app", f.reader, "", "")
		var rs struct{ Quotas []rates }
		if err := json.Unmarshal([]byte(body), &rs); code != 200 || err != nil || len(rs.Quotas) == 0 || rs.Quotas[0].Quota != "producer_byte_rate" {
			t.Fatalf("resolve: %d %v %s", code, err, body)
		}
		check("resolve", rs.Quotas[0])
		if rs.Quotas[0].Rate != bs.Buckets[0].Rate || rs.Quotas[0].InstanceRate != bs.Buckets[0].InstanceRate {
			t.Errorf("cluster %v: resolve %+v and buckets %+v disagree", inCluster, rs.Quotas[0], bs.Buckets[0])
		}

		if code, _, body := send(t, cl, f.srv.URL, "GET", EndpointCluster, "", "", ""); code != 401 {
			t.Errorf("cluster %v: anonymous GET %s: %d %s", inCluster, EndpointCluster, code, body)
		}
		code, _, body = send(t, cl, f.srv.URL, "GET", EndpointCluster, f.reader, "", "")
		if !inCluster {
			if code != 404 || !strings.Contains(body, "not part of a Tollgate cluster (cluster.id is not set)") {
				t.Errorf("outside a cluster, GET %s: %d %s", EndpointCluster, code, body)
			}
			continue
		}
		var got cluster.Status
		if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
			t.Fatalf("GET %s: %d %v %s", EndpointCluster, code, err, body)
		}
		if got.ClusterID != "prod" || got.InstanceID != "tg-a" || got.Live != 2 || len(got.Members) != 2 ||
			!got.Members[0].Self || got.Members[1].Addr != "10.0.0.2:9644" || !got.ConfigLog.Ready ||
			got.Exchange.Received != 240 || !got.DigestsDiffer {
			t.Errorf("GET %s: %+v", EndpointCluster, got)
		}
		for _, w := range []string{`"config_digests_differ": true`, `"instances": [`, `"admin_addr": "10.0.0.1:9644"`, `"reports_received": 240`} {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %s:\n%s", EndpointCluster, w, body)
			}
		}
	}
}
