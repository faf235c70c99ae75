package kafkaapi

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// DescribeTopicPartitions (key 75), v0.
//
// Forwarded. Reserved topics (reserved.go), as Kafka answers topics the
// principal may not describe — this API names a topic's id and partitions,
// like Metadata: a request naming one of Tollgate's own topics gets it
// answered TOPIC_AUTHORIZATION_FAILED (zero id, no partitions) and the
// other topics forwarded, the answers merged (answered by Tollgate alone
// when every named topic is reserved: an empty list would ask for every
// topic). A request for every topic gets an answer without them; a next
// cursor that would point into one points just past it. The answers that
// pass teach the filter the reserved topics' ids.

func (f *reservedTopics) describeTopicPartitions(req *kmsg.DescribeTopicPartitionsRequest) proxy.Verdict {
	if len(req.Topics) == 0 {
		return proxy.Verdict{} // every topic: the answer is scrubbed (OnResponse)
	}
	return refuse(req, &req.Topics, func(t *kmsg.DescribeTopicPartitionsRequestTopic) bool { return f.named(t.Topic) },
		func(dr *kmsg.DescribeTopicPartitionsResponse, t kmsg.DescribeTopicPartitionsRequestTopic) {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.ErrorCode, rt.Topic = taf, kmsg.StringPtr(t.Topic)
			dr.Topics = append(dr.Topics, rt)
		})
}

// scrubDescribeTopicPartitions takes the reserved topics out of an answer,
// learning their ids; a refusal (Tollgate's own, merged before) stays.
func (f *reservedTopics) scrubDescribeTopicPartitions(r *kmsg.DescribeTopicPartitionsResponse) {
	r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.DescribeTopicPartitionsResponseTopic) bool {
		if t.Topic == nil || !f.named(*t.Topic) {
			return false
		}
		f.learn(*t.Topic, t.TopicID)
		return t.ErrorCode != taf
	})
	if c := r.NextCursor; c != nil && f.named(c.Topic) {
		// The smallest name after it: the broker goes on from the next
		// topic (a cursor is compared by name when listing every topic).
		c.Topic, c.Partition = c.Topic+"\x00", 0
	}
}
