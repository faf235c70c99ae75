package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// Two filters may forward the same request — Request.Decode's shared
// result, which each edited — and a filter that answers locally gets the
// Merges of the filters before it, for which its answer is the upstream's.
func TestChainSharedForwardAndRespondMerges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		// Each removes one group from the shared request.
		drop := func(g string) func(*proxy.Request) proxy.Verdict {
			return func(r *proxy.Request) proxy.Verdict {
				dg, err := proxy.DecodeAs[*kmsg.DescribeGroupsRequest](r)
				if err != nil {
					t.Error(err)
					return proxy.Verdict{}
				}
				dg.Groups = slices.DeleteFunc(dg.Groups, func(x string) bool { return x == g })
				return proxy.Verdict{Forward: dg, Merge: appendGroup("answered-" + g)}
			}
		}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: drop("a")},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: drop("b")},
		)
		c := rg.dial(t)
		got := groupsOf(c.roundTrip(describeGroups("a", "b", "c")))
		if want := []string{"c", "answered-b", "answered-a"}; !slices.Equal(got, want) {
			t.Errorf("client got groups %v, want %v", got, want)
		}
		sent := rg.up.received(int16(kmsg.DescribeGroups))
		if len(sent) != 1 || !slices.Equal(sent[0].(*kmsg.DescribeGroupsRequest).Groups, []string{"c"}) {
			t.Errorf("the broker got %v, want [c]", sent)
		}
		if got := rg.closes.list(); len(got) != 0 {
			t.Errorf("closed with %v", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: func(r *proxy.Request) proxy.Verdict {
				dg, _ := proxy.DecodeAs[*kmsg.DescribeGroupsRequest](r)
				dg.Groups = dg.Groups[1:]
				return proxy.Verdict{Forward: dg, Merge: appendGroup("answered-by-A")}
			}},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: respondWith("answered-by-B")},
		)
		c := rg.dial(t)
		got := groupsOf(c.roundTrip(describeGroups("a", "b")))
		if want := []string{"answered-by-B", "answered-by-A"}; !slices.Equal(got, want) {
			t.Errorf("client got groups %v, want %v", got, want)
		}
		if n := len(rg.up.received(int16(kmsg.DescribeGroups))); n != 0 {
			t.Errorf("the broker got %d DescribeGroups", n)
		}
	})
}

// topicCheck is a filter that checks the topics of every streamed Produce
// and streamed Fetch response (Verdict.Topics) and records what it was
// shown.
type topicCheck struct {
	refuse string
	mu     sync.Mutex
	seen   []string
}

func (*topicCheck) Name() string  { return "topic-check" }
func (*topicCheck) Keys() []int16 { return []int16{int16(kmsg.Produce), int16(kmsg.Fetch)} }

func (f *topicCheck) OnRequest(_ proxy.Conn, r *proxy.Request) proxy.Verdict {
	return proxy.Verdict{Topics: f.check}
}

func (f *topicCheck) check(name []byte, id [16]byte) bool {
	s := string(name)
	if name == nil {
		s = fmt.Sprintf("id-%d", id[0])
	}
	f.mu.Lock()
	f.seen = append(f.seen, s)
	f.mu.Unlock()
	return s != f.refuse
}

// shown fails t unless the filter was shown names and the session closed
// with want (nothing: it did not close).
func (f *topicCheck) shown(t *testing.T, names []string, closes []proxy.Reason, want ...proxy.Reason) {
	t.Helper()
	if !slices.Equal(f.seen, names) {
		t.Errorf("the filter was shown %v, want %v", f.seen, names)
	}
	if !slices.Equal(closes, want) {
		t.Errorf("closed with %v, want %v", closes, want)
	}
}

// bigProduce is a Produce of three topics, two partitions each, whose
// records (20 KiB a partition) put the second and third topics far past
// the 16 KiB head the gateway reads first, and whose partitions carry a
// tag from v9, so that every field the stream must walk is there.
func bigProduce(version int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 1000
	req.TransactionID = kmsg.StringPtr("txn")
	for ti, name := range []string{"first", "second", "third"} {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = name
		t.TopicID[0] = byte(ti + 1)
		for p := int32(0); p < 2; p++ {
			pt := kmsg.NewProduceRequestTopicPartition()
			pt.Partition = p
			pt.Records = bytes.Repeat([]byte{byte('a' + ti), byte(p)}, 10<<10)
			if version >= 9 {
				pt.UnknownTags.Set(77, []byte("tag"))
			}
			t.Partitions = append(t.Partitions, pt)
		}
		if version >= 9 {
			t.UnknownTags.Set(78, []byte("topic-tag"))
		}
		req.Topics = append(req.Topics, t)
	}
	if version >= 9 {
		req.UnknownTags.Set(79, bytes.Repeat([]byte("r"), 300))
	}
	return req
}

