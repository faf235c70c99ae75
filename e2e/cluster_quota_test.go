package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

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
