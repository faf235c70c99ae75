package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// KIP-848 consumer groups through the gateway: two franz-go consumers
// with the server-side assignor (ConsumerGroupHeartbeat; Kafka 4.x's
// coordinator assigns the partitions) share a topic's six partitions,
// consume every record once between them, and ConsumerGroupDescribe
// through the gateway names each member's own address (the gateway writes
// it back over its own, in the upstream's format), not the gateway's.
// Kafka 3.9 has no KIP-848 groups by default; franz-go then falls back to
// the classic protocol, which the same checks hold for.
func TestConsumerGroupProtocol(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 90*time.Second)
		topic, group := up.Topic(t, "kip848"), up.GroupID(t, "kip848")
		adm := kadm.NewClient(newClient(t, env, nil))
		if _, err := adm.CreateTopic(ctx, 6, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
		type member struct {
			ip       string
			mu       sync.Mutex
			assigned int
			seen     map[string]int
		}
		members := []*member{{ip: "127.0.0.21"}, {ip: "127.0.0.22"}}
		var total sync.WaitGroup
		const n = 600
		seen := make(chan string, 2*n)
		for _, m := range members {
			m.seen = map[string]int{}
			cl := newClient(t, env, nil, kgo.Dialer(fromIP(m.ip)), kgo.ClientID("kip848-"+m.ip),
				kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ServerSideBalancer(),
				kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
					m.mu.Lock()
					m.assigned += len(a[topic])
					m.mu.Unlock()
				}))
			total.Add(1)
			go func() {
				defer total.Done()
				for ctx.Err() == nil {
					fs := cl.PollFetches(ctx)
					fs.EachRecord(func(r *kgo.Record) { seen <- string(r.Value) })
				}
			}()
		}
		// Both members hold partitions before anything is produced.
		deadline := time.Now().Add(60 * time.Second)
		for {
			both := true
			for _, m := range members {
				m.mu.Lock()
				both = both && m.assigned > 0
				m.mu.Unlock()
			}
			if both {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the two members did not both get partitions within 60 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		prod := newClient(t, env, nil, kgo.DefaultProduceTopic(topic))
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i), Partition: int32(i % 6)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for len(got) < n && ctx.Err() == nil {
			select {
			case v := <-seen:
				got[v]++
			case <-ctx.Done():
			}
		}
		if len(got) < n {
			t.Fatalf("consumed %d of %d records", len(got), n)
		}
		for v, c := range got {
			if c > 1 {
				t.Errorf("record %s consumed %d times", v, c)
			}
		}

		described, err := adm.DescribeConsumerGroups(ctx, group)
		if err == nil && described[group].Err == nil && len(described[group].Members) > 0 {
			hosts := map[string]bool{}
			for _, m := range described[group].Members {
				hosts[strings.TrimPrefix(m.ClientHost, "/")] = true
			}
			for _, m := range members {
				if !hosts[m.ip] && !hosts[m.ip+":0"] && !hostHasIP(hosts, m.ip) {
					t.Errorf("ConsumerGroupDescribe through the gateway shows hosts %v, not member %s's own address", hosts, m.ip)
				}
			}
			t.Logf("%s: KIP-848 group, members at %v", up.Name, hosts)
		} else {
			// The classic protocol (a broker without KIP-848 groups).
			dg, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			hosts := map[string]bool{}
			for _, m := range dg[group].Members {
				hosts[strings.TrimPrefix(m.ClientHost, "/")] = true
			}
			for _, m := range members {
				if !hostHasIP(hosts, m.ip) {
					t.Errorf("DescribeGroups through the gateway shows hosts %v, not member %s's own address", hosts, m.ip)
				}
			}
			t.Logf("%s: classic group (ConsumerGroupDescribe: %v), members at %v", up.Name, err, hosts)
		}
	})
}

// hostHasIP says whether a member host (Kafka's "ip", kfake's "ip:port")
// is ip.
func hostHasIP(hosts map[string]bool, ip string) bool {
	for h := range hosts {
		if h == ip || strings.HasPrefix(h, ip+":") {
			return true
		}
	}
	return false
}
