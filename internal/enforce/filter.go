package enforce

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics answers what the mutation quota must know of the cluster.
type Topics interface {
	TopicPartitions(ctx context.Context, topics []string) (map[string]int32, error)
	// TopicPartitionsByID is TopicPartitions for topics named by id
	// (DeleteTopics v6+).
	TopicPartitionsByID(ctx context.Context, ids [][16]byte) (map[[16]byte]int32, error)
	DefaultPartitions(ctx context.Context) int32
}

// Config is what a quota filter is built from; New checks it.
type Config struct {
	// Engine holds the quotas (required).
	Engine *quota.Engine
	// Topics answers what the mutation quota must know of the cluster:
	// the gateway's metadata lookups (nil: no topic's current partition
	// count is known, and the broker's num.partitions is taken as 1).
	Topics Topics
	// Names lists the upstream's topic ids and names, for per-topic
	// quotas on requests that name topics by id (the gateway; nil: ids
	// are learnt from the Metadata answers that pass only).
	Names TopicNames
	// TopicUsage, when set, hears each topic's record bytes as per-topic
	// quotas charge them (produce: a Produce's; else a Fetch or ShareFetch
	// response's), for the usage ledger's per-topic rows. It is called on
	// the data path: it must not block or allocate.
	TopicUsage func(user, clientID string, topic []byte, produce bool, n int, now time.Time)
	// Storage, when set, is how long a Produce is held — and its answer
	// throttled — now: while the cluster is low on disk (diskguard), 0
	// otherwise. It is called on the data path: it must not block or
	// allocate.
	Storage func() time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log is where lookups that fail are reported (default slog.Default).
	Log *slog.Logger
}

// Filter is the quota filter of a gateway's chain. Each connection gets its
// own instance (ForConn) holding quota.Client handles, so that steady
// traffic skips the engine's lookups. It is built complete by New and
// never changed after.
type Filter struct {
	engine     *quota.Engine
	names      TopicNames
	topicUsage func(user, clientID string, topic []byte, produce bool, n int, now time.Time)
	storage    func() time.Duration
	now        func() time.Time
	log        *slog.Logger
	mut        *Mutations // a mutation request's partition counts (mutation.go)

	ids topicIDs // topic id → name, for per-topic quotas (topic.go)
}

// New returns a filter enforcing c.Engine's quotas.
func New(c Config) (*Filter, error) {
	if c.Engine == nil {
		return nil, errors.New("quota filter: no quota engine")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Storage == nil {
		c.Storage = func() time.Duration { return 0 }
	}
	return &Filter{engine: c.Engine, names: c.Names, topicUsage: c.TopicUsage, storage: c.Storage, now: c.Now, log: c.Log,
		mut: NewMutations(c.Topics, c.Log)}, nil
}

// Engine is the engine whose quotas the filter enforces.
func (f *Filter) Engine() *quota.Engine { return f.engine }

// Name implements proxy.Filter.
func (f *Filter) Name() string { return "quota" }

// Keys implements proxy.Filter: the APIs Kafka's client quotas charge —
// every API request_percentage charges, which is every API but the exempt
// ones (request.go); ByContent lists those the byte rates and the
// mutation quota read.
func (f *Filter) Keys() []int16 { return allKeys }

// ForConn implements proxy.ConnFilter.
func (f *Filter) ForConn(proxy.Conn) proxy.Filter { return connFor(f) }

// The filter itself serves a caller without connections of its own (a
// benchmark, a test) with a fresh handle per call.

// OnRequest implements proxy.RequestHook.
func (f *Filter) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return connFor(f).OnRequest(c, r)
}

// Throttle implements proxy.ThrottleHook.
func (f *Filter) Throttle(c proxy.Conn, r *proxy.Request, size int) time.Duration {
	return connFor(f).Throttle(c, r, size)
}

// Dropped implements proxy.DropHook.
func (f *Filter) Dropped(c proxy.Conn, r *proxy.Request) { connFor(f).Dropped(c, r) }

// AnsweredLocally implements proxy.LocalHook.
func (f *Filter) AnsweredLocally(c proxy.Conn, r *proxy.Request, took time.Duration) time.Duration {
	return connFor(f).AnsweredLocally(c, r, took)
}

