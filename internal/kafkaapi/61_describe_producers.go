package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// DescribeProducers (key 61), v0.
//
// Forwarded. Reserved topics (reserved.go): one of Tollgate's own topics
// has its partitions answered TOPIC_AUTHORIZATION_FAILED with Kafka's
// message, as Kafka answers a topic the principal may not read; the other
// topics are forwarded and the answers merged, or the request is answered
// by Tollgate alone when every topic is reserved.

func (f *reservedTopics) describeProducers(req *kmsg.DescribeProducersRequest) proxy.Verdict {
	return refuse(req, &req.Topics, func(t *kmsg.DescribeProducersRequestTopic) bool { return f.named(t.Topic) },
		func(dr *kmsg.DescribeProducersResponse, t kmsg.DescribeProducersRequestTopic) {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, taf, kmsg.StringPtr(topicAuthFailed)
				rt.Partitions = append(rt.Partitions, rp)
			}
			dr.Topics = append(dr.Topics, rt)
		})
}
