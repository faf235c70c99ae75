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
	return refuse(req, &req.Topics, func(t *kmsg.ListOffsetsRequestTopic) bool { return f.named(t.Topic) },
		func(lr *kmsg.ListOffsetsResponse, t kmsg.ListOffsetsRequestTopic) {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, taf
				rt.Partitions = append(rt.Partitions, rp)
			}
			lr.Topics = append(lr.Topics, rt)
		})
}