func produceAnswer(req kmsg.Request) kmsg.Response {
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return nil
	}
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range pr.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// A streamed Produce whose topics a filter checks reaches the broker byte
// for byte when every topic passes, the filter having been shown each
// topic in order; when a topic past the head is refused the connection
// closes and the broker handles nothing (it got an incomplete frame).
func TestStreamedProduceTopicCheck(t *testing.T) {
	for _, v := range []int16{2, 8, 9, 12, 13} {
		names := []string{"first", "second", "third"}
		if v >= 13 {
			names = []string{"id-1", "id-2", "id-3"}
		}
		t.Run(fmt.Sprintf("v%d passes", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &topicCheck{}
				rg := newRig(t, produceAnswer, f)
				c := rg.dial(t)
				req := bigProduce(v)
				resp := c.roundTrip(req).(*kmsg.ProduceResponse)
				if len(resp.Topics) != 3 {
					t.Fatalf("answer has %d topics", len(resp.Topics))
				}
				got := rg.up.received(int16(kmsg.Produce))
				if len(got) != 1 {
					t.Fatalf("the broker got %d Produce requests", len(got))
				}
				want := bigProduce(v)
				if v < 3 {
					want.TransactionID = nil
				}
				if !bytes.Equal(got[0].AppendTo(nil), want.AppendTo(nil)) {
					t.Error("the broker got a different request than the client sent")
				}
				f.shown(t, names, rg.closes.list())
			})
		})
		t.Run(fmt.Sprintf("v%d third topic refused", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &topicCheck{refuse: names[2]}
				rg := newRig(t, produceAnswer, f)
				c := rg.dial(t)
				// The gateway may close before the client has written
				// the whole frame: the write may fail, and nothing is
				// answered.
				c.c.Write(c.f.AppendRequest(nil, bigProduce(v), 1))
				if n, _ := io.Copy(io.Discard, c.c); n != 0 {
					t.Errorf("the client was answered %d bytes, want the connection closed", n)
				}
				synctest.Wait()
				if n := len(rg.up.received(int16(kmsg.Produce))); n != 0 {
					t.Errorf("the broker handled %d Produce requests", n)
				}
				f.shown(t, names, rg.closes.list(), proxy.ReasonRefused)
			})
		})
	}
}

// A streamed Fetch response whose topics a filter checks reaches the
// client unchanged when every topic passes; a refused topic closes the
// session before any byte of it reaches the client (what a broker's fetch
// session sends of a topic no request names again).
func TestStreamedFetchTopicCheck(t *testing.T) {
	for _, v := range []int16{4, 12, 13, 16} {
		names := []string{"first", "second"}
		if v >= 13 {
			names = []string{"id-1", "id-2"}
		}
		fetch := func() *kmsg.FetchRequest {
			req := kmsg.NewPtrFetchRequest()
			req.Version = v
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "first"
			rt.TopicID[0] = 1
			req.Topics = append(req.Topics, rt)
			return req
		}
		t.Run(fmt.Sprintf("v%d passes", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &topicCheck{}
				rg := newRig(t, bigFetchAnswer, f)
				resp := rg.dial(t).roundTrip(fetch()).(*kmsg.FetchResponse)
				want := bigFetchAnswer(fetch()).(*kmsg.FetchResponse)
				if !bytes.Equal(resp.AppendTo(nil), want.AppendTo(nil)) {
					t.Error("the client got a different response than the broker sent")
				}
				f.shown(t, names, rg.closes.list())
			})
		})
		t.Run(fmt.Sprintf("v%d second topic refused", v), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &topicCheck{refuse: names[1]}
				rg := newRig(t, bigFetchAnswer, f)
				c := rg.dial(t)
				c.c.Write(c.f.AppendRequest(nil, fetch(), 1))
				got, _ := io.ReadAll(c.c)
				synctest.Wait()
				if bytes.Contains(got, []byte("second")) || bytes.Contains(got, bytes.Repeat([]byte{'b'}, 16)) {
					t.Errorf("the client got bytes of the refused topic (%d bytes in all)", len(got))
				}
				if !bytes.Contains(got, bytes.Repeat([]byte{'a'}, 1024)) {
					t.Errorf("the client got %d bytes, none of the first topic's records", len(got))
				}
				f.shown(t, names, rg.closes.list(), proxy.ReasonRefused)
			})
		})
	}
}
