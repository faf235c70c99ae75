package kafkaapi

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// lookups is the gateway's metadata as the mutation lookups see it,
// counting the Metadata round trips.
type lookups struct {
	mu       sync.Mutex
	counts   map[string]int32
	dflt     int32
	metadata int // TopicPartitions, TopicPartitionsByID and DefaultPartitions calls
}

func (l *lookups) TopicPartitions(_ context.Context, names []string) (map[string]int32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.metadata++
	out := map[string]int32{}
	for _, n := range names {
		if c, ok := l.counts[n]; ok {
			out[n] = c
		}
	}
	return out, nil
}

func (l *lookups) TopicPartitionsByID(context.Context, [][16]byte) (map[[16]byte]int32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.metadata++
	return nil, nil
}

func (l *lookups) DefaultPartitions(context.Context) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.metadata++
	return l.dflt
}

// ledger records what the chain counts.
type ledger struct {
	mu        sync.Mutex
	mutations int64
	calls     int
}

func (l *ledger) Record(string, string, int16, int, int, time.Duration, time.Time) {}

func (l *ledger) AddMutations(_, _ string, n int64, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mutations += n
	l.calls++
}

// usageChain is a chain with the quota filter (controller_mutation_rate
// 100 for every client-id when limited) and the usage ledger's counter,
// both on lk, on a fixed clock; it returns their instances for c.
type usageChain struct {
	eng          *quota.Engine
	quota, usage proxy.Filter
}

func newUsageChain(t *testing.T, lk *lookups, l *ledger, limited bool) *usageChain {
	t.Helper()
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if limited {
		var q model.Quotas
		if err := q.Set(model.Entity{Client: model.Default()}, model.ControllerMutationRate, 100); err != nil {
			t.Fatal(err)
		}
		eng.SetQuotas(q)
	}
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	qf, err := enforce.New(enforce.Config{Engine: eng, Topics: lk, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	u := &usageChain{eng: eng}
	c := connAs(principal.AnonymousPrincipal)
	for _, f := range Chain(Deps{Quota: qf, Usage: l, Partitions: lk, Now: now}) {
		if cf, ok := f.(proxy.ConnFilter); ok {
			f = cf.ForConn(c)
		}
		switch f.Name() {
		case "quota":
			u.quota = f
		case "usage":
			u.usage = f
		}
	}
	if u.quota == nil || u.usage == nil {
		t.Fatal("the chain has no quota filter or no usage counter")
	}
	return u
}

// pass runs req through the quota filter and the counter as a session
// does, and the broker's answer resp back through the counter.
func (u *usageChain) pass(t *testing.T, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	c := connAs(principal.AnonymousPrincipal)
	r, err := proxytest.Request(req, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []proxy.Filter{u.quota, u.usage} {
		if v := f.(proxy.RequestHook).OnRequest(c, r); v.Respond != nil || v.Close != "" {
			t.Fatalf("%s: %+v, want the request forwarded", f.Name(), v)
		}
	}
	if err := u.usage.(proxy.ResponseHook).OnResponse(c, proxytest.Response(r, resp)); err != nil {
		t.Fatal(err)
	}
}

// tokens is the mutation bucket's balance.
func (u *usageChain) tokens(t *testing.T) float64 {
	t.Helper()
	for _, b := range u.eng.Usage(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) {
		if b.Key == model.ControllerMutationRate {
			return b.Tokens
		}
	}
	t.Fatal("no mutation bucket")
	return 0
}

func deleteTopicsV5(names ...string) (*kmsg.DeleteTopicsRequest, *kmsg.DeleteTopicsResponse) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TopicNames = 5, names
	resp := kmsg.NewPtrDeleteTopicsResponse()
	for _, n := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(n)
		resp.Topics = append(resp.Topics, rt)
	}
	return req, resp
}

// A mutation request's partition counts are looked up once, whether the
// quota filter needs them (a mutation quota) or only the ledger does, and
// both count the same partitions.
func TestUsageMutationsOneLookup(t *testing.T) {
	for _, limited := range []bool{true, false} {
		lk := &lookups{counts: map[string]int32{"a": 6, "b": 2}}
		l := &ledger{}
		u := newUsageChain(t, lk, l, limited)
		req, resp := deleteTopicsV5("a", "b")
		u.pass(t, req, resp)
		if lk.metadata != 1 {
			t.Errorf("limited %v: %d Metadata lookups for one DeleteTopics, want 1", limited, lk.metadata)
		}
		if l.mutations != 8 || l.calls != 1 {
			t.Errorf("limited %v: ledger counted %d partitions in %d calls, want 8 in 1", limited, l.mutations, l.calls)
		}
		if limited {
			// The bucket started full (100 a second over the default
			// window): the quota charged the same 8.
			before := u.tokens(t) + 8
			req, resp := deleteTopicsV5("a")
			u.pass(t, req, resp)
			if got := before - u.tokens(t); got != 14 {
				t.Errorf("quota charged %v partitions for the two requests, want 8 + 6", got)
			}
			if lk.metadata != 2 || l.mutations != 14 {
				t.Errorf("after a second request: %d lookups, %d partitions counted; want 2 and 14", lk.metadata, l.mutations)
			}
		}
	}
}

// CreateTopics v5+ with num_partitions -1 (and no assignments) creates
// the broker's num.partitions: the quota charges them and, when the
// response does not say how many were created, the ledger counts the
// same; with assignments, their count.
func TestUsageMutationsDefaultPartitions(t *testing.T) {
	lk := &lookups{dflt: 3}
	l := &ledger{}
	u := newUsageChain(t, lk, l, true)
	// A first request makes the bucket: its balance before the one
	// measured.
	dreq, dresp := deleteTopicsV5("none")
	u.pass(t, dreq, dresp)
	before := u.tokens(t)

	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, name := range []string{"dflt", "assigned"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		if name == "assigned" {
			for p := range int32(2) {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = p, []int32{0}
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	for _, name := range []string{"dflt", "assigned"} {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions = name, -1 // not told (e.g. no DescribeConfigs right)
		resp.Topics = append(resp.Topics, rt)
	}
	l.mutations = 0
	u.pass(t, req, resp)
	charged := before - u.tokens(t)
	if charged != 5 || l.mutations != 5 {
		t.Errorf("quota charged %v, ledger counted %d; want 5 (3 by num.partitions, 2 assigned) for both", charged, l.mutations)
	}
}
