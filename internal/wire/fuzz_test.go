package wire_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// Fuzz targets. Seeds are frames and bodies built with kmsg; the fuzzer
// mutates them. Run one with
//
//	go test -run xxx -fuzz FuzzSetThrottle -fuzztime 20s ./internal/wire/

func FuzzReadFrame(f *testing.F) {
	txn := "txn"
	id := "fuzz"
	var stream []byte
	for _, req := range []kmsg.Request{
		produceRequest(0, nil, 1),
		produceRequest(3, &txn, 0),
		produceRequest(9, nil, -1),
		produceRequest(13, &txn, 0),
		kmsg.NewPtrMetadataRequest(),
		kmsg.NewPtrApiVersionsRequest(),
		kmsg.NewPtrControlledShutdownRequest(),
	} {
		frame := requestFrame(req, 1, &id)
		f.Add(frame, int32(len(frame)))
		stream = append(stream, frame...)
	}
	for _, v := range []int16{0, 3, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		f.Add(requestFrame(req, 2, nil), int32(wire.DefaultMaxFrame))
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(9)
	f.Add(requestFrame(av, 3, &id), int32(1000))
	f.Add(stream, int32(wire.DefaultMaxFrame))
	f.Add([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, int32(wire.DefaultMaxFrame))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, int32(100))
	f.Add([]byte{0, 0, 0, 10, 0, 0}, int32(100))

	f.Fuzz(func(t *testing.T, data []byte, max int32) {
		if max < 0 || max > 1<<20 {
			max = 1 << 20 // keep allocations small
		}
		r := bytes.NewReader(data)
		for i := 0; i < 64; i++ {
			b, err := wire.ReadFrame(r, max)
			if err != nil {
				if b != nil {
					t.Fatal("buffer returned with an error")
				}
				return
			}
			size := binary.BigEndian.Uint32(b.B)
			if int(size) != len(b.B)-4 || size > uint32(max) {
				t.Fatalf("frame of %d bytes with size %d (max %d)", len(b.B), size, max)
			}
			p := b.B[4:]
			h, err := wire.ParseRequestHeader(p)
			if err == nil {
				if h.BodyOffset < 8 || h.BodyOffset > len(p) || !h.API.Known {
					t.Fatalf("header %+v for a %d-byte payload", h, len(p))
				}
				if h.Key == int16(kmsg.Produce) {
					if _, err := wire.ProduceAcks(p, h); err == nil && h.Version < 3 && h.BodyOffset+2 > len(p) {
						t.Fatal("acks read past the payload")
					}
				}
			}
			b.Release()
		}
	})
}

// rewriteKeys are the keys whose responses RewriteAddresses changes.
var rewriteKeys = []int16{
	int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.Metadata), int16(kmsg.ShareFetch),
}

// addresses returns every broker host a decoded response names (in its
// Brokers, or ShareFetch's NodeEndpoints: kmsg's structs of the same
// fields).
func addresses(resp kmsg.Response) []string {
	var hosts []string
	r := reflect.ValueOf(resp).Elem()
	brokers := r.FieldByName("Brokers")
	if !brokers.IsValid() {
		brokers = r.FieldByName("NodeEndpoints")
	}
	for i := range brokers.Len() {
		hosts = append(hosts, brokers.Index(i).FieldByName("Host").String())
	}
	return hosts
}

// responseBody is the body of resp's frame (after the response header).
func responseBody(resp kmsg.Response) []byte {
	return resp.AppendTo(nil)
}

