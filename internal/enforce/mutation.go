package enforce

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
)

// item is one topic of a mutation request: how many partitions it
// creates, adds or deletes.
type item struct {
	topic string
	// byID is a DeleteTopics v6+ topic named by its id alone.
	byID bool
	id   [16]byte
	n    float64
}

// mutation applies controller_mutation_rate to CreateTopics,
// CreatePartitions and DeleteTopics. Strict mode checks each topic in
// request order: while the bucket is not below zero the topic is charged
// (however far below zero that takes it) and forwarded; once it is, every
// later topic fails with error 89 and is not charged. Permissive mode
// charges everything and throttles by the deficit.
func (p *Filter) mutation(cl *quota.Client, r *proxy.Request, now time.Time) proxy.Verdict {
	if !p.mutationsLimited() {
		return proxy.Verdict{}
	}
	req, err := r.Decode()
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	items := p.items(req)
	strict := r.Version >= strictFrom(r.Key)
	m := cl.Mutation(strict, now)
	rejected := make([]bool, len(items))
	nRejected := 0
	for i, it := range items {
		if !m.Record(it.n, now) {
			rejected[i] = true
			nRejected++
		}
	}
	t := m.Throttle(now)
	if nRejected == 0 {
		if strict {
			t = 0 // strict mode throttles only a request it rejected
		}
		return proxy.Verdict{Throttle: t}
	}
	if nRejected == len(items) {
		resp := req.ResponseKind()
		resp.SetVersion(r.Version)
		addRejected(resp, items, rejected)
		return proxy.Verdict{Respond: resp, Throttle: t}
	}
	return proxy.Verdict{
		Forward:  keepAccepted(req, rejected),
		Merge:    func(resp kmsg.Response) { addRejected(resp, items, rejected) },
		Throttle: t,
	}
}

// mutationsLimited reports whether any controller_mutation_rate quota or
// tenant ceiling is configured, so requests can skip decoding when none is.
func (p *Filter) mutationsLimited() bool {
	q := p.Engine.Quotas()
	return q.Enabled(quota.ControllerMutationRate) || p.Engine.TenantsLimit(quota.ControllerMutationRate)
}

// items lists a mutation request's topics with their partition counts.
func (p *Filter) items(req kmsg.Request) []item {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		out := make([]item, len(r.Topics))
		var dflt int32
		for i, t := range r.Topics {
			n := t.NumPartitions
			if len(t.ReplicaAssignment) > 0 {
				n = int32(len(t.ReplicaAssignment))
			} else if n < 0 {
				if dflt == 0 && p.Topics != nil {
					dflt = p.Topics.DefaultPartitions(ctx)
				}
				n = max(dflt, 1)
			}
			out[i] = item{topic: t.Topic, n: float64(n)}
		}
		return out
	case *kmsg.CreatePartitionsRequest:
		names := make([]string, len(r.Topics))
		for i, t := range r.Topics {
			names[i] = t.Topic
		}
		cur := p.partitions(ctx, names)
		out := make([]item, len(r.Topics))
		for i, t := range r.Topics {
			out[i] = item{topic: t.Topic, n: float64(max(t.Count-cur[t.Topic], 0))}
		}
		return out
	case *kmsg.DeleteTopicsRequest:
		if len(r.Topics) > 0 {
			// One item per topic, so that the items line up with the
			// request's topics (keepAccepted, addRejected).
			var names []string
			var ids [][16]byte
			for _, t := range r.Topics {
				if t.Topic != nil {
					names = append(names, *t.Topic)
				} else {
					ids = append(ids, t.TopicID)
				}
			}
			cur := p.partitions(ctx, names)
			curID := p.partitionsByID(ctx, ids)
			out := make([]item, len(r.Topics))
			for i, t := range r.Topics {
				if t.Topic == nil {
					// Named by id alone (v6+): charged the partitions
					// the upstream has for that id, as Kafka's
					// controller charges them; an unknown id nothing
					// (the broker answers UNKNOWN_TOPIC_ID).
					out[i] = item{byID: true, id: t.TopicID, n: float64(curID[t.TopicID])}
					continue
				}
				out[i] = item{topic: *t.Topic, id: t.TopicID, n: float64(cur[*t.Topic])}
			}
			return out
		}
		cur := p.partitions(ctx, r.TopicNames)
		out := make([]item, len(r.TopicNames))
		for i, n := range r.TopicNames {
			out[i] = item{topic: n, n: float64(cur[n])}
		}
		return out
	}
	return nil
}

func (p *Filter) partitions(ctx context.Context, topics []string) map[string]int32 {
	if p.Topics == nil || len(topics) == 0 {
		return nil
	}
	m, err := p.Topics.TopicPartitions(ctx, topics)
	if err != nil {
		p.Log.Warn("cannot read partition counts for the mutation quota; counting 0", "err", err)
	}
	return m
}

func (p *Filter) partitionsByID(ctx context.Context, ids [][16]byte) map[[16]byte]int32 {
	if p.Topics == nil || len(ids) == 0 {
		return nil
	}
	m, err := p.Topics.TopicPartitionsByID(ctx, ids)
	if err != nil {
		p.Log.Warn("cannot read partition counts by topic id for the mutation quota; counting 0", "err", err)
	}
	return m
}

// keepAccepted returns the request with the rejected topics removed.
func keepAccepted(req kmsg.Request, rejected []bool) kmsg.Request {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		r.Topics = filter(r.Topics, rejected)
	case *kmsg.CreatePartitionsRequest:
		r.Topics = filter(r.Topics, rejected)
	case *kmsg.DeleteTopicsRequest:
		if len(r.Topics) > 0 {
			r.Topics = filter(r.Topics, rejected)
		} else {
			r.TopicNames = filter(r.TopicNames, rejected)
		}
	}
	return req
}

func filter[T any](xs []T, drop []bool) []T {
	out := xs[:0]
	for i, x := range xs {
		if !drop[i] {
			out = append(out, x)
		}
	}
	return out
}

// addRejected puts the rejected topics, with error 89, into a response,
// in request order among the accepted ones.
func addRejected(resp kmsg.Response, items []item, rejected []bool) {
	msg := kmsg.StringPtr(quota.ThrottlingQuotaExceededMessage)
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		r.Topics = merge(r.Topics, items, rejected, func(it item) kmsg.CreateTopicsResponseTopic {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = it.topic, kerr.ThrottlingQuotaExceeded.Code, msg
			t.NumPartitions, t.ReplicationFactor = -1, -1
			return t
		})
	case *kmsg.CreatePartitionsResponse:
		r.Topics = merge(r.Topics, items, rejected, func(it item) kmsg.CreatePartitionsResponseTopic {
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = it.topic, kerr.ThrottlingQuotaExceeded.Code, msg
			return t
		})
	case *kmsg.DeleteTopicsResponse:
		r.Topics = merge(r.Topics, items, rejected, func(it item) kmsg.DeleteTopicsResponseTopic {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.TopicID, t.ErrorCode, t.ErrorMessage = it.id, kerr.ThrottlingQuotaExceeded.Code, msg
			if !it.byID {
				t.Topic = kmsg.StringPtr(it.topic)
			}
			return t
		})
	}
}

// merge interleaves the upstream's answers for accepted items with the
// gateway's answers for rejected ones, in request order.
func merge[T any](got []T, items []item, rejected []bool, mk func(item) T) []T {
	out := make([]T, 0, len(items))
	j := 0
	for i, it := range items {
		if rejected[i] {
			out = append(out, mk(it))
		} else if j < len(got) {
			out = append(out, got[j])
			j++
		}
	}
	return append(out, got[j:]...)
}
