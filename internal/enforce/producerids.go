package enforce

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// producerIDs applies producer_ids_rate, Tollgate's quota of new producer
// ids per second (KIP-936's, which Kafka has not adopted): every producer,
// idempotent (the default since Kafka 3.0) or transactional, starts with an
// InitProducerId, and every producer id a broker hands out is state its
// ProducerStateManager keeps for producer.id.expiration.ms (a day) — an
// application that makes a producer per message fills the brokers' memory.
//
//   - An InitProducerId answered without error with a producer id that is
//     not the one the request named (a new id, not an epoch bump of the
//     client's own, KIP-360) is charged one to the client's bucket (and its
//     tenant's), a token bucket over Kafka's controller quota window as
//     controller_mutation_rate's: a burst of quota × 11 s by default
//     (burst_seconds sets it).
//   - Its answer carries the throttle the bucket's deficit calls for
//     (KIP-219: the client waits it out on that connection), and while the
//     bucket is below zero every InitProducerId is held before it is
//     forwarded until the deficit is paid off (at most quota.max_throttle):
//     a producer per message gets its next id no faster than the quota,
//     whichever connection — and a new producer's connection is a new
//     one — it asks on.
//
// Kafka's KIP-936 discussion counts ids at Produce on each partition
// leader, because a broker sees only its own share; Tollgate sees every
// InitProducerId of the cluster, and holds the client before a broker has
// handed out the id.
type producerIDs struct{ f *Filter }

// ProducerIDs is the filter of InitProducerId for producer_ids_rate, which
// stands after the quota filter in the chain.
func (f *Filter) ProducerIDs() proxy.Filter { return producerIDs{f} }

func (producerIDs) Name() string  { return "producer-ids" }
func (producerIDs) Keys() []int16 { return []int16{int16(kmsg.InitProducerID)} }

// askedID is what an InitProducerId asked for, kept with the request for
// its response (proxy.Request.Shared); throttle is the answer's.
type askedID struct {
	id       int64
	throttle time.Duration
}

func (p producerIDs) limited() bool {
	q := p.f.engine.Quotas()
	return q.Enabled(model.ProducerIDsRate) || p.f.engine.TenantsLimit(model.ProducerIDsRate)
}

// OnRequest holds an InitProducerId while the client's bucket is below
// zero.
func (p producerIDs) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	if !p.limited() {
		return proxy.Verdict{}
	}
	req, err := proxy.DecodeAs[*kmsg.InitProducerIDRequest](r)
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	r.Shared = &askedID{id: req.ProducerID}
	cl := p.f.engine.Client(c.Info().Principal.Name, r.ClientID)
	return proxy.Verdict{Hold: cl.HoldProducerID(p.f.now())}
}

// OnResponse charges a new producer id.
func (p producerIDs) OnResponse(c proxy.Conn, r *proxy.Response) error {
	asked, ok := r.Req.Shared.(*askedID)
	if !ok {
		return nil
	}
	resp, ok := r.Decode()
	if !ok {
		return nil // the client's parser judges it
	}
	ir := resp.(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 || ir.ProducerID < 0 || ir.ProducerID == asked.id {
		return nil
	}
	asked.throttle = p.f.engine.Client(c.Info().Principal.Name, r.Req.ClientID).RecordProducerID(p.f.now())
	return nil
}

// Throttle implements proxy.ThrottleHook: the answer that gave a new id
// carries the deficit's throttle.
func (p producerIDs) Throttle(_ proxy.Conn, r *proxy.Request, _ int) time.Duration {
	if asked, ok := r.Shared.(*askedID); ok {
		return asked.throttle
	}
	return 0
}