// frameOf builds a response frame from a correlation id and raw body
// bytes, with the header tag byte of a flexible response.
func frameOf(key, version int16, flexible bool, body []byte) []byte {
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint32(frame, 0x600d)
	if flexible && key != int16(kmsg.ApiVersions) {
		frame = append(frame, 0)
	}
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

func FuzzRewriteAddresses(f *testing.F) {
	for i, k := range rewriteKeys {
		max := kmsg.ResponseForKey(k).MaxVersion()
		for v := int16(0); v <= max; v++ {
			r := kmsg.ResponseForKey(k)
			fill(r, int(v)+i)
			r.SetVersion(v)
			f.Add(uint8(i), v, responseBody(r))
		}
	}
	for _, v := range []int16{9, 10, 13} {
		f.Add(uint8(0), v, responseBody(produceResponse(v)))
	}
	for _, v := range []int16{12, 16, 18} {
		f.Add(uint8(1), v, responseBody(fetchResponse(v, 2, 20, true)))
		f.Add(uint8(1), v, responseBody(fetchResponse(v, 2, 20, false)))
	}

	f.Fuzz(func(t *testing.T, ki uint8, version int16, body []byte) {
		key := rewriteKeys[int(ki)%len(rewriteKeys)]
		if max := kmsg.ResponseForKey(key).MaxVersion(); version < 0 || version > max {
			version = int16(uint16(version) % uint16(max+1))
		}
		flex := reqFlexible(key, version)
		frame := frameOf(key, version, flex, body)
		buf := pooled(frame)
		defer buf.Release()
		if err := wire.RewriteAddresses(buf, key, version, flex, &testMapper{}); err != nil {
			if !bytes.Equal(buf.B, frame) {
				t.Fatalf("failed rewrite changed the frame: %v", err)
			}
			return
		}
		resp, err := tryDecodeResponse(buf.B, key, version)
		if err != nil {
			if !bytes.Equal(buf.B, frame) {
				t.Fatalf("rewritten frame does not decode: %v", err)
			}
			// Passed on as it is (Produce/Fetch without node endpoints,
			// which are only walked): the client will fail to decode it
			// exactly as it would without the gateway.
			return
		}
		for _, h := range addresses(resp) {
			if h != gatewayHost {
				t.Fatalf("%s v%d: host %q left in the response", kmsg.NameForKey(key), version, h)
			}
		}
	})
}

func FuzzSetThrottle(f *testing.F) {
	for _, k := range []int16{0, 1, 2, 3, 10, 18, 23, 32, 38, 39, 41, 47, 60, 78} {
		max := kmsg.ResponseForKey(k).MaxVersion()
		for v := int16(0); v <= max; v++ {
			r := kmsg.ResponseForKey(k)
			fill(r, int(k+v))
			r.SetVersion(v)
			f.Add(k, v, responseBody(r), int32(500))
		}
	}
	for _, v := range []int16{1, 5, 8, 9, 13} {
		f.Add(int16(kmsg.Produce), v, responseBody(produceResponse(v)), int32(1000))
	}
	for _, v := range []int16{0, 2, 3, 5} {
		f.Add(int16(kmsg.ApiVersions), v, responseBody(upstreamApiVersions(v)), int32(1))
	}
	f.Add(int16(38), int16(3), responseBody(createDelegationTokenResponse(3)), int32(9))
	f.Add(int16(41), int16(2), responseBody(describeDelegationTokenResponse(2)), int32(9))

	f.Fuzz(func(t *testing.T, key, version int16, body []byte, ms int32) {
		key = int16(uint16(key) % (kmsg.MaxKey + 3)) // a couple of unknown keys too
		r := kmsg.ResponseForKey(key)
		flex := false
		if r != nil {
			if version < 0 || version > r.MaxVersion() {
				version = int16(uint16(version) % uint16(r.MaxVersion()+1))
			}
			flex = reqFlexible(key, version)
		}
		frame := frameOf(key, version, flex, body)
		buf := pooled(frame)
		defer buf.Release()

		// What a client decodes from the original, if anything.
		orig, derr := tryDecodeResponse(frame, key, version)
		got, err := wire.SetThrottle(buf, key, version, flex, ms)
		if err != nil {
			if !bytes.Equal(buf.B, frame) {
				t.Fatalf("failed SetThrottle changed the frame: %v", err)
			}
			return
		}
		if !wire.HasThrottle(key, version) {
			if got != 0 || !bytes.Equal(buf.B, frame) {
				t.Fatalf("no throttle field, yet SetThrottle = %d", got)
			}
			return
		}
		if th, err := wire.Throttle(buf, key, version, flex); err != nil || th != got {
			t.Fatalf("SetThrottle = %d, Throttle = %d, %v", got, th, err)
		}
		if derr != nil || key == int16(kmsg.ApiVersions) && len(body) >= 2 && binary.BigEndian.Uint16(body) == 35 {
			return // nothing to compare with, or a KIP-511 v0 body
		}
		// kmsg decoded the original: the patch must be exactly a
		// throttle change as kmsg sees it.
		t0, _ := orig.(kmsg.ThrottleResponse).Throttle()
		want := max(t0, ms)
		if got != want {
			t.Fatalf("%s v%d: SetThrottle = %d, want max(%d, %d)", kmsg.NameForKey(key), version, got, t0, ms)
		}
		after, err := tryDecodeResponse(buf.B, key, version)
		if err != nil {
			t.Fatalf("%s v%d: patched frame does not decode: %v", kmsg.NameForKey(key), version, err)
		}
		orig.(kmsg.SetThrottleResponse).SetThrottle(want)
		if !reflect.DeepEqual(after, orig) {
			t.Fatalf("%s v%d: more than the throttle changed:\n got %+v\nwant %+v", kmsg.NameForKey(key), version, after, orig)
		}
	})
}

// FuzzWalks checks each walk against kmsg's decoder of its message: a body
// kmsg decodes is walked whole, with kmsg's topics and record bytes, and
// as a stream as when buffered; a body kmsg refuses is never walked whole,
// but where a tagged field kmsg reads may be at fault (the walks pass
// tagged fields unread).
func FuzzWalks(f *testing.F) {
	for _, v := range []int16{0, 3, 9, 13} {
		req, _ := multiTopicProduce(v)
		f.Add(req.AppendTo(nil), v, uint8(0))
	}
	for _, v := range []int16{4, 12, 13, 17} {
		f.Add(fetchRequestBody(v, 2), v, uint8(1))
		f.Add(fetchResponseBody(v, 2), v, uint8(2))
	}
	share := kmsg.NewPtrShareFetchResponse()
	share.Topics = append(share.Topics, kmsg.NewShareFetchResponseTopic())
	share.Topics[0].Partitions = append(share.Topics[0].Partitions, kmsg.NewShareFetchResponseTopicPartition())
	f.Add(share.AppendTo(nil), int16(0), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, v int16, kind uint8) {
		var (
			req  kmsg.Request
			resp kmsg.Response
		)
		switch kind % 4 {
		case 0:
			req = kmsg.NewPtrProduceRequest()
		case 1:
			req = kmsg.NewPtrFetchRequest()
		case 2:
			resp = kmsg.NewPtrFetchResponse()
		default:
			resp = kmsg.NewPtrShareFetchResponse()
		}
		var msg interface {
			SetVersion(int16)
			MaxVersion() int16
			ReadFrom([]byte) error
		} = req
		if req == nil {
			msg = resp
		}
		v = max(v, 0) % (msg.MaxVersion() + 1)
		msg.SetVersion(v)
		err := msg.ReadFrom(bytes.Clone(b))
		got, ok, want := walkAgainst(t, b, v, msg)
		if err == nil && (!ok || fmt.Sprint(got) != fmt.Sprint(want)) {
			t.Fatalf("%T v%d: walked %v %v, kmsg %v", msg, v, got, ok, want)
		}
		if err != nil && ok && !knownTags(msg, v) {
			t.Fatalf("%T v%d: walked whole %v, kmsg: %v", msg, v, got, err)
		}
	})
}

