package enforce

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// Mutation is what a mutation request (CreateTopics, CreatePartitions,
// DeleteTopics) changes, one entry per topic in request order. It is
// looked up once per request (Mutations.Of) and kept with it
// (proxy.Request.Shared): the mutation quota charges it and the usage
// ledger counts the accepted topics' partitions from it.
type Mutation struct {
	// ValidateOnly is a CreateTopics or CreatePartitions that changes
	// nothing (the broker only validates it).
	ValidateOnly bool
	Topics       []MutationTopic
}

// MutationTopic is one topic of a mutation request.
type MutationTopic struct {
	Topic string
	// ByID is a DeleteTopics v6+ topic named by its id alone.
	ByID bool
	ID   [16]byte
	// Partitions is how many partitions the topic creates, adds or
	// deletes, as Kafka's controller counts them: a CreateTopics topic's
	// assignments, else its num_partitions, else (-1) the broker's
	// num.partitions; a CreatePartitions topic's new count less its
	// current one; a deleted topic's current count.
	Partitions int32
	// Known is whether the count rests on the cluster's answer: always
	// for CreateTopics; for CreatePartitions and DeleteTopics, whether the
	// topic's current partition count was read (a topic the upstream
	// does not know, or a lookup that failed, counts 0 partitions
	// deleted, and all of a CreatePartitions count added).
	Known bool
}

// Mutations looks up what mutation requests change in the cluster's
// metadata.
type Mutations struct {
	topics Topics
	log    *slog.Logger
}

// NewMutations returns the lookups of topics (nil: every topic's
// current count is unknown, and the broker's num.partitions is 1).
func NewMutations(topics Topics, log *slog.Logger) *Mutations {
	if log == nil {
		log = slog.Default()
	}
	return &Mutations{topics: topics, log: log}
}

