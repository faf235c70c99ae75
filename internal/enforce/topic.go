package enforce

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/wire"
)

// Per-topic quotas (docs/quotas.md): a Produce or a Fetch is charged, for
// each topic it carries, that topic's record bytes (the sum of its
// partitions' record batches) into the client's per-topic bucket of the
// topic, beside the client quota's charge of the whole request or
// response; the throttle is the largest of all. Nothing of this runs
// unless some per-topic quota exists for the key (quota.Engine.TopicQuotas,
// one atomic load), and then the topics are read where they lie (wire's
// walks), never decoded.
//
//   - Produce: held until the deadline of every throttled per-topic bucket
//     it carries, then charged when it passes (a topic's bytes are known
//     before they are forwarded, and charging them at once needs no
//     in-flight estimate); a streamed Produce's topics are charged as the
//     frame is forwarded (proxy.Verdict.TopicBytes). The response carries
//     the per-topic throttle, counted from when it was decided.
//   - Fetch: held likewise; each limited topic's partition_max_bytes is
//     lowered in place to what its bucket has room for (split over its
//     partitions in the request); charged when the response passes (read
//     in place in OnResponse, or as a streamed response passes, whose
//     throttle_time_ms was written before its topics: its per-topic debt
//     throttles the connection's next Fetch and holds the next request for
//     the topic).
//
// Topics named by id (Fetch v13+, Produce v13) are looked up by name in
// ids: learnt from every Metadata answer that passes, and resolved through
// the gateway (TopicNames) in the background when a request names one not
// known yet (that request's per-topic charge of the topic is skipped).

// TopicNames lists every topic's id and name on the upstream cluster (the
// gateway: proxy.Gateway.TopicNames).
type TopicNames interface {
	TopicNames(ctx context.Context) (map[[16]byte]string, error)
}

// topicIDs maps topic ids to names for per-topic quotas.
type topicIDs struct {
	m    atomic.Pointer[map[[16]byte][]byte]
	busy atomic.Bool
	// nextMs is when the next resolution may start: an id nobody knows
	// (a client may send any) asks the upstream at most once a second.
	nextMs atomic.Int64
	warned atomic.Bool
}

// maxTopicIDs bounds the map: a cluster with more topics keeps the ones
// learnt last (and resolves the others again as they are named).
const maxTopicIDs = 1 << 17

const (
	topicIDsRetry   = time.Second
	topicIDsTimeout = 5 * time.Second
)

// name returns the name of topic id, nil when it is not known yet (then a
// resolution starts in the background).
func (t *topicIDs) name(id [16]byte, now time.Time, src TopicNames, log *slog.Logger) []byte {
	if m := t.m.Load(); m != nil {
		if n, ok := (*m)[id]; ok {
			return n
		}
	}
	if src != nil && now.UnixMilli() >= t.nextMs.Load() && t.busy.CompareAndSwap(false, true) {
		t.nextMs.Store(now.Add(topicIDsRetry).UnixMilli())
		go func() {
			defer t.busy.Store(false)
			t.resolve(src, log)
		}()
	}
	return nil
}

func (t *topicIDs) resolve(src TopicNames, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), topicIDsTimeout)
	defer cancel()
	all, err := src.TopicNames(ctx)
	if err != nil {
		if t.warned.CompareAndSwap(false, true) {
			log.Warn("cannot list the upstream's topic ids; per-topic quotas skip topics a request names by an id not seen yet", "err", err)
		}
		return
	}
	t.warned.Store(false)
	m := make(map[[16]byte][]byte, min(len(all), maxTopicIDs))
	for id, name := range all {
		if len(m) == maxTopicIDs {
			break
		}
		m[id] = []byte(name)
	}
	t.m.Store(&m)
}