// walkAgainst walks b as msg's shape and returns what it saw and what kmsg
// decoded into msg.
func walkAgainst(t *testing.T, b []byte, v int16, msg any) (got []seen, ok bool, want []seen) {
	switch m := msg.(type) {
	case *kmsg.ProduceRequest:
		got, ok = sameStreamed(t, "produce", v, b, produceTopics, streamedProduceTopics)
		want = kmsgTopics(m.Topics, v >= 13, func(t *kmsg.ProduceRequestTopic) (string, [16]byte, []kmsg.ProduceRequestTopicPartition) {
			return t.Topic, t.TopicID, t.Partitions
		}, func(p *kmsg.ProduceRequestTopicPartition) int { return len(p.Records) })
	case *kmsg.FetchRequest:
		ok = clampTopics(bytes.Clone(b), v, clampTo{})
		got = fetchRequestTopics(b, v, nil)
		if s := fetchRequestTopics(nil, v, &streamed{p: b}); fmt.Sprint(s) != fmt.Sprint(got) {
			t.Fatalf("fetch request v%d: streamed %v, buffered %v", v, s, got)
		}
		want = kmsgTopics(m.Topics, v >= 13, func(t *kmsg.FetchRequestTopic) (string, [16]byte, []kmsg.FetchRequestTopicPartition) {
			return t.Topic, t.TopicID, t.Partitions
		}, func(p *kmsg.FetchRequestTopicPartition) int { return int(p.PartitionMaxBytes) })
	case *kmsg.FetchResponse:
		buffered := func(b []byte, v int16) ([]seen, bool) { return fetchResponseTopics(b, v, false) }
		got, ok = sameStreamed(t, "fetch response", v, b, buffered, streamedFetchResponseTopics)
		want = kmsgTopics(m.Topics, v >= 13, func(t *kmsg.FetchResponseTopic) (string, [16]byte, []kmsg.FetchResponseTopicPartition) {
			return t.Topic, t.TopicID, t.Partitions
		}, func(p *kmsg.FetchResponseTopicPartition) int { return len(p.RecordBatches) })
	case *kmsg.ShareFetchResponse:
		got, ok = fetchResponseTopics(b, v, true)
		want = kmsgTopics(m.Topics, true, func(t *kmsg.ShareFetchResponseTopic) (string, [16]byte, []kmsg.ShareFetchResponseTopicPartition) {
			return "", t.TopicID, t.Partitions
		}, func(p *kmsg.ShareFetchResponseTopicPartition) int { return len(p.Records) })
	}
	return got, ok, want
}

