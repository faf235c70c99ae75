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

type visits struct{ got []seen }

func (v *visits) VisitTopic(name []byte, id [16]byte, records int) {
	n := "<id>"
	if name != nil {
		n = string(name)
	}
	v.got = append(v.got, seen{n, id, records})
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
		t.Topic = fmt.Sprintf("topic-%d", i)
		t.TopicID = [16]byte{byte(i + 1)}
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
		s := seen{name: t.Topic, records: sum}
		if v >= 13 {
			s = seen{name: "<id>", id: t.TopicID, records: sum}
		}
		want = append(want, s)
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
		var vs visits
		if !wire.ProduceTopics(body, 4, v, &vs) {
			t.Fatalf("v%d: incomplete walk", v)
		}
		if fmt.Sprint(vs.got) != fmt.Sprint(want) {
			t.Fatalf("v%d: %v, want %v", v, vs.got, want)
		}
		// Cut inside the second topic's records: the first is whole,
		// the second cut.
		cut := bytes.Index(body, bytes.Repeat([]byte{0}, 1000)) + 10
		vs = visits{}
		if wire.ProduceTopics(body[:cut], 4, v, &vs) {
			t.Fatalf("v%d: a head walked as complete", v)
		}
		if len(vs.got) != 2 || vs.got[0] != want[0] || vs.got[1].records != -1 || vs.got[1].name != want[1].name {
			t.Fatalf("v%d head: %v", v, vs.got)
		}
		for i := range body {
			wire.ProduceTopics(body[:i], 4, v, &visits{}) // never panics
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
			rt.Topic = fmt.Sprintf("t%d", i)
			rt.TopicID = [16]byte{0xaa, byte(i)}
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
			s := seen{name: rt.Topic, records: sum}
			if v >= 13 {
				s = seen{name: "<id>", id: rt.TopicID, records: sum}
			}
			want = append(want, s)
		}
		body := resp.AppendTo(nil)
		var vs visits
		if !wire.FetchResponseTopics(body, 0, v, &vs) || fmt.Sprint(vs.got) != fmt.Sprint(want) {
			t.Fatalf("v%d: %v, want %v", v, vs.got, want)
		}
		for i := 0; i < len(body); i += 97 {
			wire.FetchResponseTopics(body[:i], 0, v, &visits{})
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
		if !wire.ClampFetchTopics(body, 0, v, limits) {
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
			wire.ClampFetchTopics(bytes.Clone(body[:i]), 0, v, limits)
		}
	}
}

// The walks allocate nothing.
func TestTopicWalksNoAllocs(t *testing.T) {
	req, _ := multiTopicProduce(13)
	p := req.AppendTo(nil)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
	resp.Topics[0].Partitions = append(resp.Topics[0].Partitions, kmsg.NewFetchResponseTopicPartition())
	f := resp.AppendTo(nil)
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(12)
	fr.Topics = append(fr.Topics, kmsg.NewFetchRequestTopic())
	fr.Topics[0].Topic = "t0"
	fr.Topics[0].Partitions = append(fr.Topics[0].Partitions, kmsg.NewFetchRequestTopicPartition())
	q := fr.AppendTo(nil)
	var n nop
	c := clampTo{"t0": 100}
	if a := testing.AllocsPerRun(100, func() {
		wire.ProduceTopics(p, 0, 13, n)
		wire.ProduceTopics(p[:40], 0, 13, n)
		wire.FetchResponseTopics(f, 0, 16, n)
		wire.ClampFetchTopics(q, 0, 12, c)
	}); a != 0 {
		t.Errorf("%v allocs", a)
	}
}

type nop struct{}

func (nop) VisitTopic([]byte, [16]byte, int) {}

func FuzzTopicWalks(f *testing.F) {
	for _, v := range []int16{0, 3, 9, 13} {
		req, _ := multiTopicProduce(v)
		f.Add(req.AppendTo(nil), v)
	}
	f.Fuzz(func(t *testing.T, b []byte, v int16) {
		v &= 31
		var vs visits
		wire.ProduceTopics(b, 0, v, &vs)
		for _, s := range vs.got {
			if s.records > len(b) {
				t.Fatalf("%d record bytes in %d", s.records, len(b))
			}
		}
		wire.FetchResponseTopics(b, 0, v, &vs)
		wire.ClampFetchTopics(b, 0, v, clampTo{})
	})
}
