package wire_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// streamed is a Source as a stream is one: each field is copied into a
// scratch buffer the next read overwrites.
type streamed struct {
	p       []byte
	scratch []byte
	bad     bool
}

func (s *streamed) Peek(n int) []byte {
	if s.bad {
		return nil
	}
	s.scratch = append(s.scratch[:0], s.p[:min(n, len(s.p))]...)
	return s.scratch
}

func (s *streamed) Field(n int) []byte {
	if s.bad || n < 0 || n > len(s.p) {
		s.bad = true
		return nil
	}
	s.scratch = append(s.scratch[:0], s.p[:n]...)
	s.p = s.p[n:]
	return s.scratch
}

func (s *streamed) Skip(n int) bool { return s.Field(n) != nil }

// streamedProduceTopics is produceTopics over a streamed source.
func streamedProduceTopics(b []byte, v int16) (got []seen, ok bool) {
	var w wire.ProduceWalk
	w.StartFrom(&streamed{p: b}, v)
	for w.NextTopic() {
		name, id := w.Topic()
		s := seenOf(name, id, 0) // the name is gone once the partitions are read
		for w.NextPartition() {
		}
		if s.records = w.TopicRecords(); !w.Ok() {
			s.records = -1
			return append(got, s), false
		}
		got = append(got, s)
	}
	return got, w.Done()
}

func streamedFetchResponseTopics(b []byte, v int16) (got []seen, ok bool) {
	var w wire.FetchResponseWalk
	w.StartFrom(&streamed{p: b}, v)
	for w.NextTopic() {
		name, id := w.Topic()
		s := seenOf(name, id, 0)
		for w.NextPartition() {
		}
		if s.records = w.TopicRecords(); w.Ok() {
			got = append(got, s)
		}
	}
	return got, w.Done()
}

// A streamed frame walks as a buffered one.
func TestWalksStreamed(t *testing.T) {
	for v := int16(0); v <= (&kmsg.ProduceRequest{}).MaxVersion(); v++ {
		req, _ := multiTopicProduce(v)
		body := req.AppendTo(nil)
		for i := 0; i <= len(body); i++ {
			a, aok := produceTopics(body[:i], v)
			b, bok := streamedProduceTopics(body[:i], v)
			if aok != bok || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("produce v%d, %d bytes: buffered %v %v, streamed %v %v", v, i, a, aok, b, bok)
			}
		}
	}
	for v := int16(0); v <= (&kmsg.FetchResponse{}).MaxVersion(); v++ {
		body := fetchResponseBody(v, 3)
		for i := 0; i <= len(body); i += 7 {
			a, aok := fetchResponseTopics(body[:i], v, false)
			b, bok := streamedFetchResponseTopics(body[:i], v)
			if aok != bok || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("fetch response v%d, %d bytes: buffered %v %v, streamed %v %v", v, i, a, aok, b, bok)
			}
		}
	}
}

// fetchBodies are a Fetch request and its response of version v, with
// topics topics of two partitions (1000 record bytes each in the response).
func fetchBodies(v int16, topics int) (req, resp []byte) {
	fr, fp := kmsg.NewPtrFetchRequest(), kmsg.NewPtrFetchResponse()
	fr.SetVersion(v)
	fp.SetVersion(v)
	for i := range topics {
		rt, pt := kmsg.NewFetchRequestTopic(), kmsg.NewFetchResponseTopic()
		rt.Topic, pt.Topic = fmt.Sprintf("topic-%d", i), fmt.Sprintf("topic-%d", i)
		rt.TopicID, pt.TopicID = [16]byte{byte(i + 1)}, [16]byte{byte(i + 1)}
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition(), kmsg.NewFetchRequestTopicPartition())
		p := kmsg.NewFetchResponseTopicPartition()
		p.RecordBatches = make([]byte, 1000)
		pt.Partitions = append(pt.Partitions, p, p)
		fr.Topics, fp.Topics = append(fr.Topics, rt), append(fp.Topics, pt)
	}
	return fr.AppendTo(nil), fp.AppendTo(nil)
}

func fetchResponseBody(v int16, topics int) []byte { _, b := fetchBodies(v, topics); return b }

func fetchRequestBody(v int16, topics int) []byte { b, _ := fetchBodies(v, topics); return b }

// Every ShareFetch response version: each topic and its record bytes.
func TestShareFetchResponseTopics(t *testing.T) {
	for v := int16(0); v <= (&kmsg.ShareFetchResponse{}).MaxVersion(); v++ {
		resp := kmsg.NewPtrShareFetchResponse()
		resp.SetVersion(v)
		msg := "m"
		resp.ErrorMessage = &msg
		var want []seen
		for i, n := range []int{300, 0} {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = [16]byte{byte(i + 1)}
			p := kmsg.NewShareFetchResponseTopicPartition()
			p.Records = bytes.Repeat([]byte{1}, n)
			p.AcquiredRecords = append(p.AcquiredRecords, kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord())
			rt.Partitions = append(rt.Partitions, p, p)
			resp.Topics = append(resp.Topics, rt)
			want = append(want, seen{name: "<id>", id: rt.TopicID, records: 2 * n})
		}
		resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: 1, Host: "h", Port: 9092})
		body := resp.AppendTo(nil)
		if got, ok := fetchResponseTopics(body, v, true); !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d: %v %v, want %v", v, got, ok, want)
		}
	}
}

// The walks allocate nothing.
func TestTopicWalksNoAllocs(t *testing.T) {
	req, _ := multiTopicProduce(13)
	p := req.AppendTo(nil)
	f := fetchResponseBody(16, 1)
	q := fetchRequestBody(12, 1)
	if a := testing.AllocsPerRun(100, func() {
		walkProduce(p, 13)
		walkProduce(p[:40], 13)
		walkFetchResponse(f, 16)
		walkFetchRequest(q)
	}); a != 0 {
		t.Errorf("%v allocs", a)
	}
}

// walkProduce walks the topics of a Produce body as the quota filter's
// charge does: each topic's name and record bytes.
func walkProduce(p []byte, v int16) int {
	var w wire.ProduceWalk
	w.Start(p, v)
	n := 0
	for w.NextTopic() {
		for w.NextPartition() {
		}
		n += w.TopicRecords()
	}
	return n
}

// walkFetchResponse walks a Fetch response body to its end.
func walkFetchResponse(p []byte, v int16) bool {
	var w wire.FetchResponseWalk
	w.Start(p, v)
	return w.Done()
}

func walkFetchRequest(p []byte) {
	var w wire.FetchRequestWalk
	w.Start(p, 12)
	for w.NextTopic() {
		for w.NextPartition() {
			w.Clamp(100)
		}
	}
}

func BenchmarkTopicWalks(b *testing.B) {
	req, _ := multiTopicProduce(12)
	p := req.AppendTo(nil)
	f := fetchResponseBody(12, 3)
	q := fetchRequestBody(12, 3)
	c := clampTo{"topic-1": 100}
	b.Run("ProduceRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			walkProduce(p, 12)
		}
	})
	b.Run("FetchResponse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			walkFetchResponse(f, 12)
		}
	})
	b.Run("FetchRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clampTopics(q, 12, c)
		}
	})
}
