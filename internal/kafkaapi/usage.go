package kafkaapi

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
)

// The usage ledger's part of the chain: the gateway's ServeHook counts
// every answered request (UsageHook), and the last filter of the chain
// counts the partitions of the mutation requests the broker accepted
// (CreateTopics, CreatePartitions, DeleteTopics).

// Ledger is what the chain tells the usage ledger (usage.Ledger).
type Ledger interface {
	// Record counts one answered request.
	Record(user, clientID string, apiKey int16, reqSize, respSize int, throttle time.Duration, now time.Time)
	// AddMutations counts the partitions a mutation request changed.
	AddMutations(user, clientID string, partitions int64, now time.Time)
}

// UsageHook is the gateway's ServeHook (proxy.WithHooks) that counts
// every request the gateway answered into l.
func UsageHook(l Ledger, now func() time.Time) proxy.ServeHook {
	if now == nil {
		now = time.Now
	}
	return &usageServed{l: l, now: now}
}

type usageServed struct {
	l   Ledger
	now func() time.Time
}

// Served implements proxy.ServeHook.
func (o *usageServed) Served(c *principal.ConnInfo, r *proxy.Request, respSize int, throttle time.Duration) {
	o.l.Record(c.Principal.Name, r.ClientID, r.Key, r.Size, respSize, throttle, o.now())
}

// usageMutations counts the partitions CreateTopics, CreatePartitions and
// DeleteTopics changed. At request time it makes sure the request's
// partition counts are known (enforce.Mutations: the quota filter's
// lookup when it made one, else its own; kept with the request); at
// response time it counts the topics the broker accepted (error 0; a
// validate-only request counts nothing). CreateTopics v5+ answers with
// the partitions created, which wins over the request. Last in the chain:
// it sees only what is forwarded.
type usageMutations struct {
	l   Ledger
	mut *enforce.Mutations
	now func() time.Time
}

func newUsageMutations(l Ledger, topics enforce.Topics, log *slog.Logger, now func() time.Time) *usageMutations {
	return &usageMutations{l: l, mut: enforce.NewMutations(topics, log), now: now}
}

func (f *usageMutations) Name() string { return "usage" }

func (f *usageMutations) Keys() []int16 {
	return []int16{kmsg.CreateTopics.Int16(), kmsg.DeleteTopics.Int16(), kmsg.CreatePartitions.Int16()}
}

// OnRequest looks up what the forwarded request changes, before the
// broker changes it.
func (f *usageMutations) OnRequest(_ proxy.Conn, r *proxy.Request) proxy.Verdict {
	_, _ = f.mut.Of(r) // a body kmsg cannot read: the broker answers it
	return proxy.Verdict{}
}

// OnResponse counts the accepted topics.
func (f *usageMutations) OnResponse(c proxy.Conn, resp *proxy.Response) error {
	mu, ok := resp.Req.Shared.(*enforce.Mutation)
	if !ok || !usageAsked(resp.Req.Key, mu) {
		return nil
	}
	kr, ok := resp.Decode()
	if !ok {
		return nil
	}
	f.l.AddMutations(c.Info().Principal.Name, resp.Req.ClientID, acceptedPartitions(kr, mu), f.now())
	return nil
}

// usageAsked reports whether the ledger counts mu's response at all: a
// request that changes nothing, or whose topics' current counts are all
// unknown, is not counted.
func usageAsked(key int16, mu *enforce.Mutation) bool {
	if mu.ValidateOnly {
		return false
	}
	for _, t := range mu.Topics {
		if counted(key, t) {
			return true
		}
	}
	return false
}

// counted is whether t is counted when the broker accepts it: every
// topic created; a topic grown or deleted whose current count was read
// (and, grown, that gains partitions).
func counted(key int16, t enforce.MutationTopic) bool {
	switch key {
	case kmsg.CreateTopics.Int16():
		return true
	case kmsg.CreatePartitions.Int16():
		return t.Known && t.Partitions > 0
	}
	return t.Known
}

// acceptedPartitions is the partitions of the topics resp accepted.
func acceptedPartitions(resp kmsg.Response, mu *enforce.Mutation) int64 {
	byName := map[string]int32{}
	byID := map[[16]byte]int32{}
	for _, t := range mu.Topics {
		if !counted(resp.Key(), t) {
			continue
		}
		if t.ByID {
			byID[t.ID] = t.Partitions
		} else {
			byName[t.Topic] = t.Partitions
		}
	}
	var n int64
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				continue
			}
			if r.Version >= 5 && t.NumPartitions > 0 {
				n += int64(t.NumPartitions)
			} else {
				n += int64(byName[t.Topic])
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == 0 {
				n += int64(byName[t.Topic])
			}
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				continue
			}
			if c, ok := byID[t.TopicID]; ok && t.TopicID != ([16]byte{}) {
				n += int64(c)
			} else if t.Topic != nil {
				n += int64(byName[*t.Topic])
			}
		}
	}
	return n
}
