package kafkaapi

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// AddPartitionsToTxn (key 24), v0–v5.
//
// Forwarded. Reserved topics (reserved.go): a transaction that would add a
// partition of one of Tollgate's own topics fails whole, as Kafka fails it
// when any partition is not authorized: the reserved topics' partitions
// TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED, nothing
// added. v0–v3 carry one transaction, answered by Tollgate; v4+ (a batch of
// transactions, sent by brokers) have the failing transactions answered by
// Tollgate and the others forwarded, the answers merged.

func (f *reservedTopics) addPartitionsToTxn(req *kmsg.AddPartitionsToTxnRequest) proxy.Verdict {
	if req.Version < 4 {
		if !slices.ContainsFunc(req.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) bool { return f.named(t.Topic) }) {
			return proxy.Verdict{}
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic, rt.Partitions = t.Topic, txnPartitions[kmsg.AddPartitionsToTxnResponseTopicPartition](f, t.Topic, t.Partitions)
			resp.Topics = append(resp.Topics, rt)
		}
		return proxy.Verdict{Respond: resp}
	}
	return refuse(req, &req.Transactions, func(tx *kmsg.AddPartitionsToTxnRequestTransaction) bool {
		return slices.ContainsFunc(tx.Topics, func(t kmsg.AddPartitionsToTxnRequestTransactionTopic) bool { return f.named(t.Topic) })
	}, func(ar *kmsg.AddPartitionsToTxnResponse, tx kmsg.AddPartitionsToTxnRequestTransaction) {
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic, rt.Partitions = t.Topic, txnPartitions[kmsg.AddPartitionsToTxnResponseTransactionTopicPartition](f, t.Topic, t.Partitions)
			rtx.Topics = append(rtx.Topics, rt)
		}
		ar.Transactions = append(ar.Transactions, rtx)
	})
}

// txnPartition is the answer to a partition of AddPartitionsToTxn: v0–v3's
// or v4+'s, two kmsg structs of the same fields.
type txnPartition interface {
	kmsg.AddPartitionsToTxnResponseTopicPartition | kmsg.AddPartitionsToTxnResponseTransactionTopicPartition
}

// txnPartitions answers the partitions of a topic of a failed
// transaction, each with the topic's txnCode.
func txnPartitions[P txnPartition](f *reservedTopics, topic string, partitions []int32) []P {
	code := f.txnCode(topic)
	var ps []P
	for _, p := range partitions {
		ps = append(ps, P{Partition: p, ErrorCode: code})
	}
	return ps
}

// txnCode is the error of a topic of a failed transaction.
func (f *reservedTopics) txnCode(topic string) int16 {
	if f.named(topic) {
		return taf
	}
	return kerr.OperationNotAttempted.Code
}