// sameStreamed walks b buffered and streamed, which must see the same.
func sameStreamed(t *testing.T, what string, v int16, b []byte, buffered, streamed func([]byte, int16) ([]seen, bool)) ([]seen, bool) {
	got, ok := buffered(b, v)
	if s, sok := streamed(b, v); sok != ok || fmt.Sprint(s) != fmt.Sprint(got) {
		t.Fatalf("%s v%d: streamed %v %v, buffered %v %v", what, v, s, sok, got, ok)
	}
	return got, ok
}

// fetchRequestTopics is each topic of a Fetch request (b, or what src
// reads) with the sum of its partitions' partition_max_bytes.
func fetchRequestTopics(b []byte, v int16, src wire.Source) (got []seen) {
	var w wire.FetchRequestWalk
	if src != nil {
		w.StartFrom(src, v)
	} else {
		w.Start(b, v)
	}
	for w.NextTopic() {
		name, id := w.Topic()
		s := seenOf(name, id, 0) // a streamed name is gone once the partitions are read
		for w.NextPartition() {
			s.records += int(w.PartitionMaxBytes())
		}
		got = append(got, s)
	}
	return got
}

// kmsgTopics is what kmsg decoded: each topic with the sum of size over
// its partitions.
func kmsgTopics[T, P any](ts []T, byID bool, topic func(*T) (string, [16]byte, []P), size func(*P) int) (want []seen) {
	for i := range ts {
		name, id, parts := topic(&ts[i])
		n := 0
		for j := range parts {
			n += size(&parts[j])
		}
		want = append(want, topicSeen(byID, name, id, n))
	}
	return want
}

func topicSeen(byID bool, name string, id [16]byte, records int) seen {
	if byID {
		return seen{"<id>", id, records}
	}
	return seen{name, [16]byte{}, records}
}

// knownTags: the shape has tagged fields kmsg reads (Fetch from v12: the
// cluster id, replica state and directory, a partition's diverging epoch,
// current leader and snapshot id), which the walks pass unread.
func knownTags(msg any, v int16) bool {
	switch msg.(type) {
	case *kmsg.FetchRequest, *kmsg.FetchResponse:
		return v >= 12
	}
	return false
}
