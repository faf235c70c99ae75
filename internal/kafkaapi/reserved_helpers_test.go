package kafkaapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
)

// Tollgate's own topics in these tests, and a tenant's.
const (
	auditTopic = "tollgate-audit"
	usageTopic = "tollgate-usage"
	ownTopic   = "orders"
)

var (
	auditID = [16]byte{0xa1, 1}
	usageID = [16]byte{0xa2, 2}
	ownID   = [16]byte{0x0d, 3}
	// names of the ids, for the answers the tests read.
	idNames = map[[16]byte]string{auditID: auditTopic, usageID: usageTopic, ownID: ownTopic, {0x0e, 4}: "payments"}
)

var (
	tafCode  = kerr.TopicAuthorizationFailed.Code
	notTried = kerr.OperationNotAttempted.Code
)

// upstreamIDs is what the upstream cluster's metadata says of the topics'
// ids; calls counts the resolutions.
type upstreamIDs struct {
	ids   map[string][16]byte
	calls atomic.Int32
}

func (u *upstreamIDs) TopicIDs(_ context.Context, names []string) (map[string][16]byte, error) {
	u.calls.Add(1)
	out := map[string][16]byte{}
	for _, n := range names {
		if id, ok := u.ids[n]; ok {
			out[n] = id
		}
	}
	return out, nil
}

// failingIDs is an upstream the gateway cannot ask.
type failingIDs struct{ calls atomic.Int32 }

func (f *failingIDs) TopicIDs(context.Context, []string) (map[string][16]byte, error) {
	f.calls.Add(1)
	return nil, errors.New("no broker answers")
}

func clusterIDs() *upstreamIDs {
	return &upstreamIDs{ids: map[string][16]byte{auditTopic: auditID, usageTopic: usageID, ownTopic: ownID}}
}

// reservedOf is the reserved-topics filter of the chain Deps would build
// with audit and usage topics.
func reservedOf(t testing.TB, ids TopicIDs) *reservedTopics {
	t.Helper()
	for _, f := range Chain(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Reserved: []string{auditTopic, usageTopic}, Topics: ids}) {
		if r, ok := f.(*reservedTopics); ok {
			return r
		}
	}
	t.Fatal("the chain has no reserved-topics filter")
	return nil
}

func at(v int16, r kmsg.Request) kmsg.Request { r.SetVersion(v); return r }

// name of a topic named by id or by name.
func nameOf(name string, id [16]byte, byID bool) string {
	if byID {
		if n, ok := idNames[id]; ok {
			return n
		}
		return fmt.Sprintf("id%x", id[:2])
	}
	return name
}

// sentTopics lists the topics (or config resources) a request names.
func sentTopics(r kmsg.Request) []string {
	var out []string
	v := r.GetVersion()
	switch r := r.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			out = append(out, nameOf(t.Topic, t.TopicID, v >= 13))
		}
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			out = append(out, nameOf(t.Topic, t.TopicID, v >= 13))
		}
	case *kmsg.ShareFetchRequest:
		for _, t := range r.Topics {
			out = append(out, nameOf("", t.TopicID, true))
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.MetadataRequest:
		for _, t := range r.Topics {
			out = append(out, nameOf(str(t.Topic), t.TopicID, t.Topic == nil))
		}
	case *kmsg.OffsetCommitRequest:
		for _, t := range r.Topics {
			out = append(out, nameOf(t.Topic, t.TopicID, v >= 10))
		}
	case *kmsg.TxnOffsetCommitRequest:
		for _, t := range r.Topics {
			out = append(out, nameOf(t.Topic, t.TopicID, v >= 6))
		}
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.DeleteTopicsRequest:
		out = append(out, r.TopicNames...)
		for _, t := range r.Topics {
			out = append(out, nameOf(str(t.Topic), t.TopicID, t.Topic == nil))
		}
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.DescribeProducersRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		for _, tx := range r.Transactions {
			out = append(out, tx.TransactionalID)
		}
	case *kmsg.DescribeConfigsRequest:
		for _, rs := range r.Resources {
			out = append(out, fmt.Sprintf("%v:%s", rs.ResourceType, rs.ResourceName))
		}
	case *kmsg.AlterConfigsRequest:
		for _, rs := range r.Resources {
			out = append(out, fmt.Sprintf("%v:%s", rs.ResourceType, rs.ResourceName))
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, rs := range r.Resources {
			out = append(out, fmt.Sprintf("%v:%s", rs.ResourceType, rs.ResourceName))
		}
	}
	sort.Strings(out)
	return out
}

