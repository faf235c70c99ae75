package wire_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

type seen struct {
	name    string
	id      [16]byte
	records int
}

func seenOf(name []byte, id [16]byte, records int) seen {
	n := "<id>"
	if name != nil {
		n = string(name)
	}
	return seen{n, id, records}
}

// wantSeen is what a walk at version v sees of a topic: its name, or from
// v13 its id.
func wantSeen(v int16, name string, id [16]byte, records int) seen {
	if v >= 13 {
		return seen{"<id>", id, records}
	}
	return seen{name: name, records: records}
}

// produceTopics walks a Produce body: each topic with its record bytes, -1
// for a topic cut; ok when the body was whole.
func produceTopics(b []byte, v int16) (got []seen, ok bool) {
	var w wire.ProduceWalk
	w.Start(b, v)
	for w.NextTopic() {
		name, id := w.Topic()
		for w.NextPartition() {
		}
		if !w.Ok() {
			return append(got, seenOf(name, id, -1)), false
		}
		got = append(got, seenOf(name, id, w.TopicRecords()))
	}
	return got, w.Done()
}

// fetchResponseTopics walks a Fetch (or ShareFetch) response body: each
// whole topic with its record bytes.
func fetchResponseTopics(b []byte, v int16, share bool) (got []seen, ok bool) {
	var w wire.FetchResponseWalk
	if share {
		w.StartShare(b, v)
	} else {
		w.Start(b, v)
	}
	for w.NextTopic() {
		name, id := w.Topic()
		for w.NextPartition() {
		}
		if w.Ok() {
			got = append(got, seenOf(name, id, w.TopicRecords()))
		}
	}
	return got, w.Done()
}

// clampTopics clamps each topic's partition_max_bytes in place to what c
// says.
func clampTopics(b []byte, v int16, c clampTo) bool {
	var w wire.FetchRequestWalk
	w.Start(b, v)
	for w.NextTopic() {
		name, id := w.Topic()
		parts := w.Parts()
		if !w.Ok() {
			return false
		}
		limit := c.FetchTopic(name, id, parts)
		for w.NextPartition() {
			w.Clamp(limit)
		}
	}
	return w.Done()
}

// multiTopicProduce is a Produce with three topics of 1, 2 and 0
// partitions carrying records of known lengths (the second with a null
// records field).
func multiTopicProduce(v int16) (*kmsg.ProduceRequest, []seen) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(v)
	txn := "txn-id"
	req.TransactionID = &txn
	req.Acks = -1
	req.TimeoutMillis = 5000
	var want []seen
	for i, parts := range [][]int{{300}, {1000, -1}, {}} {
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = fmt.Sprintf("topic-%d", i), [16]byte{byte(i + 1)}
		sum := 0
		for j, n := range parts {
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition = int32(j)
			if n >= 0 {
				p.Records = bytes.Repeat([]byte{byte(j)}, n)
				sum += n
			}
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
		want = append(want, wantSeen(v, t.Topic, t.TopicID, sum))
	}
	return req, want
}

// Every Produce version: each topic and the sum of its records lengths,
// read in place; the head of a request shows the topics it holds whole and
// the one it cuts with -1.
func TestProduceTopics(t *testing.T) {
	for v := int16(0); v <= (&kmsg.ProduceRequest{}).MaxVersion(); v++ {
		req, want := multiTopicProduce(v)
		body := req.AppendTo([]byte("head"))
		got, ok := produceTopics(body[4:], v)
		if !ok {
			t.Fatalf("v%d: incomplete walk", v)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d: %v, want %v", v, got, want)
		}
		// Cut inside the second topic's records: the first is whole,
		// the second cut.
		cut := bytes.Index(body, bytes.Repeat([]byte{0}, 1000)) + 10
		if got, ok = produceTopics(body[4:cut], v); ok {
			t.Fatalf("v%d: a head walked as complete", v)
		}
		if len(got) != 2 || got[0] != want[0] || got[1].records != -1 || got[1].name != want[1].name {
			t.Fatalf("v%d head: %v", v, got)
		}
		for i := 4; i < len(body); i++ {
			produceTopics(body[4:i], v) // never panics
		}
	}
}

// Every Fetch response version: each topic and its record bytes.
func TestFetchResponseTopics(t *testing.T) {
	for v := int16(0); v <= (&kmsg.FetchResponse{}).MaxVersion(); v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		var want []seen
		for i, parts := range [][]int{{70000, 5}, {0}, {}} {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = fmt.Sprintf("t%d", i), [16]byte{0xaa, byte(i)}
			sum := 0
			for j, n := range parts {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = int32(j)
				p.RecordBatches = bytes.Repeat([]byte{1}, n)
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID = 7
				p.AbortedTransactions = append(p.AbortedTransactions, at)
				sum += n
				rt.Partitions = append(rt.Partitions, p)
			}
			resp.Topics = append(resp.Topics, rt)
			want = append(want, wantSeen(v, rt.Topic, rt.TopicID, sum))
		}
		body := resp.AppendTo(nil)
		if got, ok := fetchResponseTopics(body, v, false); !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d: %v, want %v", v, got, want)
		}
		for i := 0; i < len(body); i += 97 {
			fetchResponseTopics(body[:i], v, false)
		}
	}
}

type clampTo map[string]int32

func (c clampTo) FetchTopic(name []byte, id [16]byte, parts int) int32 {
	if name == nil {
		name = []byte{'#', id[0]}
	}
	if v, ok := c[string(name)]; ok {
		return v / int32(parts)
	}
	return math.MaxInt32
}

// Every Fetch request version: each topic's partitions get at most what
// the clamper says, in place; other fields and topics are untouched.
func TestClampFetchTopics(t *testing.T) {
	for v := int16(0); v <= (&kmsg.FetchRequest{}).MaxVersion(); v++ {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.MaxBytes = 50 << 20
		for i, n := range []int{2, 1} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fmt.Sprintf("t%d", i)
			rt.TopicID = [16]byte{byte('0' + i)}
			for j := range n {
				p := kmsg.NewFetchRequestTopicPartition()
				p.Partition = int32(j)
				p.FetchOffset = 1234
				p.PartitionMaxBytes = 1 << 20
				rt.Partitions = append(rt.Partitions, p)
			}
			req.Topics = append(req.Topics, rt)
		}
		body := req.AppendTo(nil)
		limits := clampTo{"t0": 1000, "#0": 1000}
		if !clampTopics(body, v, limits) {
			t.Fatalf("v%d: incomplete walk", v)
		}
		got := kmsg.NewPtrFetchRequest()
		got.SetVersion(v)
		if err := got.ReadFrom(body); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if v >= 3 && got.MaxBytes != req.MaxBytes || len(got.Topics) != 2 {
			t.Fatalf("v%d: %+v", v, got)
		}
		for _, p := range got.Topics[0].Partitions {
			if p.PartitionMaxBytes != 500 || p.FetchOffset != 1234 {
				t.Errorf("v%d: t0 partition %+v, want 500 (1000 over 2)", v, p)
			}
		}
		if p := got.Topics[1].Partitions[0]; p.PartitionMaxBytes != 1<<20 {
			t.Errorf("v%d: t1 clamped to %d", v, p.PartitionMaxBytes)
		}
		for i := range body {
			clampTopics(bytes.Clone(body[:i]), v, limits)
		}
	}
}
