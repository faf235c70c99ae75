package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// OffsetCommit (key 8), v0–v10.
//
// Forwarded. Reserved topics (reserved.go): offsets committed for one of
// Tollgate's own topics (by name, or by id from v10) are answered
// TOPIC_AUTHORIZATION_FAILED, as Kafka answers a topic the principal may
// not read; the other topics are forwarded and the answers merged, or the
// request is answered by Tollgate alone when every topic is reserved.

func (f *reservedTopics) offsetCommit(r *proxy.Request, req *kmsg.OffsetCommitRequest) proxy.Verdict {
	by := f.by()
	return refuse(req, &req.Topics, func(t *kmsg.OffsetCommitRequestTopic) bool { return by.either(t.Topic, t.TopicID, r.Version >= 10) },
		func(or *kmsg.OffsetCommitResponse, t kmsg.OffsetCommitRequestTopic) {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, by.code(t.TopicID, r.Version >= 10)
				rt.Partitions = append(rt.Partitions, rp)
			}
			or.Topics = append(or.Topics, rt)
		})
}