// echo is an upstream that answers every topic (partition, resource) of a
// request without error: what the broker would for the tenant's own.
func echo(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	v := req.GetVersion()
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		pr := resp.(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.BaseOffset = p.Partition, 42
				rt.Partitions = append(rt.Partitions, rp)
			}
			pr.Topics = append(pr.Topics, rt)
		}
	case *kmsg.FetchRequest:
		fr := resp.(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.HighWatermark, rp.RecordBatches = p.Partition, 100, []byte("records")
				rt.Partitions = append(rt.Partitions, rp)
			}
			fr.Topics = append(fr.Topics, rt)
		}
	case *kmsg.ShareFetchRequest:
		sr := resp.(*kmsg.ShareFetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewShareFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			sr.Topics = append(sr.Topics, rt)
		}
	case *kmsg.ListOffsetsRequest:
		lr := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.Offset = p.Partition, 7
				rt.Partitions = append(rt.Partitions, rp)
			}
			lr.Topics = append(lr.Topics, rt)
		}
	case *kmsg.MetadataRequest:
		mr := resp.(*kmsg.MetadataResponse)
		mr.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "broker-0", Port: 9092}}
		names := []string{auditTopic, usageTopic, ownTopic}
		if r.Topics != nil && (v > 0 || len(r.Topics) > 0) {
			names = nil
			for _, t := range r.Topics {
				if t.Topic != nil {
					names = append(names, *t.Topic)
				} else {
					names = append(names, idNames[t.TopicID])
				}
			}
		}
		for _, n := range names {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(n)
			for id, in := range idNames {
				if in == n {
					rt.TopicID = id
				}
			}
			rt.Partitions = []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 0}}
			mr.Topics = append(mr.Topics, rt)
		}
	case *kmsg.OffsetCommitRequest:
		or := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition})
			}
			or.Topics = append(or.Topics, rt)
		}
	case *kmsg.TxnOffsetCommitRequest:
		tr := resp.(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition})
			}
			tr.Topics = append(tr.Topics, rt)
		}
	case *kmsg.CreateTopicsRequest:
		cr := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.NumPartitions = t.Topic, 3
			cr.Topics = append(cr.Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest:
		dr := resp.(*kmsg.DeleteTopicsResponse)
		for _, n := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(n)
			dr.Topics = append(dr.Topics, rt)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			dr.Topics = append(dr.Topics, rt)
		}
	case *kmsg.DeleteRecordsRequest:
		dr := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: p.Partition, LowWatermark: p.Offset})
			}
			dr.Topics = append(dr.Topics, rt)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		or := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetForLeaderEpochResponseTopicPartition{Partition: p.Partition, LeaderEpoch: 1, EndOffset: 10})
			}
			or.Topics = append(or.Topics, rt)
		}
	case *kmsg.CreatePartitionsRequest:
		cr := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			cr.Topics = append(cr.Topics, kmsg.CreatePartitionsResponseTopic{Topic: t.Topic})
		}
	case *kmsg.DescribeProducersRequest:
		dr := resp.(*kmsg.DescribeProducersResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.DescribeProducersResponseTopicPartition{Partition: p})
			}
			dr.Topics = append(dr.Topics, rt)
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		dr := resp.(*kmsg.DescribeTopicPartitionsResponse)
		names := []string{auditTopic, ownTopic, usageTopic}
		if len(r.Topics) > 0 {
			names = nil
			for _, t := range r.Topics {
				names = append(names, t.Topic)
			}
		}
		for _, n := range names {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic = kmsg.StringPtr(n)
			for id, in := range idNames {
				if in == n {
					rt.TopicID = id
				}
			}
			rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{{Partition: 0}}
			dr.Topics = append(dr.Topics, rt)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		ar := resp.(*kmsg.AddPartitionsToTxnResponse)
		for _, tx := range r.Transactions {
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tx.TransactionalID
			for _, t := range tx.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p})
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			ar.Transactions = append(ar.Transactions, rtx)
		}
	case *kmsg.DescribeConfigsRequest:
		dr := resp.(*kmsg.DescribeConfigsResponse)
		for _, rs := range r.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = rs.ResourceType, rs.ResourceName
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}
			dr.Resources = append(dr.Resources, rr)
		}
	case *kmsg.AlterConfigsRequest:
		ar := resp.(*kmsg.AlterConfigsResponse)
		for _, rs := range r.Resources {
			ar.Resources = append(ar.Resources, kmsg.AlterConfigsResponseResource{ResourceType: rs.ResourceType, ResourceName: rs.ResourceName})
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		ir := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, rs := range r.Resources {
			ir.Resources = append(ir.Resources, kmsg.IncrementalAlterConfigsResponseResource{ResourceType: rs.ResourceType, ResourceName: rs.ResourceName})
		}
	}
	return resp
}

