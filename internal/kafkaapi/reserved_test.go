package kafkaapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
)

// Produce: a request naming one of Tollgate's topics is split as Kafka
// splits it (the reserved topic's partitions TOPIC_AUTHORIZATION_FAILED,
// the others forwarded); all reserved: answered by Tollgate; by id from
// v13; acks=0 closes the connection; a request naming none is forwarded
// untouched.
func TestReservedProduce(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	var cases []exchangeCase
	for _, v := range []int16{3, 8, 9, 12, 13} {
		cases = append(cases,
			exchangeCase{fmt.Sprintf("v%d split", v), produceReq(v, -1, ownTopic, auditTopic), []string{ownTopic},
				map[string][]int16{ownTopic: {0, 0}, auditTopic: {tafCode, tafCode}}},
			exchangeCase{fmt.Sprintf("v%d all reserved", v), produceReq(v, 1, usageTopic, auditTopic), nil,
				map[string][]int16{usageTopic: {tafCode, tafCode}, auditTopic: {tafCode, tafCode}}},
			exchangeCase{fmt.Sprintf("v%d none reserved", v), produceReq(v, 1, ownTopic), []string{ownTopic},
				map[string][]int16{ownTopic: {0, 0}}},
		)
	}
	runCases(t, f, cases)

	for _, v := range []int16{3, 13} {
		r, err := proxytest.Request(produceReq(v, 0, ownTopic, auditTopic), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.OnRequest(connAs(aliceUser), r); got.Close != proxy.ReasonRefused || got.Forward != nil {
			t.Errorf("v%d acks=0: verdict %+v, want the connection closed and nothing forwarded", v, got)
		}
	}
	// The answer's refused partitions are Kafka's: no offset.
	x := pass(t, f, connAs(aliceUser), produceReq(9, -1, auditTopic), nil)
	for _, p := range x.resp.(*kmsg.ProduceResponse).Topics[0].Partitions {
		if p.BaseOffset != -1 || p.LogAppendTime != -1 || p.LogStartOffset != -1 {
			t.Errorf("refused partition %+v", p)
		}
	}
}

// A streamed Produce (64 KiB or more) is never decoded: from its head the
// filter lets one that names no reserved topic through, refuses one whose
// head names one (every partition the head shows
// TOPIC_AUTHORIZATION_FAILED, nothing forwarded), and has the session check
// the topics past the head as they stream.
func TestReservedProduceStreamed(t *testing.T) {
	c := connAs(aliceUser)
	for _, v := range []int16{8, 9, 13} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			f := reservedOf(t, clusterIDs())
			one := bigProduceHead(t, v, ownTopic)
			// The first request to name a topic's id (a topic just
			// created) is forwarded once the id is looked up, not
			// refused because it was not known yet.
			if got := f.OnRequest(c, one); got.Topics != nil || got.Respond != nil || got.Close != "" || got.Forward != nil {
				t.Errorf("one tenant topic, first seen: verdict %+v, want it forwarded untouched", got)
			}
			if got := testing.AllocsPerRun(50, func() { f.OnRequest(c, one) }); got != 0 {
				t.Errorf("a streamed Produce of one tenant topic costs %v allocations", got)
			}
			if got := f.OnRequest(c, one); got.Topics != nil || got.Respond != nil || got.Close != "" || got.Forward != nil {
				t.Errorf("one tenant topic: verdict %+v, want it forwarded untouched", got)
			}

			many := bigProduceHead(t, v, ownTopic, auditTopic)
			if got := testing.AllocsPerRun(50, func() { f.OnRequest(c, many) }); got != 0 {
				t.Errorf("a streamed Produce of two topics costs %v allocations", got)
			}
			got := f.OnRequest(c, many)
			if got.Topics == nil || got.Respond != nil || got.Forward != nil || got.Merge != nil {
				t.Fatalf("topics past the head: verdict %+v, want the session to check them", got)
			}
			for _, tc := range []struct {
				name  []byte
				id    [16]byte
				allow bool
			}{
				{[]byte(ownTopic), [16]byte{}, true}, {[]byte(auditTopic), [16]byte{}, false},
				{[]byte(usageTopic), [16]byte{}, false}, {nil, ownID, true}, {nil, auditID, false}, {nil, usageID, false},
			} {
				if (tc.name == nil) != (v >= 13) {
					continue // a request names topics by id from v13 only
				}
				if a := got.Topics(tc.name, tc.id); a != tc.allow {
					t.Errorf("check(%q, %x) = %v, want %v", tc.name, tc.id[:2], a, tc.allow)
				}
			}

			first := bigProduceHead(t, v, auditTopic, ownTopic)
			got = f.OnRequest(c, first)
			resp, ok := got.Respond.(*kmsg.ProduceResponse)
			if !ok || got.Close != "" || got.Topics != nil {
				t.Fatalf("reserved topic in the head: verdict %+v, want an answer", got)
			}
			resp.Version = v
			// The head shows the first topic's first partition (the
			// second lies after 256 KiB of records).
			if got, want := codes(resp), map[string][]int16{auditTopic: {tafCode}}; !maps.EqualFunc(got, want, slices.Equal[[]int16]) {
				t.Errorf("answer %v, want %v", got, want)
			}
		})
	}
}