// conn is the filter of one connection. Requests arrive on the session's
// reader and responses on its responder, so each side keeps its own
// handle (a quota.Client is not safe for concurrent use).
type conn struct {
	f         *Filter
	req, resp handle
	// meter times the upstream's answers for request_percentage; the
	// responder's side only.
	meter quota.RequestMeter

	// Per-topic quotas (topic.go). The reader's side: reqWalk, reqCl
	// (the client a streamed Produce's topics are charged to). The
	// responder's: respWalk, respCl, respTopic (a buffered Fetch
	// response's per-topic throttle, from OnResponse to Throttle),
	// fetchUntil (ms, a streamed one's). produceUntil (ms) goes from the
	// reader to the responder.
	reqWalk, respWalk              topicWalk
	reqCl, respCl                  *quota.Client
	respTopic                      time.Duration
	fetchUntil                     int64
	produceUntil                   atomic.Int64
	streamProduceFn, streamFetchFn func([]byte, [16]byte, int) // bound once: a verdict carries them without allocating
}

func connFor(f *Filter) *conn {
	q := &conn{f: f}
	q.reqWalk.q, q.respWalk.q = q, q
	q.streamProduceFn, q.streamFetchFn = q.streamProduce, q.streamFetch
	return q
}

// handle is a quota.Client for the connection's current (user, client-id);
// a new client-id (rare) or the login's principal takes a new one.
type handle struct{ cl *quota.Client }

func (h *handle) client(e *quota.Engine, c proxy.Conn, clientID string) *quota.Client {
	user := c.Info().Principal.Name
	if h.cl == nil || h.cl.User() != user || h.cl.ClientID() != clientID {
		h.cl = e.Client(user, clientID)
	}
	return h.cl
}

func (q *conn) Name() string  { return q.f.Name() }
func (q *conn) Keys() []int16 { return q.f.Keys() }

// OnRequest implements proxy.RequestHook. Every request of a client whose
// request_percentage bucket is throttled waits for the bucket's deadline,
// on whichever connection it came (the byte rates hold theirs likewise).
func (q *conn) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	now := q.f.now()
	cl := q.req.client(q.f.engine, c, r.ClientID)
	held := cl.Hold(model.RequestPercentage, now)
	noteWait(r)
	v := q.charge(cl, r, now, held)
	v.Hold = max(v.Hold, held)
	return v
}

// charge is OnRequest for the byte rates and the mutation quota; held is
// how long the request already waits for the request quota.
func (q *conn) charge(cl *quota.Client, r *proxy.Request, now time.Time, held time.Duration) proxy.Verdict {
	switch r.Key {
	case int16(kmsg.Produce):
		// The cluster low on disk holds every Produce, and throttles its
		// answer, by storage.hold.
		disk := q.f.storage()
		if r.Acks == 0 {
			// No response will carry a throttle: record now and mute.
			hold := max(cl.Hold(model.ProducerByteRate, now), held, disk)
			hold, tt, fn := q.produceTopics(cl, r, now, hold)
			return proxy.Verdict{Hold: hold, Throttle: max(cl.RecordProduce(r.Size, now.Add(hold)), tt, disk), TopicBytes: fn}
		}
		hold, reserved := cl.HoldProduce(r.Size, now)
		setReservation(r, reserved)
		hold, _, fn := q.produceTopics(cl, r, now, max(hold, held, disk))
		return proxy.Verdict{Hold: hold, Throttle: disk, TopicBytes: fn}
	case int16(kmsg.Fetch):
		hold := max(cl.Hold(model.ConsumerByteRate, now), held)
		hold, fn := q.fetchTopics(cl, r, now, hold)
		req, ok := wire.FetchMaxBytes(r.Payload, r.BodyOffset, r.Version)
		if !ok {
			return proxy.Verdict{Hold: hold, TopicBytes: fn}
		}
		clamp, reserved := cl.ReserveFetch(req, now.Add(hold))
		if clamp < req {
			wire.ClampFetch(r.Payload, r.BodyOffset, r.Version, clamp)
		}
		setReservation(r, reserved)
		return proxy.Verdict{Hold: hold, TopicBytes: fn}
	case int16(kmsg.ShareFetch):
		return q.shareFetch(cl, r, now, held)
	case int16(kmsg.CreateTopics), int16(kmsg.CreatePartitions), int16(kmsg.DeleteTopics):
		return q.f.mutation(cl, r, now)
	}
	return proxy.Verdict{}
}

