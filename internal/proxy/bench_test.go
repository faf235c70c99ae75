package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// miniBroker is a benchmark harness, not a test double of Kafka's
// behaviour: it answers ApiVersions and Metadata (naming itself) and answers
// every Produce with one canned response, so that the benchmark measures
// the gateway's per-frame work and allocations alone.
func miniBroker(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	host, portS, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portS)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveMini(c, host, int32(port))
		}
	}()
	return ln.Addr().String()
}

func serveMini(c net.Conn, host string, port int32) {
	defer c.Close()
	var sz [4]byte
	var out, p []byte
	produced := map[int16][]byte{} // canned Produce responses by version
	for {
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(sz[:]))
		if cap(p) < n {
			p = make([]byte, n)
		}
		p = p[:n]
		if _, err := io.ReadFull(c, p); err != nil {
			return
		}
		if h, err := wire.ParseRequestHeader(p); err == nil && h.Key == int16(kmsg.Produce) && produced[h.Version] != nil {
			out = append(out[:0], produced[h.Version]...)
			binary.BigEndian.PutUint32(out[4:], uint32(h.CorrelationID))
			if _, err := c.Write(out); err != nil {
				return
			}
			continue
		}
		h, err := wire.ParseRequestHeader(p)
		if err != nil {
			return
		}
		var resp kmsg.Response
		switch h.Key {
		case int16(kmsg.ApiVersions):
			r := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []int16{0, 3, 18} {
				r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: wire.Lookup(k).Max})
			}
			resp = r
		case int16(kmsg.Metadata):
			r := kmsg.NewPtrMetadataResponse()
			r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: port}}
			resp = r
		case int16(kmsg.Produce):
			r := kmsg.NewPtrProduceResponse()
			t := kmsg.NewProduceResponseTopic()
			t.Topic = "bench"
			t.Partitions = []kmsg.ProduceResponseTopicPartition{{Partition: 0}}
			r.Topics = append(r.Topics, t)
			resp = r
		default:
			return
		}
		resp.SetVersion(h.Version)
		if h.Key == int16(kmsg.ApiVersions) && h.Version > 4 {
			resp.SetVersion(4)
		}
		flex := h.API.Flexible(h.Version) && h.Key != int16(kmsg.ApiVersions)
		out = append(out[:0], 0, 0, 0, 0)
		out = binary.BigEndian.AppendUint32(out, uint32(h.CorrelationID))
		if flex {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if h.Key == int16(kmsg.Produce) {
			produced[h.Version] = append([]byte(nil), out...)
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// BenchmarkSessionProduce measures one small Produce request and its
// response through a gateway session (read, parse, acks, queue, forward,
// read the response, check the correlation id, walk it for node
// endpoints and throttle, write back), end to end on loopback.
func BenchmarkSessionProduce(b *testing.B) { benchSessionProduce(b) }

// benchSessionProduce is BenchmarkSessionProduce through a gateway built
// with opts (the quota policy's benchmark adds WithPolicy).
func benchSessionProduce(b *testing.B, opts ...Option) {
	up := miniBroker(b)
	g, err := New(Config{
		Listeners: []ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
		Upstream:  []string{up},
	}, append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Shutdown(context.Background()) })
	c, err := net.Dial("tcp", g.Bootstrap())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 1
	req.TimeoutMillis = 1000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "bench"
	t.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, 1024)}}
	req.Topics = append(req.Topics, t)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	frame := f.AppendRequest(nil, req, 1)
	resp := make([]byte, 64<<10)
	var sz [4]byte
	roundTrip := func() {
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:binary.BigEndian.Uint32(sz[:])]); err != nil {
			b.Fatal(err)
		}
	}
	roundTrip()
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roundTrip()
	}
}