// Of is what r, a mutation request, changes: looked up on the first call
// for r, whichever filter makes it, and kept in r.Shared for the others
// (and for its response's hooks). The error is a body kmsg cannot read.
func (m *Mutations) Of(r *proxy.Request) (*Mutation, error) {
	if mu, ok := r.Shared.(*Mutation); ok {
		return mu, nil
	}
	req, err := r.Decode()
	if err != nil {
		return nil, err
	}
	mu := m.lookup(req)
	r.Shared = mu
	return mu, nil
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
	mu, err := p.mut.Of(r)
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	req, _ := r.Decode() // decoded by Of
	items := mu.Topics
	strict := r.Version >= strictFrom(r.Key)
	m := cl.Mutation(strict, now)
	rejected := make([]bool, len(items))
	nRejected := 0
	for i, it := range items {
		if !m.Record(float64(it.Partitions), now) {
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
	q := p.engine.Quotas()
	return q.Enabled(model.ControllerMutationRate) || p.engine.TenantsLimit(model.ControllerMutationRate)
}

// lookup reads a mutation request's topics' partition counts: one
// Metadata round trip at most (and the broker's num.partitions, read once).
func (m *Mutations) lookup(req kmsg.Request) *Mutation {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		out := make([]MutationTopic, len(r.Topics))
		var dflt int32
		for i, t := range r.Topics {
			n := t.NumPartitions
			if len(t.ReplicaAssignment) > 0 {
				n = int32(len(t.ReplicaAssignment))
			} else if n < 0 {
				if dflt == 0 && m.topics != nil {
					dflt = m.topics.DefaultPartitions(ctx)
				}
				n = max(dflt, 1)
			}
			out[i] = MutationTopic{Topic: t.Topic, Partitions: n, Known: true}
		}
		return &Mutation{ValidateOnly: r.ValidateOnly, Topics: out}
	case *kmsg.CreatePartitionsRequest:
		names := make([]string, len(r.Topics))
		for i, t := range r.Topics {
			names[i] = t.Topic
		}
		cur := m.partitions(ctx, names)
		out := make([]MutationTopic, len(r.Topics))
		for i, t := range r.Topics {
			c, ok := cur[t.Topic]
			out[i] = MutationTopic{Topic: t.Topic, Partitions: max(t.Count-c, 0), Known: ok}
		}
		return &Mutation{ValidateOnly: r.ValidateOnly, Topics: out}
	case *kmsg.DeleteTopicsRequest:
		if len(r.Topics) > 0 {
			// One entry per topic, so that the entries line up with
			// the request's topics (keepAccepted, addRejected).
			var names []string
			var ids [][16]byte
			for _, t := range r.Topics {
				if t.Topic != nil {
					names = append(names, *t.Topic)
				} else {
					ids = append(ids, t.TopicID)
				}
			}
			cur := m.partitions(ctx, names)
			curID := m.partitionsByID(ctx, ids)
			out := make([]MutationTopic, len(r.Topics))
			for i, t := range r.Topics {
				if t.Topic == nil {
					// Named by id alone (v6+): the partitions the
					// upstream has for that id, as Kafka's controller
					// charges them; an unknown id nothing (the broker
					// answers UNKNOWN_TOPIC_ID).
					c, ok := curID[t.TopicID]
					out[i] = MutationTopic{ByID: true, ID: t.TopicID, Partitions: c, Known: ok}
					continue
				}
				c, ok := cur[*t.Topic]
				out[i] = MutationTopic{Topic: *t.Topic, ID: t.TopicID, Partitions: c, Known: ok}
			}
			return &Mutation{Topics: out}
		}
		cur := m.partitions(ctx, r.TopicNames)
		out := make([]MutationTopic, len(r.TopicNames))
		for i, n := range r.TopicNames {
			c, ok := cur[n]
			out[i] = MutationTopic{Topic: n, Partitions: c, Known: ok}
		}
		return &Mutation{Topics: out}
	}
	return &Mutation{}
}

func (m *Mutations) partitions(ctx context.Context, topics []string) map[string]int32 {
	if m.topics == nil || len(topics) == 0 {
		return nil
	}
	c, err := m.topics.TopicPartitions(ctx, topics)
	if err != nil {
		m.log.Warn("cannot read partition counts for a mutation request; the quota charges 0 and the usage ledger counts nothing for its topics", "err", err)
	}
	return c
}

func (m *Mutations) partitionsByID(ctx context.Context, ids [][16]byte) map[[16]byte]int32 {
	if m.topics == nil || len(ids) == 0 {
		return nil
	}
	c, err := m.topics.TopicPartitionsByID(ctx, ids)
	if err != nil {
		m.log.Warn("cannot read partition counts by topic id for a mutation request; the quota charges 0 and the usage ledger counts nothing for its topics", "err", err)
	}
	return c
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
func addRejected(resp kmsg.Response, items []MutationTopic, rejected []bool) {
	msg := kmsg.StringPtr(quota.ThrottlingQuotaExceededMessage)
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		r.Topics = merge(r.Topics, items, rejected, func(it MutationTopic) kmsg.CreateTopicsResponseTopic {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = it.Topic, kerr.ThrottlingQuotaExceeded.Code, msg
			t.NumPartitions, t.ReplicationFactor = -1, -1
			return t
		})
	case *kmsg.CreatePartitionsResponse:
		r.Topics = merge(r.Topics, items, rejected, func(it MutationTopic) kmsg.CreatePartitionsResponseTopic {
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = it.Topic, kerr.ThrottlingQuotaExceeded.Code, msg
			return t
		})
	case *kmsg.DeleteTopicsResponse:
		r.Topics = merge(r.Topics, items, rejected, func(it MutationTopic) kmsg.DeleteTopicsResponseTopic {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.TopicID, t.ErrorCode, t.ErrorMessage = it.ID, kerr.ThrottlingQuotaExceeded.Code, msg
			if !it.ByID {
				t.Topic = kmsg.StringPtr(it.Topic)
			}
			return t
		})
	}
}

// merge interleaves the upstream's answers for accepted items with the
// gateway's answers for rejected ones, in request order.
func merge[T any](got []T, items []MutationTopic, rejected []bool, mk func(MutationTopic) T) []T {
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
