package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// DeleteRecords (key 21), v0–v2.
//
// Forwarded. Reserved topics (reserved.go): records of one of Tollgate's
// own topics are never deleted — its partitions are answered
// TOPIC_AUTHORIZATION_FAILED (low watermark -1), as Kafka answers a topic
// the principal may not delete from; the other topics are forwarded and the
// answers merged, or the request is answered by Tollgate alone when every
// topic is reserved.

func (f *reservedTopics) deleteRecords(req *kmsg.DeleteRecordsRequest) proxy.Verdict {
	return refuse(req, &req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) bool { return f.named(t.Topic) },
		func(dr *kmsg.DeleteRecordsResponse, t kmsg.DeleteRecordsRequestTopic) {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, taf, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			dr.Topics = append(dr.Topics, rt)
		})
}
