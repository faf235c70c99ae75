package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// Fetch (key 1), v0–v18.
//
// Forwarded to the partition leader's port. Responses of 64 KiB or more
// are streamed (proxy/stream.go): the small fields are staged and checked,
// record blocks spliced socket to socket, throttle_time_ms patched before
// anything is written.
//
// Charged by the quota filter (enforce/filter.go) to consumer_byte_rate:
// the response size when it passes. Before forwarding, max_bytes is
// clamped to what the quota allows now (Kafka's Q·(N−1)·W, less fetches in
// flight), in place (wire.ClampFetch). request_percentage
// (enforce/request.go): the upstream's time for it, less max_wait_ms when
// min_bytes > 0 (the long poll). Per-topic quotas (enforce/topic.go), when
// any is set: each limited topic's partition_max_bytes clamped in place to
// its bucket's room, and each topic's record bytes charged when the
// response passes (read in place, or as a streamed one passes).
//
// Reserved topics (reserved.go): the topics (names to v12, ids from v13)
// are read in place; a request that names none of Tollgate's own topics
// (and only ids the gateway knows) is forwarded untouched, without
// allocating. One that names one is split as Kafka answers a topic the
// principal may not read: each reserved topic's partitions answered
// TOPIC_AUTHORIZATION_FAILED (high watermark -1; an id the upstream does
// not name, UNKNOWN_TOPIC_ID), the request forwarded without them — even when nothing is left, as the fetch
// session lives on the broker — with the quota filter's clamp, and the
// answers merged. Differs: a merged answer is a buffered one; a streamed
// answer (64 KiB or more) carries no entry for the refused partitions (and
// no data of them either), and the client asks for them again. The
// answer is checked for reserved topics as well (a broker's fetch session
// holds partitions no later request names): buffered, their partitions
// are replaced by TOPIC_AUTHORIZATION_FAILED; streamed, the session
// closes (ReasonRefused) before any byte of such a topic is written.
//
// Rewritten: node endpoints (the top-level tag, v12+, KIP-951) become
// gateway addresses — by addresses.go for a buffered response, and to the
// same length by the stream for a streamed one (a rewrite that would be
// longer drops them and pads with an unknown tag: the client then falls
// back to a metadata refresh).
//
// Differs from a broker: a throttled Fetch still delivers its data (Kafka
// answers it empty); its debt throttles the next request instead.

func (f *reservedTopics) fetch(r *proxy.Request) proxy.Verdict {
	byID := r.Version >= 13
	if hit, ok := f.fetchWalk(r.Payload[r.BodyOffset:], r.Version); ok && !hit {
		return proxy.Verdict{Topics: f.inAnswer}
	}
	// A reserved topic, an id not known yet, or a body not read in place:
	// kmsg decides.
	req, err := proxy.DecodeAs[*kmsg.FetchRequest](r)
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	by := f.by()
	if byID {
		ids := make([][16]byte, 0, len(req.Topics))
		for _, t := range req.Topics {
			ids = append(ids, t.TopicID)
		}
		by.prepare(ids)
	}
	kept, out := split(req.Topics, func(t *kmsg.FetchRequestTopic) bool { return by.either(t.Topic, t.TopicID, byID) })
	if len(out) == 0 {
		return proxy.Verdict{Topics: f.inAnswer}
	}
	req.Topics = kept
	v := forwardAlways(req, func(resp kmsg.Response) {
		fr := resp.(*kmsg.FetchResponse)
		for _, t := range out {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			code := by.code(t.TopicID, byID)
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, refusedFetchPartition(p.Partition, code))
			}
			fr.Topics = append(fr.Topics, rt)
		}
	})
	v.Topics = f.inAnswer
	return v
}

// refusedFetchPartition is Kafka's answer to a partition it does not
// serve the client: code, no records, high watermark -1.
func refusedFetchPartition(partition int32, code int16) kmsg.FetchResponseTopicPartition {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition, rp.ErrorCode, rp.HighWatermark = partition, code, -1
	return rp
}

// scrubFetch replaces what a Fetch answer carries of a reserved topic
// (from the broker's fetch session) by TOPIC_AUTHORIZATION_FAILED.
func (f *reservedTopics) scrubFetch(r *kmsg.FetchResponse, byID bool) {
	for i := range r.Topics {
		t := &r.Topics[i]
		if !f.refusedTopic(t.Topic, t.TopicID, byID) {
			continue
		}
		for j, p := range t.Partitions {
			t.Partitions[j] = refusedFetchPartition(p.Partition, taf)
		}
	}
}

// fetchWalk reads the topics of the Fetch body p in place: hit reports a
// topic the decoded request must decide; ok that the topic array was read
// to its end.
func (f *reservedTopics) fetchWalk(p []byte, version int16) (hit, ok bool) {
	var w wire.FetchRequestWalk
	w.Start(p, version)
	for w.NextTopic() {
		if name, id := w.Topic(); f.walkedHit(version >= 13, name, id) {
			return true, true
		}
	}
	return false, w.Ok()
}
