package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// ListOffsets (key 2), v0–v11.
//
// Forwarded. Reserved topics (reserved.go): a topic Tollgate keeps its own
// state in has its partitions answered TOPIC_AUTHORIZATION_FAILED
// (timestamp and offset -1), as Kafka answers a topic the principal may not
// describe; the other topics are forwarded and the answers merged — or the
// request is answered by Tollgate alone when every topic is reserved.

func (f *reservedTopics) listOffsets(req *kmsg.ListOffsetsRequest) proxy.Verdict {
	kept, out := split(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) bool { return f.named(t.Topic) })
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	req.Topics = kept
	return answerOrForward(req, len(kept), func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range out {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, taf
				rt.Partitions = append(rt.Partitions, rp)
			}
			lr.Topics = append(lr.Topics, rt)
		}
	})
}
