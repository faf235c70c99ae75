package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// CreateTopics (key 19), v0–v7.
//
// Forwarded. Charged by the quota filter (enforce/mutation.go) to
// controller_mutation_rate: the partitions each topic creates (its
// replica assignment, num_partitions, or the cluster's num.partitions for
// -1). From v6 (KIP-599 strict mode) topics past an exhausted quota are
// answered THROTTLING_QUOTA_EXCEEDED by Tollgate, in request order, and
// only the others are forwarded; below v6 everything is forwarded and the
// connection throttled (permissive mode). Counted by the usage ledger
// (usage.go): the partitions of each topic created, as the response says
// from v5, else as the quota filter counted them.
//
// Reserved topics (reserved.go): one of Tollgate's own topics is never
// created through the gateway — answered TOPIC_AUTHORIZATION_FAILED
// ("Authorization failed.", and its config error code too), as Kafka's
// controller answers a topic the principal may not create; the other
// topics are forwarded and the answers merged, or the request is answered
// by Tollgate alone when every topic is reserved. Differs: the quota filter
// stands before, so a reserved topic counts against controller_mutation_rate
// (in strict mode it may be answered THROTTLING_QUOTA_EXCEEDED instead).

func (f *reservedTopics) createTopics(req *kmsg.CreateTopicsRequest) proxy.Verdict {
	return refuse(req, &req.Topics, func(t *kmsg.CreateTopicsRequestTopic) bool { return f.named(t.Topic) },
		func(cr *kmsg.CreateTopicsResponse, t kmsg.CreateTopicsRequestTopic) {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ConfigErrorCode = t.Topic, taf, taf
			rt.ErrorMessage = kmsg.StringPtr("Authorization failed.")
			cr.Topics = append(cr.Topics, rt)
		})
}