// learn adds (id, name) pairs an upstream answer carried; the map is
// copied only when something is new.
func (t *topicIDs) learn(pairs func(yield func(id [16]byte, name string) bool)) {
	old := t.m.Load()
	var next map[[16]byte][]byte
	for id, name := range pairs {
		if id == ([16]byte{}) {
			continue
		}
		if old != nil {
			if n, ok := (*old)[id]; ok && string(n) == name {
				continue
			}
		}
		if next == nil {
			size := 16
			if old != nil {
				size += len(*old)
			}
			if size > maxTopicIDs {
				next = make(map[[16]byte][]byte)
			} else {
				next = make(map[[16]byte][]byte, size)
				if old != nil {
					for k, v := range *old {
						next[k] = v
					}
				}
			}
		}
		if len(next) < maxTopicIDs {
			next[id] = []byte(name)
		}
	}
	if next != nil {
		// A concurrent learn or resolution may be lost: its ids come
		// back with the next answer or resolution.
		t.m.Store(&next)
	}
}

// topicWalk is one walk over a request's or a response's topics: it holds,
// clamps or charges each topic's per-topic bucket. One per connection side,
// reused (its fields are set before each walk), so a walk allocates
// nothing.
type topicWalk struct {
	q    *conn
	cl   *quota.Client
	key  model.Key
	now  time.Time
	mode walkMode
	// out is the walk's result: the largest hold or throttle.
	out time.Duration
}

type walkMode uint8

const (
	walkHold   walkMode = iota // out: the largest HoldTopic
	walkCharge                 // charge each topic's bytes; out: the largest throttle
	walkClamp                  // FetchTopic: each topic's partition_max_bytes
)

// topic resolves a walk's topic to its name (nil: unknown id).
func (w *topicWalk) topic(name []byte, id [16]byte) []byte {
	if name != nil {
		return name
	}
	f := w.q.f
	return f.ids.name(id, w.now, f.names, f.log)
}

// visit holds or charges one topic with its record bytes (-1: a topic
// whose records lie past the bytes walked, the head of a streamed Produce).
func (w *topicWalk) visit(name []byte, id [16]byte, records int) {
	n := w.topic(name, id)
	if n == nil {
		return
	}
	switch {
	case w.mode == walkHold:
		w.out = max(w.out, w.cl.HoldTopic(w.key, n, w.now))
	case records >= 0:
		w.out = max(w.out, w.cl.RecordTopic(w.key, n, records, w.now))
		if u := w.q.f.topicUsage; u != nil {
			user, cid := w.cl.Names()
			u(user, cid, n, w.key == model.ProducerByteRate, records, w.now)
		}
	}
}

// fetchTopic holds one topic of a Fetch request, or returns the
// partition_max_bytes of its parts partitions (math.MaxInt32: as asked).
func (w *topicWalk) fetchTopic(name []byte, id [16]byte, parts int) int32 {
	n := w.topic(name, id)
	if n == nil {
		return 1<<31 - 1
	}
	if w.mode == walkHold {
		w.out = max(w.out, w.cl.HoldTopic(w.key, n, w.now))
		return 1<<31 - 1
	}
	return w.cl.TopicFetchMax(n, parts, w.now)
}

// produce walks a Produce request read whole, or the head of a streamed
// one (its last topic cut shown with records -1).
func (w *topicWalk) produce(r *proxy.Request) {
	var pw wire.ProduceWalk
	pw.Start(r.Payload[r.BodyOffset:], r.Version)
	for pw.NextTopic() {
		name, id := pw.Topic()
		for pw.NextPartition() {
		}
		if !pw.Ok() {
			w.visit(name, id, -1)
			return
		}
		w.visit(name, id, pw.TopicRecords())
	}
}

// fetch walks a Fetch request, each topic's partition_max_bytes lowered in
// place to what fetchTopic says.
func (w *topicWalk) fetch(r *proxy.Request) {
	var fw wire.FetchRequestWalk
	fw.Start(r.Payload[r.BodyOffset:], r.Version)
	for fw.NextTopic() {
		name, id := fw.Topic()
		parts := fw.Parts()
		if !fw.Ok() {
			return
		}
		limit := w.fetchTopic(name, id, parts)
		for fw.NextPartition() {
			fw.Clamp(limit)
		}
	}
}

