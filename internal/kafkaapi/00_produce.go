package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// Produce (key 0), v0–v13.
//
// Forwarded to the partition leader's port. Requests under 64 KiB are read
// whole and written with one call; larger ones have their head parsed in
// place and the rest spliced socket to socket (proxy/reader.go). acks is
// read in place (wire.ProduceAcks): acks=0 has no response.
//
// Charged by the quota filter (enforce/filter.go) to producer_byte_rate:
// the whole request size when its response passes (at once for acks=0,
// which is throttled by muting alone); a request for a bucket already
// throttled is held until the bucket's deadline before it is forwarded.
// request_percentage (enforce/request.go): the upstream's time for it,
// less timeout_ms for acks=all (the wait for the replicas). Per-topic
// quotas (enforce/topic.go), when any is set: each topic's record bytes to
// its per-topic bucket as the request passes (read in place; a streamed
// one's as it is forwarded, proxy.Verdict.TopicBytes), held while one of
// its topics' buckets is throttled.
//
// Reserved topics (reserved.go): the topics a request names (by name, or
// by id from v13) are read in place, its records skipped, never copied; a
// request that names none of Tollgate's own topics is forwarded as above,
// zero-copy and without allocating. One that names one, as Kafka answers a
// topic the principal may not write:
//   - read whole (under 64 KiB): split — each reserved topic's partitions
//     answered TOPIC_AUTHORIZATION_FAILED by Tollgate, the other topics
//     forwarded (the request re-encoded without them) and the answers
//     merged; answered by Tollgate alone when every topic is reserved;
//   - streamed, the reserved topic within the head the gateway has read
//     (16 KiB): refused whole, nothing forwarded — every partition the head
//     shows answered TOPIC_AUTHORIZATION_FAILED, whatever its topic (a
//     partition past the head gets no answer: clients send it again);
//   - streamed, with topics past the head: forwarded while the session
//     checks each topic as it passes (proxy.Verdict.Topics), records still
//     spliced; a reserved topic leaves the broker an incomplete frame, which
//     it never handles, and closes the connection (request_refused);
//   - acks=0: the connection is closed and nothing forwarded (Kafka closes
//     the connection of an acks=0 Produce that had any partition error,
//     having written the others).
//
// Rewritten: the response's node endpoints (tag 0, v10+, sent by brokers on
// a leader change, KIP-951) become gateway addresses (addresses.go); the
// response is only walked to find them, re-encoded only when present.
// throttle_time_ms becomes max(Tollgate's, the broker's), patched in place.

func (f *reservedTopics) produce(r *proxy.Request) proxy.Verdict {
	p := r.Payload[r.BodyOffset:]
	hit, seen := f.produceWalk(p, r.Version)
	if hit && r.Version >= 13 && f.lookUpHead(p, r.Version) {
		// Ids seen for the first time (a topic just created) are
		// looked up before anything is decided.
		hit, seen = f.produceWalk(p, r.Version)
	}
	streamed := len(r.Payload) < r.Size
	switch {
	case hit && r.Acks == 0:
		return proxy.Verdict{Close: proxy.ReasonRefused}
	case hit && streamed:
		return proxy.Verdict{Respond: f.produceHeadAnswer(p, r.Version)}
	case hit:
		return f.produceSplit(r)
	case seen:
		return proxy.Verdict{}
	case streamed:
		return proxy.Verdict{Topics: f.allow}
	}
	// Read whole, but not in place: kmsg decides.
	return f.produceSplit(r)
}

// produceWalk reads the topics of the Produce body p (whole, or the head
// of a streamed request) in place: hit reports a reserved topic; seen that
// p showed every topic's name or id (the last topic's partitions need not
// be in p).
func (f *reservedTopics) produceWalk(p []byte, version int16) (hit, seen bool) {
	var w wire.ProduceWalk
	w.Start(p, version)
	for w.NextTopic() {
		if name, id := w.Topic(); f.walkedHit(version >= 13, name, id) {
			return true, false
		}
		if w.Last() {
			return false, true
		}
	}
	return false, w.Ok()
}

// lookUpHead looks up, in one lookup, the ids of p's topics not known yet
// (a walk counts them as hits until they are); false when there were none.
func (f *reservedTopics) lookUpHead(p []byte, version int16) bool {
	var ask [][16]byte
	var w wire.ProduceWalk
	w.Start(p, version)
	for w.NextTopic() {
		if _, id := w.Topic(); id != ([16]byte{}) {
			if _, known := f.idCode(id); !known {
				ask = append(ask, id)
			}
		}
		if w.Last() {
			break
		}
	}
	if len(ask) == 0 {
		return false
	}
	f.lookUp(ask)
	return true
}

// produceSplit answers a Produce read whole that names a reserved topic:
// the others are forwarded.
func (f *reservedTopics) produceSplit(r *proxy.Request) proxy.Verdict {
	req, err := proxy.DecodeAs[*kmsg.ProduceRequest](r)
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	by := f.by()
	kept, out := split(req.Topics, func(t *kmsg.ProduceRequestTopic) bool { return by.either(t.Topic, t.TopicID, r.Version >= 13) })
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	if r.Acks == 0 {
		return proxy.Verdict{Close: proxy.ReasonRefused}
	}
	req.Topics = kept
	return answerOrForward(req, len(kept), func(resp kmsg.Response) {
		pr := resp.(*kmsg.ProduceResponse)
		for _, t := range out {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			code := by.code(t.TopicID, r.Version >= 13)
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, refusedProducePartition(p.Partition, code))
			}
			pr.Topics = append(pr.Topics, rt)
		}
	})
}

// refusedProducePartition is Kafka's PartitionResponse for a partition it
// does not take: code, base offset -1.
func refusedProducePartition(partition int32, code int16) kmsg.ProduceResponseTopicPartition {
	rp := kmsg.NewProduceResponseTopicPartition()
	rp.Partition, rp.ErrorCode, rp.BaseOffset = partition, code, -1
	return rp
}

// produceHeadAnswer refuses a streamed Produce from its head p: every
// partition the head shows, TOPIC_AUTHORIZATION_FAILED (UNKNOWN_TOPIC_ID
// for an id the upstream does not name).
func (f *reservedTopics) produceHeadAnswer(p []byte, version int16) *kmsg.ProduceResponse {
	by := f.by()
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = version
	var w wire.ProduceWalk
	w.Start(p, version)
	for w.NextTopic() {
		rt := kmsg.NewProduceResponseTopic()
		name, id := w.Topic()
		rt.Topic, rt.TopicID = string(name), id
		code := by.code(id, version >= 13)
		for w.NextPartition() {
			partition, _ := w.Partition()
			rt.Partitions = append(rt.Partitions, refusedProducePartition(partition, code))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
