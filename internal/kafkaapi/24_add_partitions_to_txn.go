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
			rt.Topic = t.Topic
			code := f.txnCode(t.Topic)
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return proxy.Verdict{Respond: resp}
	}
	kept, out := split(req.Transactions, func(tx *kmsg.AddPartitionsToTxnRequestTransaction) bool {
		return slices.ContainsFunc(tx.Topics, func(t kmsg.AddPartitionsToTxnRequestTransactionTopic) bool { return f.named(t.Topic) })
	})
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	req.Transactions = kept
	return answerOrForward(req, len(kept), func(resp kmsg.Response) {
		ar := resp.(*kmsg.AddPartitionsToTxnResponse)
		for _, tx := range out {
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tx.TransactionalID
			for _, t := range tx.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				code := f.txnCode(t.Topic)
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			ar.Transactions = append(ar.Transactions, rtx)
		}
	})
}

// txnCode is the error of a topic of a failed transaction.
func (f *reservedTopics) txnCode(topic string) int16 {
	if f.named(topic) {
		return taf
	}
	return kerr.OperationNotAttempted.Code
}
