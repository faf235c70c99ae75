package enforce

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota/model"
)

func onTopic(t string) model.Entity { return model.TopicEntity(model.Entity{}, model.Exact(t)) }

// produceTopics is a Produce v9 (or v13: topics by id) carrying n record
// bytes for each topic named.
func produceTopics(t *testing.T, version int16, acks int16, per map[string]int, ids map[string][16]byte) *proxy.Request {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 1000
	for _, name := range []string{"limited", "free", "other"} {
		n, ok := per[name]
		if !ok {
			continue
		}
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic, tp.TopicID = name, ids[name]
		tp.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, n)}}
		req.Topics = append(req.Topics, tp)
	}
	return request(t, req, "app")
}

// A Produce spanning two topics is charged per topic: the limited topic's
// record bytes into its per-topic bucket, the other topic nothing per
// topic; the response carries the larger of the client quota's throttle
// and the per-topic one; a request for the throttled topic then waits for
// its deadline, one for the other topic does not.
func TestProducePerTopic(t *testing.T) {
	// limited: 100 B/s, a burst of 1 000 B. The client quota is far away.
	f, clk := newFilter(t, quotaSet{onTopic("limited"), model.ProducerByteRate, 100},
		defaultClient(model.ProducerByteRate, 1e9))
	c, q := newConn(f, anonymous)
	r := produceTopics(t, 9, 1, map[string]int{"limited": 1500, "free": 50_000}, nil)
	v := onRequest(q, c, r)
	if v.Hold != 0 || v.TopicBytes != nil {
		t.Fatalf("verdict %+v: want forwarded, charged at once (read whole)", v)
	}
	if got := throttle(q, c, r, 10); got != ms(5000) {
		t.Errorf("response throttle %v, want 5s: 500 record bytes of limited over at 100 B/s", got)
	}
	clk.advance(time.Second)
	if v := onRequest(q, c, produceTopics(t, 9, 1, map[string]int{"free": 10}, nil)); v.Hold != 0 {
		t.Errorf("a request without the limited topic held %v", v.Hold)
	}
	if v := onRequest(q, c, produceTopics(t, 9, 1, map[string]int{"free": 10, "limited": 10}, nil)); v.Hold != ms(4000) {
		t.Errorf("a request carrying the limited topic held %v, want the rest of its throttle, 4s", v.Hold)
	}
	var topicBuckets int
	for _, u := range f.Engine().Usage(clk.now) {
		if u.Topic != "" {
			topicBuckets++
			if u.Topic != "limited" {
				t.Errorf("a per-topic bucket for %q", u.Topic)
			}
		}
	}
	if topicBuckets != 1 {
		t.Errorf("%d per-topic buckets, want 1", topicBuckets)
	}
}

// acks=0: the per-topic throttle mutes the connection (Verdict.Throttle).
func TestProducePerTopicAcksZero(t *testing.T) {
	f, _ := newFilter(t, quotaSet{onTopic("limited"), model.ProducerByteRate, 100})
	c, q := newConn(f, anonymous)
	v := onRequest(q, c, produceTopics(t, 9, 0, map[string]int{"limited": 1200}, nil))
	if v.Throttle != ms(2000) {
		t.Errorf("acks=0: throttle %v, want 2s", v.Throttle)
	}
}

// A streamed Produce (Payload is its head) is held for the topics of its
// head and charged as it passes (Verdict.TopicBytes).
func TestProducePerTopicStreamed(t *testing.T) {
	f, clk := newFilter(t, quotaSet{onTopic("limited"), model.ProducerByteRate, 100})
	c, q := newConn(f, anonymous)
	r := produceTopics(t, 9, 1, map[string]int{"free": 30_000, "limited": 40_000}, nil)
	r.Payload = r.Payload[:16<<10] // the head: "limited" is past it
	v := onRequest(q, c, r)
	if v.TopicBytes == nil || v.Hold != 0 {
		t.Fatalf("verdict %+v, want TopicBytes", v)
	}
	v.TopicBytes([]byte("free"), [16]byte{}, 30_000)
	v.TopicBytes([]byte("limited"), [16]byte{}, 1500)
	if got := throttle(q, c, r, 10); got != ms(5000) {
		t.Errorf("response throttle %v, want 5s", got)
	}
	clk.advance(time.Second)
	r = produceTopics(t, 9, 1, map[string]int{"limited": 40_000}, nil)
	r.Payload = r.Payload[:16<<10]
	if v := onRequest(q, c, r); v.Hold != ms(4000) {
		t.Errorf("next streamed request with the topic in its head held %v, want 4s", v.Hold)
	}
}

