package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// TxnOffsetCommit (key 28), v0–v6.
//
// Forwarded. Reserved topics (reserved.go): offsets committed in a
// transaction for one of Tollgate's own topics (by name, or by id from v6)
// are answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers a topic the
// principal may not read; the other topics are forwarded and the answers
// merged, or the request is answered by Tollgate alone when every topic is
// reserved.

func (f *reservedTopics) txnOffsetCommit(r *proxy.Request, req *kmsg.TxnOffsetCommitRequest) proxy.Verdict {
	by := f.by()
	return refuse(req, &req.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) bool { return by.either(t.Topic, t.TopicID, r.Version >= 6) },
		func(tr *kmsg.TxnOffsetCommitResponse, t kmsg.TxnOffsetCommitRequestTopic) {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, by.code(t.TopicID, r.Version >= 6)
				rt.Partitions = append(rt.Partitions, rp)
			}
			tr.Topics = append(tr.Topics, rt)
		})
}