// fetchResponse charges the whole topics of a Fetch or ShareFetch answer's
// body p.
func (w *topicWalk) fetchResponse(p []byte, version int16, share bool) {
	var fw wire.FetchResponseWalk
	if share {
		fw.StartShare(p, version)
	} else {
		fw.Start(p, version)
	}
	for fw.NextTopic() {
		name, id := fw.Topic()
		for fw.NextPartition() {
		}
		if !fw.Ok() {
			return
		}
		w.visit(name, id, fw.TopicRecords())
	}
}

func (w *topicWalk) start(cl *quota.Client, key model.Key, now time.Time, mode walkMode) *topicWalk {
	w.cl, w.key, w.now, w.mode, w.out = cl, key, now, mode, 0
	return w
}

// produceTopics holds a Produce for its throttled per-topic buckets (given
// the client quota's hold) and charges its topics: at once when it was read
// whole, as it is forwarded when it is streamed (the returned TopicBytes).
// It returns the request's hold and the per-topic throttle decided now.
func (q *conn) produceTopics(cl *quota.Client, r *proxy.Request, now time.Time, hold time.Duration) (time.Duration, time.Duration, func([]byte, [16]byte, int)) {
	if !q.f.engine.TopicQuotas(model.ProducerByteRate) {
		return hold, 0, nil
	}
	w := q.reqWalk.start(cl, model.ProducerByteRate, now, walkHold)
	w.produce(r)
	hold = max(hold, w.out)
	if len(r.Payload) < r.Size {
		// Streamed: the topics are charged as they pass.
		q.reqCl = cl
		return hold, 0, q.streamProduceFn
	}
	at := now.Add(hold)
	w.start(cl, model.ProducerByteRate, at, walkCharge).produce(r)
	q.noteProduce(at, w.out)
	return hold, w.out, nil
}

// streamProduce charges one topic of a streamed Produce as it is forwarded
// (proxy.Verdict.TopicBytes; the session's reader).
func (q *conn) streamProduce(name []byte, id [16]byte, n int) {
	now := q.f.now()
	w := q.reqWalk.start(q.reqCl, model.ProducerByteRate, now, walkCharge)
	w.visit(name, id, n)
	q.noteProduce(now, w.out)
}