// shareFetch is Fetch's pattern for KIP-932 share groups, as Kafka applies
// it: held while the bucket is throttled, max_bytes clamped to what the
// quota allows now (the request is small and rewritten only when the clamp
// bites), and the response size charged to consumer_byte_rate when it
// passes. Per-topic consumer quotas hold it and charge its topics as a
// Fetch's (topic.go).
func (q *conn) shareFetch(cl *quota.Client, r *proxy.Request, now time.Time, held time.Duration) proxy.Verdict {
	hold := max(cl.Hold(model.ConsumerByteRate, now), held)
	req, err := proxy.DecodeAs[*kmsg.ShareFetchRequest](r)
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	if req.MinBytes > 0 {
		setWait(r, req.MaxWaitMillis) // Fetch's rule (noteWait)
	}
	hold = q.shareFetchTopics(cl, req, now, hold)
	clamp, reserved := cl.ReserveFetch(req.MaxBytes, now.Add(hold))
	setReservation(r, reserved)
	v := proxy.Verdict{Hold: hold}
	if clamp < req.MaxBytes {
		req.MaxBytes = clamp
		req.MinBytes = min(req.MinBytes, clamp)
		v.Forward = req
	}
	return v
}

// Throttle implements proxy.ThrottleHook: Produce is charged its request
// size and Fetch its response size when the response passes, and every
// response its request's upstream time (request_percentage); the
// response carries the larger throttle, as in Kafka.
func (q *conn) Throttle(c proxy.Conn, r *proxy.Request, size int) time.Duration {
	now := q.f.now()
	cl := q.resp.client(q.f.engine, c, r.ClientID)
	var t time.Duration
	switch r.Key {
	case int16(kmsg.Produce):
		cl.Release(model.ProducerByteRate, reservation(r), now)
		t = max(cl.RecordProduce(r.Size, now), q.topicThrottle(r.Key, now))
	case int16(kmsg.Fetch), int16(kmsg.ShareFetch):
		if r.Key == int16(kmsg.Fetch) {
			q.respCl = cl // a streamed response's topics are charged to it
		}
		cl.Release(model.ConsumerByteRate, reservation(r), now)
		t = max(cl.RecordFetch(size, now), q.topicThrottle(r.Key, now))
	}
	// Recorded even when nothing is charged: as in Kafka, every response
	// of a client over its quota is throttled.
	return max(t, cl.RecordRequest(q.meter.Charge(r.Forwarded, now, allowedWait(r)), now))
}

// AnsweredLocally implements proxy.LocalHook: a request a later filter of
// the chain answered itself (the quotas and SCRAM credentials of the
// control plane, Tollgate's broker configs, the clients' telemetry) is
// charged to request_percentage the time the gateway took to answer it,
// as Kafka charges its request handler's time, and, as for every request,
// the answer of a client over its quota is throttled. On the reader's
// handle: it runs on the session's reader.
func (q *conn) AnsweredLocally(c proxy.Conn, r *proxy.Request, took time.Duration) time.Duration {
	now := q.f.now()
	return q.req.client(q.f.engine, c, r.ClientID).RecordRequest(took, now)
}

// Dropped implements proxy.DropHook: a request that will not be answered
// gives back what was reserved for it. It may run on any goroutine, so it
// takes a handle of its own.
func (q *conn) Dropped(c proxy.Conn, r *proxy.Request) {
	res := reservation(r)
	if res == 0 {
		return
	}
	k := model.ConsumerByteRate // Fetch, ShareFetch
	if r.Key == int16(kmsg.Produce) {
		k = model.ProducerByteRate
	}
	q.f.engine.Client(c.Info().Principal.Name, r.ClientID).Release(k, res, q.f.now())
}

// strictFrom is the first version of each mutation API that uses strict
// mode (KIP-599): clients from those versions understand
// THROTTLING_QUOTA_EXCEEDED.
func strictFrom(key int16) int16 {
	switch key {
	case int16(kmsg.CreateTopics):
		return 6
	case int16(kmsg.DeleteTopics):
		return 5
	default: // CreatePartitions
		return 3
	}
}
