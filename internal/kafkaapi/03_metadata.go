package kafkaapi

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// Metadata (key 3), v0–v13.
//
// Forwarded. Rewritten (addresses.go): every broker's host and port become
// the listener's advertised host and that broker's gateway port; a broker
// seen for the first time gets its port opened before the response leaves,
// and a broker the gateway cannot open a port for is left out. Node ids and
// the cluster id are never changed (ApiVersions v5 validates them).
//
// Reserved topics (reserved.go), as Kafka answers topics the principal may
// not describe: a request that names one of Tollgate's own topics (by name,
// or by id from v12) has it taken out before it is forwarded — so it is
// never auto-created (allow_auto_topic_creation) — and gets it back as
// TOPIC_AUTHORIZATION_FAILED (by name: zero id; by id: null name, the id);
// the request still goes upstream, for the brokers (v0, whose empty list
// is every topic, has the other topics taken out of the answer). A request
// for every topic gets an answer without them. The answers that pass teach
// the filter the reserved topics' ids.

func (f *reservedTopics) metadata(r *proxy.Request, req *kmsg.MetadataRequest) proxy.Verdict {
	if req.Topics == nil || (r.Version == 0 && len(req.Topics) == 0) {
		return proxy.Verdict{} // every topic: the answer is scrubbed (OnResponse)
	}
	by := f.by()
	kept, out := split(req.Topics, func(t *kmsg.MetadataRequestTopic) bool {
		return (t.Topic != nil && by.name(*t.Topic)) || by.id(t.TopicID)
	})
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	every := r.Version == 0 && len(kept) == 0 // v0's empty list: every topic
	req.Topics = kept
	return forwardAlways(req, func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		if every {
			mr.Topics = nil
		}
		for _, t := range out {
			rt := kmsg.NewMetadataResponseTopic()
			if t.Topic != nil && by.name(*t.Topic) {
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(*t.Topic), taf
			} else {
				rt.TopicID, rt.ErrorCode = t.TopicID, by.code(t.TopicID, true)
			}
			mr.Topics = append(mr.Topics, rt)
		}
	})
}

// scrubMetadata takes the reserved topics out of an answer (a request for
// every topic, or for an id the filter did not know yet), learning their
// ids; a refusal (Tollgate's own, merged before) stays.
func (f *reservedTopics) scrubMetadata(r *kmsg.MetadataResponse) {
	r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.MetadataResponseTopic) bool {
		if t.Topic == nil || !f.named(*t.Topic) {
			return false
		}
		f.learn(*t.Topic, t.TopicID)
		return t.ErrorCode != taf
	})
}
