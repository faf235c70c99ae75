package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// ShareFetch (key 78), v0–v2.
//
// Forwarded. Charged by the quota filter (enforce/filter.go) as Kafka's
// share-fetch handler charges it, Fetch's pattern: the response size to
// consumer_byte_rate when it passes; held while the bucket is throttled;
// max_bytes (and min_bytes) clamped to what the quota allows now — the
// request is re-encoded only when the clamp bites. request_percentage:
// Fetch's rule (enforce/request.go). Rewritten
// (addresses.go): the node endpoints become gateway addresses.
//
// Reserved topics (reserved.go): one of Tollgate's own topics (named by id)
// has its partitions answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers
// a topic the principal may not read; the request is forwarded without it
// (with the quota filter's clamp: both edit the same decoded request) —
// even when nothing is left, as the share session lives on the broker —
// and the answers merged; an id the upstream does not name is answered
// UNKNOWN_TOPIC_ID. An answer that carries a reserved topic (the share
// session holds it) has its partitions replaced by
// TOPIC_AUTHORIZATION_FAILED.
//
// Differs from Fetch: the response is read whole, not streamed, so it is
// bounded by socket.response_max_bytes.

func (f *reservedTopics) shareFetch(_ *proxy.Request, req *kmsg.ShareFetchRequest) proxy.Verdict {
	by := f.by()
	ids := make([][16]byte, 0, len(req.Topics))
	for _, t := range req.Topics {
		ids = append(ids, t.TopicID)
	}
	by.prepare(ids)
	kept, out := split(req.Topics, func(t *kmsg.ShareFetchRequestTopic) bool { return by.id(t.TopicID) })
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	req.Topics = kept
	return forwardAlways(req, func(resp kmsg.Response) {
		sr := resp.(*kmsg.ShareFetchResponse)
		for _, t := range out {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			code := by.code(t.TopicID, true)
			for _, p := range t.Partitions {
				rp := kmsg.NewShareFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			sr.Topics = append(sr.Topics, rt)
		}
	})
}

// scrubShareFetch replaces what a ShareFetch answer carries of a reserved
// topic (from the broker's share session) by TOPIC_AUTHORIZATION_FAILED.
func (f *reservedTopics) scrubShareFetch(r *kmsg.ShareFetchResponse) {
	for i := range r.Topics {
		t := &r.Topics[i]
		if !f.refusedTopic("", t.TopicID, true) {
			continue
		}
		for j, p := range t.Partitions {
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, taf
			t.Partitions[j] = rp
		}
	}
}