// noteProduce keeps the per-topic throttle t decided at at until the
// Produce's response carries it.
func (q *conn) noteProduce(at time.Time, t time.Duration) {
	if t <= 0 {
		return
	}
	until := at.Add(t).UnixMilli()
	for {
		cur := q.produceUntil.Load()
		if until <= cur || q.produceUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// fetchTopics holds a Fetch for its throttled per-topic buckets (given the
// client quota's hold) and lowers each limited topic's partition_max_bytes,
// in place, to what its bucket has room for once the hold is over. It
// returns the request's hold, and the TopicBytes that charges a streamed
// response.
func (q *conn) fetchTopics(cl *quota.Client, r *proxy.Request, now time.Time, hold time.Duration) (time.Duration, func([]byte, [16]byte, int)) {
	if !q.f.engine.TopicQuotas(model.ConsumerByteRate) {
		return hold, nil
	}
	w := q.reqWalk.start(cl, model.ConsumerByteRate, now, walkHold)
	w.fetch(r)
	hold = max(hold, w.out)
	w.start(cl, model.ConsumerByteRate, now.Add(hold), walkClamp).fetch(r)
	return hold, q.streamFetchFn
}

// fetchResponseTopics charges the topics of a Fetch response read whole
// (OnResponse; the responder) and keeps the throttle for Throttle.
func (q *conn) fetchResponseTopics(c proxy.Conn, r *proxy.Response) {
	q.responseTopics(c, r, false)
}

// shareFetchResponseTopics charges the topics of a ShareFetch answer
// (OnResponse; the responder): each topic its partitions' record bytes, as
// a Fetch's, read in place. A ShareFetch answer is always read whole (it
// names brokers, rewritten by the gateway); one that is not well formed is
// not charged.
func (q *conn) shareFetchResponseTopics(c proxy.Conn, r *proxy.Response) {
	q.responseTopics(c, r, true)
}

func (q *conn) responseTopics(c proxy.Conn, r *proxy.Response, share bool) {
	if !q.f.engine.TopicQuotas(model.ConsumerByteRate) {
		return
	}
	p := r.Buf.B[4:]
	off, err := wire.ResponseBodyOffset(p, r.Req.Key, r.Req.Flexible)
	if err != nil {
		return
	}
	if share {
		var whole wire.FetchResponseWalk
		if whole.StartShare(p[off:], r.Req.Version); !whole.Done() {
			return
		}
	}
	cl := q.resp.client(q.f.engine, c, r.Req.ClientID)
	w := q.respWalk.start(cl, model.ConsumerByteRate, q.f.now(), walkCharge)
	w.fetchResponse(p[off:], r.Req.Version, share)
	q.respTopic = max(q.respTopic, w.out)
}

// shareFetchTopics holds a ShareFetch (KIP-932; topics named by id) for
// its throttled per-topic buckets, given the client quota's hold. Its
// answer is charged per topic by shareFetchResponseTopics.
func (q *conn) shareFetchTopics(cl *quota.Client, req *kmsg.ShareFetchRequest, now time.Time, hold time.Duration) time.Duration {
	if !q.f.engine.TopicQuotas(model.ConsumerByteRate) {
		return hold
	}
	w := q.reqWalk.start(cl, model.ConsumerByteRate, now, walkHold)
	for i := range req.Topics {
		w.visit(nil, req.Topics[i].TopicID, -1)
	}
	return max(hold, w.out)
}

// streamFetch charges one topic of a streamed Fetch response as it passes
// (proxy.Verdict.TopicBytes; the responder). Its throttle_time_ms is
// written already: the debt throttles the connection's next Fetch.
func (q *conn) streamFetch(name []byte, id [16]byte, n int) {
	now := q.f.now()
	w := q.respWalk.start(q.respCl, model.ConsumerByteRate, now, walkCharge)
	if w.cl == nil {
		return
	}
	w.visit(name, id, n)
	if w.out > 0 {
		q.fetchUntil = max(q.fetchUntil, now.Add(w.out).UnixMilli())
	}
}

// topicThrottle is the per-topic part of a response's throttle at now
// (Throttle; the responder): a Produce's per-topic throttle, or a Fetch's
// (read whole: its own topics'; and what a streamed one before it left).
func (q *conn) topicThrottle(key int16, now time.Time) time.Duration {
	nowMs := now.UnixMilli()
	switch key {
	case int16(kmsg.Produce):
		if until := q.produceUntil.Load(); until > nowMs {
			return time.Duration(until-nowMs) * time.Millisecond
		}
	case int16(kmsg.Fetch), int16(kmsg.ShareFetch):
		t := q.respTopic
		q.respTopic = 0
		if q.fetchUntil > nowMs {
			t = max(t, time.Duration(q.fetchUntil-nowMs)*time.Millisecond)
		}
		return t
	}
	return 0
}

// learnTopicIDs learns the topic ids of a Metadata answer (OnResponse),
// when some per-topic quota exists.
func (q *conn) learnTopicIDs(r *proxy.Response) {
	if !q.f.engine.TopicQuotas(model.ProducerByteRate) && !q.f.engine.TopicQuotas(model.ConsumerByteRate) {
		return
	}
	resp, ok := r.Decode()
	if !ok {
		return
	}
	md, ok := resp.(*kmsg.MetadataResponse)
	if !ok {
		return
	}
	q.f.ids.learn(func(yield func([16]byte, string) bool) {
		for _, t := range md.Topics {
			if t.ErrorCode == 0 && t.Topic != nil && !yield(t.TopicID, *t.Topic) {
				return
			}
		}
	})
}
