package proxy_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// topicBytes is a filter that counts the record bytes of every topic of a
// streamed Produce or a streamed Fetch response (Verdict.TopicBytes).
type topicBytes struct {
	mu   sync.Mutex
	seen []string
}

func (*topicBytes) Name() string  { return "topic-bytes" }
func (*topicBytes) Keys() []int16 { return []int16{int16(kmsg.Produce), int16(kmsg.Fetch)} }

func (f *topicBytes) OnRequest(_ proxy.Conn, r *proxy.Request) proxy.Verdict {
	return proxy.Verdict{TopicBytes: f.count}
}

func (f *topicBytes) count(name []byte, id [16]byte, n int) {
	s := string(name)
	if name == nil {
		s = fmt.Sprintf("id-%d", id[0])
	}
	f.mu.Lock()
	f.seen = append(f.seen, fmt.Sprintf("%s:%d", s, n))
	f.mu.Unlock()
}

func (f *topicBytes) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// A streamed Produce shows a TopicBytes filter each topic's record bytes as
// it passes, alone or beside a Verdict.Topics check, and still reaches the
// broker byte for byte.
func TestStreamedProduceTopicBytes(t *testing.T) {
	for _, v := range []int16{2, 9, 13} {
		names := []string{"first", "second", "third"}
		if v >= 13 {
			names = []string{"id-1", "id-2", "id-3"}
		}
		for _, withCheck := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d check=%v", v, withCheck), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := &topicBytes{}
					chain := []proxy.Filter{f}
					if withCheck {
						chain = append(chain, &topicCheck{})
					}
					rg := newRig(t, produceAnswer, chain...)
					c := rg.dial(t)
					if resp := c.roundTrip(bigProduce(v)).(*kmsg.ProduceResponse); len(resp.Topics) != 3 {
						t.Fatalf("answer has %d topics", len(resp.Topics))
					}
					got := rg.up.received(int16(kmsg.Produce))
					want := bigProduce(v)
					if v < 3 {
						want.TransactionID = nil
					}
					if len(got) != 1 || !bytes.Equal(got[0].AppendTo(nil), want.AppendTo(nil)) {
						t.Error("the broker got a different request than the client sent")
					}
					if got := f.list(); !slices.Equal(got, want0(names)) {
						t.Errorf("counted %v, want %v", got, want0(names))
					}
				})
			})
		}
	}
}

// want0 is what each topic of bigProduce carries: two partitions of
// 20 KiB.
func want0(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n+":40960")
	}
	return out
}

// bigFetchAnswer answers a Fetch with two topics whose record batches
// (48 KiB and 24 KiB over two partitions each, an aborted transaction on
// each partition) make the response a streamed one.
func bigFetchAnswer(req kmsg.Request) kmsg.Response {
	fr, ok := req.(*kmsg.FetchRequest)
	if !ok {
		return nil
	}
	resp := fr.ResponseKind().(*kmsg.FetchResponse)
	for ti, per := range []int{24 << 10, 12 << 10} {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = []string{"first", "second"}[ti]
		rt.TopicID[0] = byte(ti + 1)
		for p := int32(0); p < 2; p++ {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p
			rp.HighWatermark = 100
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID = 9
			rp.AbortedTransactions = append(rp.AbortedTransactions, at)
			rp.RecordBatches = bytes.Repeat([]byte{byte('a' + ti)}, per)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// A streamed Fetch response shows a TopicBytes filter each topic's record
// bytes at every version (walked from v0, which the stream otherwise
// copies whole), and reaches the client unchanged.
func TestStreamedFetchTopicBytes(t *testing.T) {
	for _, v := range []int16{0, 4, 7, 11, 12, 13, 16} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &topicBytes{}
				rg := newRig(t, bigFetchAnswer, f)
				c := rg.dial(t)
				req := kmsg.NewPtrFetchRequest()
				req.Version = v
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "first"
				req.Topics = append(req.Topics, rt)
				resp := c.roundTrip(req).(*kmsg.FetchResponse)
				want := bigFetchAnswer(req).(*kmsg.FetchResponse)
				want.SetVersion(v)
				resp.SetVersion(v)
				if !bytes.Equal(resp.AppendTo(nil), want.AppendTo(nil)) {
					t.Error("the client got a different response than the broker sent")
				}
				names := []string{"first:49152", "second:24576"}
				if v >= 13 {
					names = []string{"id-1:49152", "id-2:24576"}
				}
				if got := f.list(); !slices.Equal(got, names) {
					t.Errorf("counted %v, want %v", got, names)
				}
				if got := rg.closes.list(); len(got) != 0 {
					t.Errorf("closed with %v", got)
				}
			})
		})
	}
}

// Two filters counting the topic bytes of one request is a chain bug: the
// connection closes and nothing is forwarded.
func TestTwoTopicBytesFilters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRig(t, produceAnswer, &topicBytes{}, &topicBytes{})
		c := rg.dial(t)
		c.c.Write(c.f.AppendRequest(nil, bigProduce(9), 1))
		synctest.Wait()
		if n := len(rg.up.received(int16(kmsg.Produce))); n != 0 {
			t.Errorf("the broker got %d Produce requests", n)
		}
		if got := rg.closes.list(); !slices.Equal(got, []proxy.Reason{proxy.ReasonRefused}) {
			t.Errorf("closed with %v", got)
		}
	})
}
