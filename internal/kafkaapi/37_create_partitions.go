package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// CreatePartitions (key 37), v0–v3.
//
// Forwarded. Charged by the quota filter (enforce/mutation.go) to
// controller_mutation_rate: the partitions each topic gains (the new count
// less the current one, read from the upstream's metadata). Strict mode
// from v3, permissive below, as in CreateTopics. Counted by the usage
// ledger (usage.go): the partitions each topic gained, from the same
// lookup.
//
// Reserved topics (reserved.go): one of Tollgate's own topics never gains
// partitions through the gateway — answered TOPIC_AUTHORIZATION_FAILED, as
// Kafka's controller answers a topic the principal may not alter; the other
// topics are forwarded and the answers merged, or the request is answered
// by Tollgate alone when every topic is reserved.

func (f *reservedTopics) createPartitions(req *kmsg.CreatePartitionsRequest) proxy.Verdict {
	return refuse(req, &req.Topics, func(t *kmsg.CreatePartitionsRequestTopic) bool { return f.named(t.Topic) },
		func(cr *kmsg.CreatePartitionsResponse, t kmsg.CreatePartitionsRequestTopic) {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, taf
			cr.Topics = append(cr.Topics, rt)
		})
}