// fetchRequest is a Fetch v12 (or v13) for the topics named, 2 partitions
// each, 1 MiB per partition, max_bytes 50 MiB.
func fetchRequest(t *testing.T, version int16, ids map[string][16]byte, topics ...string) *proxy.Request {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.MaxWaitMillis, req.MinBytes = version, 50<<20, 500, 1
	for _, name := range topics {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = name, ids[name]
		for p := range int32(2) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return request(t, req, "app")
}

func fetchAnswer(version int16, ids map[string][16]byte, per map[string]int) kmsg.Response {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	for _, name := range []string{"limited", "free"} {
		n, ok := per[name]
		if !ok {
			continue
		}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = name, ids[name]
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = make([]byte, n)
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func partitionMaxBytes(t *testing.T, r *proxy.Request) map[string][]int32 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = r.Version
	if err := req.ReadFrom(r.Payload[r.BodyOffset:]); err != nil {
		t.Fatal(err)
	}
	out := map[string][]int32{}
	for _, rt := range req.Topics {
		name := rt.Topic
		if r.Version >= 13 {
			name = string(rt.TopicID[:1])
		}
		for _, p := range rt.Partitions {
			out[name] = append(out[name], p.PartitionMaxBytes)
		}
	}
	return out
}

// A Fetch is clamped per topic (the limited topic's partitions to what its
// bucket holds, split over them), charged per topic when its response
// passes (read whole: in OnResponse), held for the throttled topic only.
func TestFetchPerTopic(t *testing.T) {
	f, clk := newFilter(t, quotaSet{onTopic("limited"), model.ConsumerByteRate, 100})
	c, q := newConn(f, anonymous)
	r := fetchRequest(t, 12, nil, "limited", "free")
	v := onRequest(q, c, r)
	if v.Hold != 0 || v.TopicBytes == nil {
		t.Fatalf("verdict %+v", v)
	}
	if got := partitionMaxBytes(t, r); got["limited"][0] != 500 || got["limited"][1] != 500 || got["free"][0] != 1<<20 {
		t.Errorf("partition_max_bytes %v, want limited's 1 000 B burst over its 2 partitions, free's untouched", got)
	}
	answer := proxytest.Response(r, fetchAnswer(12, nil, map[string]int{"limited": 1500, "free": 30_000}))
	if err := q.(proxy.ResponseHook).OnResponse(c, answer); err != nil {
		t.Fatal(err)
	}
	if got := throttle(q, c, r, len(answer.Buf.B)-4); got != ms(5000) {
		t.Errorf("response throttle %v, want 5s", got)
	}
	clk.advance(time.Second)
	if v := onRequest(q, c, fetchRequest(t, 12, nil, "free")); v.Hold != 0 {
		t.Errorf("a fetch of the other topic held %v", v.Hold)
	}
	r = fetchRequest(t, 12, nil, "limited")
	if v := onRequest(q, c, r); v.Hold != ms(4000) {
		t.Errorf("a fetch of the limited topic held %v, want 4s", v.Hold)
	}
	// Once held, it is clamped to the room then: 1 byte (the bucket is
	// at zero at the deadline; the broker still returns a first batch).
	if got := partitionMaxBytes(t, r)["limited"]; got[0] != 1 {
		t.Errorf("clamped to %v after the hold, want 1", got)
	}
}

// A streamed Fetch response is charged per topic as it passes; its
// throttle_time_ms is already written, so the debt throttles the next
// Fetch response of the connection and holds the next fetch of the topic.
func TestFetchPerTopicStreamed(t *testing.T) {
	f, clk := newFilter(t, quotaSet{onTopic("limited"), model.ConsumerByteRate, 100})
	c, q := newConn(f, anonymous)
	r := fetchRequest(t, 12, nil, "limited")
	v := onRequest(q, c, r)
	if got := throttle(q, c, r, 80_000); got != 0 {
		t.Fatalf("head throttle %v", got)
	}
	v.TopicBytes([]byte("limited"), [16]byte{}, 1500)
	clk.advance(time.Second)
	r = fetchRequest(t, 12, nil, "limited", "free")
	if v := onRequest(q, c, r); v.Hold != ms(4000) {
		t.Errorf("next fetch held %v, want 4s", v.Hold)
	}
	clk.advance(4 * time.Second)
	r2 := fetchRequest(t, 12, nil, "free")
	onRequest(q, c, r2)
	if got := throttle(q, c, r2, 10); got != 0 {
		t.Errorf("after the deadline, throttle %v", got)
	}
}

type names struct {
	calls atomic.Int32
	m     map[[16]byte]string
}

func (n *names) TopicNames(context.Context) (map[[16]byte]string, error) {
	n.calls.Add(1)
	return n.m, nil
}

// Topics named by id (v13) are charged by name: ids are learnt from the
// Metadata answers that pass, and else resolved through the gateway, at
// most once a second whatever ids clients send.
func TestPerTopicByID(t *testing.T) {
	ids := map[string][16]byte{"limited": {'L'}, "free": {'F'}}
	f, clk := newFilter(t, quotaSet{onTopic("limited"), model.ProducerByteRate, 100}, quotaSet{onTopic("limited"), model.ConsumerByteRate, 100})
	n := &names{m: map[[16]byte]string{{'L'}: "limited", {'F'}: "free"}}
	c, q := newConn(f, anonymous)

	// Learnt from a Metadata answer.
	mr := kmsg.NewPtrMetadataRequest()
	mr.Version = 12
	mreq := request(t, mr, "app")
	md := kmsg.NewPtrMetadataResponse()
	md.Version = 12
	for name, id := range ids {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr(name), id
		md.Topics = append(md.Topics, mt)
	}
	if err := q.(proxy.ResponseHook).OnResponse(c, proxytest.Response(mreq, md)); err != nil {
		t.Fatal(err)
	}
	r := produceTopics(t, 13, 1, map[string]int{"limited": 1500, "free": 100}, ids)
	onRequest(q, c, r)
	if got := throttle(q, c, r, 10); got != ms(5000) {
		t.Errorf("v13 produce: throttle %v, want 5s", got)
	}
	fr := fetchRequest(t, 13, ids, "limited")
	clk.advance(5 * time.Second)
	onRequest(q, c, fr)
	if got := partitionMaxBytes(t, fr)["L"]; got[0] != 500 {
		t.Errorf("v13 fetch clamp %v, want 500", got)
	}

	// Not learnt: resolved in the background (in a bubble, so that the
	// test waits for it deterministically), at most once a second.
	synctest.Test(t, func(t *testing.T) {
		f2, clk2 := newFilterWith(t, Config{Names: n}, quotaSet{onTopic("limited"), model.ProducerByteRate, 100})
		c2, q2 := newConn(f2, anonymous)
		for range 50 {
			onRequest(q2, c2, produceTopics(t, 13, 1, map[string]int{"other": 10}, map[string][16]byte{"other": {'?'}}))
			synctest.Wait()
		}
		if got := n.calls.Load(); got != 1 || f2.ids.m.Load() == nil {
			t.Errorf("%d resolutions for 50 requests within a second, want 1", got)
		}
		clk2.advance(time.Second)
		r := produceTopics(t, 13, 1, map[string]int{"limited": 1500}, ids)
		onRequest(q2, c2, r)
		if got := throttle(q2, c2, r, 10); got != ms(5000) {
			t.Errorf("after the resolution: throttle %v, want 5s", got)
		}
	})
}

// Without any per-topic quota nothing is read per topic: the verdict is
// the client quota's alone and the request is not touched.
func TestNoPerTopicQuotaTouchesNothing(t *testing.T) {
	f, _ := newFilter(t, quotaSet{model.UserEntity(model.Exact("x")), model.ProducerByteRate, 100})
	c, q := newConn(f, anonymous)
	r := fetchRequest(t, 12, nil, "limited")
	before := bytes.Clone(r.Payload)
	if v := onRequest(q, c, r); v.TopicBytes != nil || !bytes.Equal(r.Payload, before) {
		t.Errorf("verdict %+v, payload changed %v", v, !bytes.Equal(r.Payload, before))
	}
	if v := onRequest(q, c, produceTopics(t, 9, 1, map[string]int{"limited": 10}, nil)); v.TopicBytes != nil {
		t.Errorf("produce verdict %+v", v)
	}
}
