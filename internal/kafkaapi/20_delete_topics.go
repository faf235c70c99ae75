package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// DeleteTopics (key 20), v0–v6.
//
// Forwarded. Charged by the quota filter (enforce/mutation.go) to
// controller_mutation_rate: the partitions each topic had (read from the
// upstream's metadata, by name or, for a topic named by id alone, by id). Strict mode from v5, permissive below, as in
// CreateTopics. Counted by the usage ledger (usage.go): the partitions of
// each topic deleted, from the same lookup.
//
// Reserved topics (reserved.go): one of Tollgate's own topics is never
// deleted through the gateway — answered TOPIC_AUTHORIZATION_FAILED with
// Kafka's message, as Kafka's controller answers a topic the principal may
// not delete (named by id, v6: null name and the id, since the principal
// may not describe it either); the other topics are forwarded and the
// answers merged, or the request is answered by Tollgate alone when every
// topic is reserved.

func (f *reservedTopics) deleteTopics(r *proxy.Request, req *kmsg.DeleteTopicsRequest) proxy.Verdict {
	by := f.by()
	var outNames []string
	var outTopics []kmsg.DeleteTopicsRequestTopic
	left := 0
	if len(req.Topics) > 0 { // v6+
		req.Topics, outTopics = split(req.Topics, func(t *kmsg.DeleteTopicsRequestTopic) bool {
			return (t.Topic != nil && by.name(*t.Topic)) || by.id(t.TopicID)
		})
		left = len(req.Topics)
	} else {
		req.TopicNames, outNames = split(req.TopicNames, func(n *string) bool { return by.name(*n) })
		left = len(req.TopicNames)
	}
	if len(outNames)+len(outTopics) == 0 {
		return proxy.Verdict{}
	}
	return answerOrForward(req, left, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = name, id, by.code(id, true)
			if rt.ErrorCode == taf {
				rt.ErrorMessage = kmsg.StringPtr(topicAuthFailed)
			}
			dr.Topics = append(dr.Topics, rt)
		}
		for _, n := range outNames {
			add(kmsg.StringPtr(n), [16]byte{})
		}
		for _, t := range outTopics {
			if t.Topic != nil && by.name(*t.Topic) {
				add(kmsg.StringPtr(*t.Topic), [16]byte{})
			} else {
				add(nil, t.TopicID)
			}
		}
	})
}