// Fetch: split by name (v12) and by id (v13+); the request is forwarded
// even when every topic is refused (the fetch session lives on the
// broker); one that names no reserved topic is read in place without an
// allocation.
func TestReservedFetch(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	var cases []exchangeCase
	for _, v := range []int16{4, 11, 12, 13, 16} {
		cases = append(cases,
			exchangeCase{fmt.Sprintf("v%d split", v), fetchReq(v, auditTopic, ownTopic, usageTopic), []string{ownTopic},
				map[string][]int16{ownTopic: {0, 0}, auditTopic: {tafCode, tafCode}, usageTopic: {tafCode, tafCode}}},
			exchangeCase{fmt.Sprintf("v%d all reserved", v), fetchReq(v, auditTopic), []string{},
				map[string][]int16{auditTopic: {tafCode, tafCode}}},
			exchangeCase{fmt.Sprintf("v%d none reserved", v), fetchReq(v, ownTopic), []string{ownTopic},
				map[string][]int16{ownTopic: {0, 0}}},
		)
	}
	runCases(t, f, cases)

	x := pass(t, f, connAs(aliceUser), fetchReq(12, auditTopic), echo)
	for _, tp := range x.resp.(*kmsg.FetchResponse).Topics {
		for _, p := range tp.Partitions {
			if p.HighWatermark != -1 || len(p.RecordBatches) != 0 {
				t.Errorf("refused partition %+v carries data", p)
			}
		}
	}
	c := connAs(aliceUser)
	for _, v := range []int16{12, 13} {
		r, err := proxytest.Request(fetchReq(v, ownTopic, "payments"), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := testing.AllocsPerRun(100, func() { f.OnRequest(c, r) }); got != 0 {
			t.Errorf("v%d: a Fetch of tenant topics costs %v allocations", v, got)
		}
	}
}

// Topics named by id fail closed: an id the gateway has not seen is
// looked up (once, all of a request's together) before the request goes
// on; a reserved topic's new id (the topic recreated) is refused at once;
// an id the upstream does not name, or any unseen id while the upstream
// cannot be asked, is answered UNKNOWN_TOPIC_ID and reaches no broker;
// without a resolver, ids are learnt from the metadata answers that pass.
func TestReservedIDs(t *testing.T) {
	ids := clusterIDs()
	f := reservedOf(t, ids)
	if n := ids.calls.Load(); n != 0 {
		t.Fatalf("looked up %d times before any request", n)
	}
	x := pass(t, f, connAs(aliceUser), fetchReq(13, auditTopic, ownTopic), echo)
	if got := sentTopics(x.sent); !slices.Equal(got, []string{ownTopic}) {
		t.Errorf("the broker got %v", got)
	}
	pass(t, f, connAs(aliceUser), fetchReq(13, ownTopic, auditTopic), echo)
	if n := ids.calls.Load(); n != 1 {
		t.Errorf("looked up %d times for two requests of the same ids, want once", n)
	}

	// The audit topic recreated: its new id is refused before any answer
	// could teach it.
	newAudit := [16]byte{0xa1, 9}
	ids.set(auditTopic, newAudit)
	req := fetchReq(13, ownTopic, auditTopic)
	req.Topics[1].TopicID = newAudit
	x = pass(t, f, connAs(aliceUser), req, echo)
	if got := sentTopics(x.sent); !slices.Equal(got, []string{ownTopic}) {
		t.Errorf("with the audit topic recreated the broker got %v", got)
	}
	if got := x.resp.(*kmsg.FetchResponse).Topics; len(got) != 2 || got[1].TopicID != newAudit || got[1].Partitions[0].ErrorCode != tafCode {
		t.Errorf("the recreated audit topic was answered %+v", got)
	}

	// An id the upstream does not know: UNKNOWN_TOPIC_ID, nothing sent,
	// and asked again next time (it may be a topic just created).
	req = fetchReq(13, ownTopic)
	req.Topics[0].TopicID = [16]byte{0x77}
	for i := range 2 {
		before := ids.calls.Load()
		x = pass(t, f, connAs(aliceUser), req, echo)
		if got := sentTopics(x.sent); len(got) != 0 {
			t.Errorf("an unknown id: the broker got %v", got)
		}
		if p := x.resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != unknownCode {
			t.Errorf("an unknown id was answered %v", p.ErrorCode)
		}
		if ids.calls.Load() != before+1 {
			t.Errorf("request %d: the unknown id was not looked up", i)
		}
	}

	// An upstream that cannot be asked: every unseen id is
	// UNKNOWN_TOPIC_ID (the failure logged once until a lookup
	// succeeds); what a metadata answer taught still decides.
	var logs bytes.Buffer
	down := &failingIDs{}
	f = newReservedTopics([]string{auditTopic, usageTopic}, down, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 3 {
		x = pass(t, f, connAs(aliceUser), fetchReq(13, auditTopic, ownTopic), echo)
		if got := sentTopics(x.sent); len(got) != 0 {
			t.Errorf("with no lookup possible the broker got %v", got)
		}
		if got, want := codes(x.resp), map[string][]int16{auditTopic: {unknownCode, unknownCode}, ownTopic: {unknownCode, unknownCode}}; !maps.EqualFunc(got, want, slices.Equal[[]int16]) {
			t.Errorf("with no lookup possible the client got %v, want %v", got, want)
		}
	}
	if n := down.calls.Load(); n != 3 {
		t.Errorf("asked the upstream %d times, want 3 (once a request)", n)
	}
	if n := strings.Count(logs.String(), "cannot look up the topic ids"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs.String())
	}
	pass(t, f, connAs(aliceUser), at(12, kmsg.NewPtrMetadataRequest()), echo)
	x = pass(t, f, connAs(aliceUser), fetchReq(13, auditTopic), echo)
	if got, want := codes(x.resp), map[string][]int16{auditTopic: {tafCode, tafCode}}; !maps.EqualFunc(got, want, slices.Equal[[]int16]) {
		t.Errorf("after a metadata answer the client got %v, want %v", got, want)
	}

	// No resolver: a Metadata answer listing every topic teaches the ids.
	f = reservedOf(t, nil)
	x = pass(t, f, connAs(aliceUser), fetchReq(13, auditTopic), echo)
	if got := sentTopics(x.sent); !slices.Equal(got, []string{auditTopic}) {
		t.Fatalf("with no id known the broker got %v", got)
	}
	pass(t, f, connAs(aliceUser), at(12, kmsg.NewPtrMetadataRequest()), echo)
	x = pass(t, f, connAs(aliceUser), fetchReq(13, auditTopic, usageTopic), echo)
	if got := sentTopics(x.sent); len(got) != 0 {
		t.Errorf("after a metadata answer the broker got %v", got)
	}
}

// The fetch answers are checked too: a broker's fetch or share session
// may hold a reserved topic no request names again. Buffered, its
// partitions become TOPIC_AUTHORIZATION_FAILED with no records; streamed,
// the session's check (Verdict.Topics) refuses it.
func TestReservedFetchAnswers(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	pass(t, f, connAs(aliceUser), fetchReq(13, auditTopic), echo) // the audit topic's id is known
	session := func(req kmsg.Request) kmsg.Response {
		resp := echo(req).(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.TopicID = auditID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.RecordBatches = 10, []byte("secret records")
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	x := pass(t, f, connAs(aliceUser), fetchReq(13, ownTopic), session)
	if x.verdict.Topics == nil || x.verdict.Topics(nil, auditID) || !x.verdict.Topics(nil, ownID) || x.verdict.Topics([]byte(auditTopic), [16]byte{}) {
		t.Error("the streamed answer's check does not refuse the reserved topics alone")
	}
	got := x.resp.(*kmsg.FetchResponse).Topics
	if len(got) != 2 || got[1].TopicID != auditID || got[1].Partitions[0].ErrorCode != tafCode || len(got[1].Partitions[0].RecordBatches) != 0 {
		t.Errorf("the session's audit topic reached the client as %+v", got)
	}

	share := func(req kmsg.Request) kmsg.Response {
		resp := echo(req).(*kmsg.ShareFetchResponse)
		rt := kmsg.NewShareFetchResponseTopic()
		rt.TopicID = auditID
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Records = []byte("secret records")
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	sf := kmsg.NewPtrShareFetchRequest()
	st := kmsg.NewShareFetchRequestTopic()
	st.TopicID = ownID
	sf.Topics = append(sf.Topics, st)
	x = pass(t, f, connAs(aliceUser), at(1, sf), share)
	sgot := x.resp.(*kmsg.ShareFetchResponse).Topics
	if len(sgot) != 2 || sgot[1].Partitions[0].ErrorCode != tafCode || len(sgot[1].Partitions[0].Records) != 0 {
		t.Errorf("the share session's audit topic reached the client as %+v", sgot)
	}
}

// The other APIs that name topics: each reserved topic answered
// TOPIC_AUTHORIZATION_FAILED as Kafka answers it, the rest forwarded and
// the answers merged; answered by Tollgate alone when every topic is
// reserved.
func TestReservedTopicAPIs(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	two := []int16{0, 0}
	refused := []int16{tafCode, tafCode}

	one := []int16{0}
	no := []int16{tafCode}
	deleteV5 := kmsg.NewPtrDeleteTopicsRequest() // v0–v5 name topics in TopicNames
	deleteV5.Version, deleteV5.TopicNames = 5, []string{ownTopic, auditTopic}

	runCases(t, f, []exchangeCase{
		{"ListOffsets split", topicsReq(kmsg.ListOffsets, 7, false, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"ListOffsets all reserved", topicsReq(kmsg.ListOffsets, 7, false, auditTopic), nil, map[string][]int16{auditTopic: refused}},
		{"OffsetCommit v9 split", topicsReq(kmsg.OffsetCommit, 9, false, ownTopic, usageTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, usageTopic: refused}},
		{"OffsetCommit v10 by id", topicsReq(kmsg.OffsetCommit, 10, true, ownTopic, usageTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, usageTopic: refused}},
		{"OffsetCommit all reserved", topicsReq(kmsg.OffsetCommit, 8, false, auditTopic), nil, map[string][]int16{auditTopic: refused}},
		{"TxnOffsetCommit v5 split", topicsReq(kmsg.TxnOffsetCommit, 5, false, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"TxnOffsetCommit v6 by id", topicsReq(kmsg.TxnOffsetCommit, 6, true, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"DeleteRecords split", topicsReq(kmsg.DeleteRecords, 2, false, auditTopic, ownTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"DeleteRecords all reserved", topicsReq(kmsg.DeleteRecords, 2, false, auditTopic, usageTopic), nil, map[string][]int16{auditTopic: refused, usageTopic: refused}},
		{"OffsetForLeaderEpoch split", topicsReq(kmsg.OffsetForLeaderEpoch, 4, false, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"DescribeProducers split", topicsReq(kmsg.DescribeProducers, 0, false, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"CreateTopics split", topicsReq(kmsg.CreateTopics, 7, false, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: one, auditTopic: no}},
		{"CreateTopics all reserved", topicsReq(kmsg.CreateTopics, 7, false, usageTopic), nil, map[string][]int16{usageTopic: no}},
		{"DeleteTopics v5 split", deleteV5, []string{ownTopic}, map[string][]int16{ownTopic: one, auditTopic: no}},
		{"DeleteTopics v6 by name", topicsReq(kmsg.DeleteTopics, 6, false, auditTopic, ownTopic), []string{ownTopic}, map[string][]int16{ownTopic: one, auditTopic: no}},
		{"DeleteTopics v6 by id", topicsReq(kmsg.DeleteTopics, 6, true, auditTopic), nil, map[string][]int16{auditTopic: no}},
		{"CreatePartitions split", topicsReq(kmsg.CreatePartitions, 3, false, ownTopic, usageTopic), []string{ownTopic}, map[string][]int16{ownTopic: one, usageTopic: no}},
		{"ShareFetch split", topicsReq(kmsg.ShareFetch, 1, true, auditTopic, ownTopic), []string{ownTopic}, map[string][]int16{ownTopic: two, auditTopic: refused}},
		{"ShareFetch all reserved, still forwarded", topicsReq(kmsg.ShareFetch, 1, true, auditTopic), []string{}, map[string][]int16{auditTopic: refused}},
		{"DescribeTopicPartitions split", topicsReq(kmsg.DescribeTopicPartitions, 0, false, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: one, auditTopic: no}},
		{"DescribeTopicPartitions all reserved", topicsReq(kmsg.DescribeTopicPartitions, 0, false, auditTopic), nil, map[string][]int16{auditTopic: no}},
		{"DescribeTopicPartitions every topic", topicsReq(kmsg.DescribeTopicPartitions, 0, false), []string{}, map[string][]int16{ownTopic: one}},
	})

	// The fields Kafka sets besides the code.
	x := pass(t, f, connAs(aliceUser), topicsReq(kmsg.CreateTopics, 7, false, auditTopic), nil)
	if ct := x.resp.(*kmsg.CreateTopicsResponse).Topics[0]; str(ct.ErrorMessage) != "Authorization failed." || ct.ConfigErrorCode != tafCode || ct.NumPartitions != -1 {
		t.Errorf("CreateTopics answer %+v", ct)
	}
	x = pass(t, f, connAs(aliceUser), topicsReq(kmsg.DeleteTopics, 6, true, auditTopic), nil)
	if dt := x.resp.(*kmsg.DeleteTopicsResponse).Topics[0]; dt.Topic != nil || dt.TopicID != auditID {
		t.Errorf("DeleteTopics by id: answer %+v, want a null name and the id", dt)
	}
	x = pass(t, f, connAs(aliceUser), topicsReq(kmsg.DeleteRecords, 2, false, auditTopic), nil)
	if p := x.resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.LowWatermark != -1 {
		t.Errorf("DeleteRecords answer %+v", p)
	}
	x = pass(t, f, connAs(aliceUser), topicsReq(kmsg.ListOffsets, 7, false, auditTopic), nil)
	if p := x.resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.Offset != -1 || p.Timestamp != -1 {
		t.Errorf("ListOffsets answer %+v", p)
	}
	x = pass(t, f, connAs(aliceUser), topicsReq(kmsg.DescribeTopicPartitions, 0, false, auditTopic), nil)
	if dt := x.resp.(*kmsg.DescribeTopicPartitionsResponse).Topics[0]; dt.TopicID != ([16]byte{}) || len(dt.Partitions) != 0 {
		t.Errorf("DescribeTopicPartitions answer %+v: the id or partitions are given away", dt)
	}
}

// DescribeTopicPartitions listing every topic: the reserved ones are left
// out, and a next cursor into one points past it.
func TestReservedDescribeTopicPartitionsCursor(t *testing.T) {
	f := reservedOf(t, nil)
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	for _, n := range []string{auditTopic, ownTopic} {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(n), idOf(n)
		resp.Topics = append(resp.Topics, rt)
	}
	resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: usageTopic, Partition: 3}
	got := respond(t, f, connAs(aliceUser), kmsg.NewPtrDescribeTopicPartitionsRequest(), resp).(*kmsg.DescribeTopicPartitionsResponse)
	if len(got.Topics) != 1 || str(got.Topics[0].Topic) != ownTopic {
		t.Errorf("topics %v", codes(got))
	}
	if c := got.NextCursor; c == nil || c.Topic <= usageTopic || c.Partition != 0 || len(c.Topic) != len(usageTopic)+1 {
		t.Errorf("next cursor %+v, want the first name after %s", c, usageTopic)
	}
	if _, ok := f.ids.Load().lookup(auditID); !ok {
		t.Error("the answer did not teach the audit topic's id")
	}
}

// Metadata: a named reserved topic is taken out of the request (never
// auto-created) and answered TOPIC_AUTHORIZATION_FAILED (zero id by name,
// null name by id); a request for every topic gets an answer without
// them; v0's empty list is every topic.
func TestReservedMetadata(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	named := func(v int16, auto bool, topics ...string) kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.AllowAutoTopicCreation, r.Topics = auto, []kmsg.MetadataRequestTopic{}
		return withTopics(r, v, false, topics...)
	}
	byID := func(topics ...string) kmsg.Request { return topicsReq(kmsg.Metadata, 12, true, topics...) }
	runCases(t, f, []exchangeCase{
		{"v12 named split", named(12, true, ownTopic, auditTopic), []string{ownTopic}, map[string][]int16{ownTopic: {0}, auditTopic: {tafCode}}},
		{"v4 named, only reserved: forwarded for the brokers", named(4, true, auditTopic, usageTopic), []string{},
			map[string][]int16{auditTopic: {tafCode}, usageTopic: {tafCode}}},
		{"v0 named, only reserved", named(0, false, auditTopic), []string{}, map[string][]int16{auditTopic: {tafCode}}},
		{"v12 by id", byID(usageTopic, ownTopic), []string{ownTopic}, map[string][]int16{ownTopic: {0}, usageTopic: {tafCode}}},
		{"v12 every topic", at(12, kmsg.NewPtrMetadataRequest()), []string{}, map[string][]int16{ownTopic: {0}}},
		{"v0 every topic", named(0, false), []string{}, map[string][]int16{ownTopic: {0}}},
	})
	x := pass(t, f, connAs(aliceUser), named(12, true, auditTopic), echo)
	mt := x.resp.(*kmsg.MetadataResponse)
	if len(mt.Brokers) == 0 {
		t.Error("the answer has no brokers")
	}
	if tp := mt.Topics[0]; tp.TopicID != ([16]byte{}) || len(tp.Partitions) != 0 {
		t.Errorf("refused by name: %+v gives the id or partitions away", tp)
	}
	x = pass(t, f, connAs(aliceUser), byID(auditTopic), echo)
	if tp := x.resp.(*kmsg.MetadataResponse).Topics[0]; tp.Topic != nil || tp.TopicID != auditID {
		t.Errorf("refused by id: %+v, want a null name and the id", tp)
	}
	if x.sent.(*kmsg.MetadataRequest).Topics == nil {
		t.Error("a request naming only a reserved topic became a request for every topic")
	}
}

// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: a TOPIC
// resource naming a reserved topic is refused, BROKER resources and other
// topics go on as before.
func TestReservedConfigs(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	topic, broker := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	key := func(rt kmsg.ConfigResourceType, n string) string { return fmt.Sprintf("%v:%s", rt, n) }
	all := []configResource{{topic, auditTopic}, {topic, ownTopic}, {broker, "0"}, {broker, auditTopic}}
	sent := []string{key(broker, "0"), key(broker, auditTopic), key(topic, ownTopic)}
	sort.Strings(sent)
	want := map[string][]int16{key(topic, auditTopic): {tafCode}, key(topic, ownTopic): {0}, key(broker, "0"): {0}, key(broker, auditTopic): {0}}
	var cases []exchangeCase
	for _, api := range []struct {
		key kmsg.Key
		v   int16
	}{{kmsg.DescribeConfigs, 4}, {kmsg.AlterConfigs, 2}, {kmsg.IncrementalAlterConfigs, 1}} {
		name := kmsg.NameForKey(int16(api.key))
		cases = append(cases,
			exchangeCase{name + " split", resourcesReq(api.key, api.v, all...), sent, want},
			exchangeCase{name + " only reserved", resourcesReq(api.key, api.v, all[0]), nil, map[string][]int16{key(topic, auditTopic): {tafCode}}},
		)
	}
	runCases(t, f, cases)
	x := pass(t, f, connAs(aliceUser), resourcesReq(kmsg.DescribeConfigs, 4, all[0]), nil)
	if rr := x.resp.(*kmsg.DescribeConfigsResponse).Resources[0]; len(rr.Configs) != 0 || str(rr.ErrorMessage) != topicAuthFailed {
		t.Errorf("refused resource %+v", rr)
	}
}

// AddPartitionsToTxn: a transaction adding a reserved topic's partition
// fails whole (the others OPERATION_NOT_ATTEMPTED); v4+ batches have only
// the failing transactions answered by Tollgate.
func TestReservedAddPartitionsToTxn(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	v3 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v3.Version, v3.TransactionalID = 3, "tx"
	v3.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: ownTopic, Partitions: []int32{0, 1}}, {Topic: auditTopic, Partitions: []int32{0}}}
	clean := kmsg.NewPtrAddPartitionsToTxnRequest()
	clean.Version, clean.TransactionalID = 3, "tx"
	clean.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: ownTopic, Partitions: []int32{0}}}
	v4 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v4.Version = 4
	v4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{
		{TransactionalID: "good", Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: ownTopic, Partitions: []int32{0}}}},
		{TransactionalID: "bad", Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: ownTopic, Partitions: []int32{0}}, {Topic: usageTopic, Partitions: []int32{1}}}},
	}
	runCases(t, f, []exchangeCase{
		{"v3 fails whole", v3, nil, map[string][]int16{ownTopic: {notTried, notTried}, auditTopic: {tafCode}}},
		{"v4 per transaction", v4, []string{"good"}, map[string][]int16{"good/" + ownTopic: {0}, "bad/" + ownTopic: {notTried}, "bad/" + usageTopic: {tafCode}}},
	})
	r, _ := proxytest.Request(clean, 1)
	if v := f.OnRequest(connAs(aliceUser), r); v.Respond != nil || v.Forward != nil || v.Close != "" {
		t.Errorf("a transaction without reserved topics: verdict %+v", v)
	}
}

// A body kmsg cannot read closes the connection, as the control-plane
// filters do; nothing is forwarded.
func TestReservedMalformed(t *testing.T) {
	f := reservedOf(t, clusterIDs())
	for _, req := range []kmsg.Request{fetchReq(12, ownTopic), topicsReq(kmsg.ListOffsets, 7, false, ownTopic), produceReq(9, 1, ownTopic, auditTopic)} {
		r, err := proxytest.Request(req, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Cut inside the topics: the array says more than there is.
		r.Payload = r.Payload[:r.BodyOffset+30]
		r.Size = len(r.Payload)
		if v := f.OnRequest(connAs(aliceUser), r); v.Close != proxy.ReasonBadFrame {
			t.Errorf("%s truncated: verdict %+v, want the connection closed", kmsg.NameForKey(req.Key()), v)
		}
	}
}
