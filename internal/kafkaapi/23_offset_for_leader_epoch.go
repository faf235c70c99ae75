package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// OffsetForLeaderEpoch (key 23), v0–v4.
//
// Forwarded. Reserved topics (reserved.go): one of Tollgate's own topics
// has its partitions answered TOPIC_AUTHORIZATION_FAILED (leader epoch and
// end offset -1), as Kafka answers a topic the principal may not describe;
// the other topics are forwarded and the answers merged, or the request is
// answered by Tollgate alone when every topic is reserved.

func (f *reservedTopics) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) proxy.Verdict {
	return refuse(req, &req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) bool { return f.named(t.Topic) },
		func(or *kmsg.OffsetForLeaderEpochResponse, t kmsg.OffsetForLeaderEpochRequestTopic) {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, taf
				rt.Partitions = append(rt.Partitions, rp)
			}
			or.Topics = append(or.Topics, rt)
		})
}