// codes maps each topic (or resource, or transaction) of an answer to its
// error codes: one per partition, or the topic's own.
func codes(resp kmsg.Response) map[string][]int16 {
	out := map[string][]int16{}
	v := resp.GetVersion()
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			n := nameOf(t.Topic, t.TopicID, v >= 13)
			for _, p := range t.Partitions {
				out[n] = append(out[n], p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		for _, t := range r.Topics {
			n := nameOf(t.Topic, t.TopicID, v >= 13)
			for _, p := range t.Partitions {
				out[n] = append(out[n], p.ErrorCode)
			}
		}
	case *kmsg.ShareFetchResponse:
		for _, t := range r.Topics {
			n := nameOf("", t.TopicID, true)
			for _, p := range t.Partitions {
				out[n] = append(out[n], p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out[t.Topic] = append(out[t.Topic], p.ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			n := nameOf(str(t.Topic), t.TopicID, t.Topic == nil)
			out[n] = append(out[n], t.ErrorCode)
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			n := nameOf(t.Topic, t.TopicID, v >= 10)
			for _, p := range t.Partitions {
				out[n] = append(out[n], p.ErrorCode)
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			n := nameOf(t.Topic, t.TopicID, v >= 6)
			for _, p := range t.Partitions {
				out[n] = append(out[n], p.ErrorCode)
			}
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			out[t.Topic] = append(out[t.Topic], t.ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			n := nameOf(str(t.Topic), t.TopicID, t.Topic == nil)
			out[n] = append(out[n], t.ErrorCode)
		}
	case *kmsg.DeleteRecordsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out[t.Topic] = append(out[t.Topic], p.ErrorCode)
			}
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out[t.Topic] = append(out[t.Topic], p.ErrorCode)
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			out[t.Topic] = append(out[t.Topic], t.ErrorCode)
		}
	case *kmsg.DescribeProducersResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out[t.Topic] = append(out[t.Topic], p.ErrorCode)
			}
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		for _, t := range r.Topics {
			out[str(t.Topic)] = append(out[str(t.Topic)], t.ErrorCode)
		}
	case *kmsg.AddPartitionsToTxnResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out[t.Topic] = append(out[t.Topic], p.ErrorCode)
			}
		}
		for _, tx := range r.Transactions {
			for _, t := range tx.Topics {
				for _, p := range t.Partitions {
					n := tx.TransactionalID + "/" + t.Topic
					out[n] = append(out[n], p.ErrorCode)
				}
			}
		}
	case *kmsg.DescribeConfigsResponse:
		for _, rs := range r.Resources {
			n := fmt.Sprintf("%v:%s", rs.ResourceType, rs.ResourceName)
			out[n] = append(out[n], rs.ErrorCode)
		}
	case *kmsg.AlterConfigsResponse:
		for _, rs := range r.Resources {
			n := fmt.Sprintf("%v:%s", rs.ResourceType, rs.ResourceName)
			out[n] = append(out[n], rs.ErrorCode)
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, rs := range r.Resources {
			n := fmt.Sprintf("%v:%s", rs.ResourceType, rs.ResourceName)
			out[n] = append(out[n], rs.ErrorCode)
		}
	}
	return out
}

// Request builders: a topic of two partitions (0, 1) per name, or per id.

func produceReq(v int16, acks int16, topics ...string) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = v, acks, 1000
	for _, n := range topics {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = n
		if v >= 13 {
			t.Topic, t.TopicID = "", idOf(n)
		}
		for p := int32(0); p < 2; p++ {
			t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: []byte("batch-" + n)})
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func idOf(name string) [16]byte {
	for id, n := range idNames {
		if n == name {
			return id
		}
	}
	panic(name)
}

func fetchReq(v int16, topics ...string) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes = v, 1<<20
	for _, n := range topics {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = n
		if v >= 13 {
			t.Topic, t.TopicID = "", idOf(n)
		}
		for p := int32(0); p < 2; p++ {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.PartitionMaxBytes = p, 1<<20
			t.Partitions = append(t.Partitions, fp)
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// exchangeCase is one request through the filter: what the broker must
// be sent (nil: nothing) and what the client must get.
type exchangeCase struct {
	name string
	req  kmsg.Request
	sent []string           // topics the broker gets; nil: answered by Tollgate
	want map[string][]int16 // the client's answer: error codes by topic
}

func runCases(t *testing.T, f *reservedTopics, cases []exchangeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var up func(kmsg.Request) kmsg.Response
			if tc.sent != nil {
				up = echo
			}
			x := pass(t, f, connAs(aliceUser), tc.req, up)
			if x.verdict.Close != "" {
				t.Fatalf("the connection was closed (%s)", x.verdict.Close)
			}
			if tc.sent == nil && !x.answeredLocally() {
				t.Fatalf("forwarded %v, want it answered by Tollgate", sentTopics(x.sent))
			}
			if tc.sent != nil {
				if got := sentTopics(x.sent); !slices.Equal(got, tc.sent) {
					t.Errorf("the broker got %v, want %v", got, tc.sent)
				}
			}
			if got := codes(x.resp); !maps.EqualFunc(got, tc.want, slices.Equal[[]int16]) {
				t.Errorf("the client got %v, want %v", got, tc.want)
			}
		})
	}
}

// bigProduceHead is the head a session reads (16 KiB) of a Produce of
// 512 KiB a topic (two partitions of 256 KiB each): the topics after the
// first lie far past it.
func bigProduceHead(t testing.TB, v int16, topics ...string) *proxy.Request {
	t.Helper()
	req := produceReq(v, -1, topics...)
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			req.Topics[i].Partitions[j].Records = make([]byte, 256<<10)
		}
	}
	r, err := proxytest.Request(req, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Payload = r.Payload[:16<<10] // the head, as a session has it
	return r
}
