package wire_test

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// Benchmarks of the per-frame paths. Run with
//
//	go test -run xxx -bench . -benchmem ./internal/wire/

func benchProduceRequestFrame(recordBytes int) []byte {
	txn := "txn-bench"
	req := produceRequest(11, &txn, -1)
	req.Topics = req.Topics[:1]
	req.Topics[0].Partitions = req.Topics[0].Partitions[:1]
	req.Topics[0].Partitions[0].Records = recordBatch(recordBytes, 1)
	id := "bench-client"
	return requestFrame(req, 1, &id)
}

// fetch1MiB is a Fetch v16 response with 16 partitions of 64 KiB records.
func fetch1MiB() *kmsg.FetchResponse {
	return fetchResponse(16, 8, 64<<10, false)
}

func metadataForBench() *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	resp.ClusterID = kmsg.StringPtr("cluster-0123456789")
	for id := int32(0); id < 6; id++ {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = id, upstreamHost(id), 9092, kmsg.StringPtr(fmt.Sprintf("rack-%d", id%3))
		resp.Brokers = append(resp.Brokers, b)
	}
	for ti := 0; ti < 20; ti++ {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = kmsg.StringPtr(fmt.Sprintf("topic-%02d", ti))
		t.TopicID[0] = byte(ti)
		for pi := int32(0); pi < 6; pi++ {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.LeaderEpoch = pi, pi%6, 3
			p.Replicas = []int32{pi % 6, (pi + 1) % 6, (pi + 2) % 6}
			p.ISR = p.Replicas
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func BenchmarkParseRequestHeader(b *testing.B) {
	p := benchProduceRequestFrame(1024)[4:]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.ParseRequestHeader(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProduceAcks(b *testing.B) {
	p := benchProduceRequestFrame(1024)[4:]
	h, err := wire.ParseRequestHeader(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if acks, err := wire.ProduceAcks(p, h); err != nil || acks != -1 {
			b.Fatal(acks, err)
		}
	}
}

func benchSetThrottleInPlace(b *testing.B, resp kmsg.Response) {
	k, v := resp.Key(), resp.GetVersion()
	flex := reqFlexible(k, v)
	buf := responseFrame(resp, 1)
	defer buf.Release()
	data := unsafe.SliceData(buf.B)
	b.SetBytes(int64(len(buf.B)))
	b.ReportAllocs()
	ms := int32(0)
	for b.Loop() {
		ms++ // a new, larger value each time: the field is written
		if got, err := wire.SetThrottle(buf, k, v, flex, ms); err != nil || got != ms {
			b.Fatal(got, err)
		}
	}
	if unsafe.SliceData(buf.B) != data {
		b.Fatal("not patched in place")
	}
}

func BenchmarkSetThrottleProduce(b *testing.B) {
	resp := produceResponse(11)
	resp.Brokers = nil
	benchSetThrottleInPlace(b, resp)
}

func BenchmarkSetThrottleFetch1MiB(b *testing.B) {
	benchSetThrottleInPlace(b, fetch1MiB())
}

func BenchmarkRewriteAddressesFetchWalk(b *testing.B) {
	buf := responseFrame(fetch1MiB(), 1)
	defer buf.Release()
	orig := clone(buf.B)
	m := &testMapper{}
	b.SetBytes(int64(len(buf.B)))
	b.ReportAllocs()
	for b.Loop() {
		if err := wire.RewriteAddresses(buf, int16(kmsg.Fetch), 16, true, m); err != nil {
			b.Fatal(err)
		}
	}
	if !bytes.Equal(buf.B, orig) || len(m.calls) != 0 {
		b.Fatal("Fetch without node endpoints was rewritten")
	}
}

func BenchmarkReadFrame16KiB(b *testing.B) {
	frame := benchProduceRequestFrame(16<<10 - 200)
	r := bytes.NewReader(frame)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(frame)
		buf, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
		if err != nil {
			b.Fatal(err)
		}
		buf.Release()
	}
}

func BenchmarkRewriteMetadata(b *testing.B) { benchRewrite(b, metadataForBench()) }

func BenchmarkRewriteFetchWithEndpoints(b *testing.B) {
	benchRewrite(b, fetchResponse(16, 8, 8<<10, true))
}

// benchRewrite rewrites the addresses of a fresh copy of resp's frame
// (flexible) each round.
func benchRewrite(b *testing.B, resp kmsg.Response) {
	frame := responseFrame(resp, 1)
	orig := clone(frame.B)
	frame.Release()
	m := mapAll{}
	b.SetBytes(int64(len(orig)))
	b.ReportAllocs()
	for b.Loop() {
		buf := pooled(orig)
		if err := wire.RewriteAddresses(buf, resp.Key(), resp.GetVersion(), true, m); err != nil {
			b.Fatal(err)
		}
		buf.Release()
	}
}

// mapAll maps every broker without recording calls (the benchmarks'
// mapper must not allocate itself).
type mapAll struct{}

func (mapAll) Advertise(id int32, host string, port int32) (string, int32, bool) {
	return gatewayHost, mappedPort(id), true
}

// The hot paths must not allocate at all.
func TestHotPathsDoNotAllocate(t *testing.T) {
	req := benchProduceRequestFrame(4096)
	p := req[4:]
	h, err := wire.ParseRequestHeader(p)
	if err != nil {
		t.Fatal(err)
	}
	produce := produceResponse(12)
	produce.Brokers = nil
	produce.UnknownTags = kmsg.Tags{}
	pbuf := responseFrame(produce, 1)
	fbuf := responseFrame(fetch1MiB(), 1)
	m := mapAll{}
	ms := int32(0)
	for name, fn := range map[string]func(){
		"ParseRequestHeader": func() { _, _ = wire.ParseRequestHeader(p) },
		"ProduceAcks":        func() { _, _ = wire.ProduceAcks(p, h) },
		"SetThrottle Produce": func() {
			ms++
			_, _ = wire.SetThrottle(pbuf, 0, 12, true, ms)
		},
		"SetThrottle Fetch": func() {
			ms++
			_, _ = wire.SetThrottle(fbuf, 1, 16, true, ms)
		},
		"Throttle Produce":              func() { _, _ = wire.Throttle(pbuf, 0, 12, true) },
		"RewriteAddresses Fetch walk":   func() { _ = wire.RewriteAddresses(fbuf, 1, 16, true, m) },
		"RewriteAddresses Produce walk": func() { _ = wire.RewriteAddresses(pbuf, 0, 12, true, m) },
	} {
		if n := testing.AllocsPerRun(50, fn); n != 0 {
			t.Errorf("%s: %v allocations per run", name, n)
		}
	}
}
