package wire_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// Test helpers shared by the files of this package. Every Kafka message is
// built with kmsg; the helpers only wrap kmsg's encodings into frames.

// reqFlexible reports whether (key, version) is flexible, according to kmsg.
func reqFlexible(key, version int16) bool {
	r := kmsg.RequestForKey(key)
	r.SetVersion(version)
	return r.IsFlexible()
}

// knownKeys lists every key kmsg has a request for.
func knownKeys() []int16 {
	var ks []int16
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if kmsg.RequestForKey(k) != nil {
			ks = append(ks, k)
		}
	}
	return ks
}

// requestFrame encodes req as a full request frame (size prefix included).
// clientID nil means a null client id.
func requestFrame(req kmsg.Request, corr int32, clientID *string) []byte {
	f := &kmsg.RequestFormatter{}
	if clientID != nil {
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	}
	frame := f.AppendRequest(nil, req, corr)
	if req.Key() == int16(kmsg.ControlledShutdown) && req.GetVersion() == 0 {
		// kmsg v1.15.1 returns right after the v0 request header of
		// ControlledShutdown v0, without the body and the size prefix.
		frame = req.AppendTo(frame)
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// responseFrame encodes resp at its version into a response frame, the way
// the gateway would: response header v1 iff the request is flexible (and the
// key is not ApiVersions).
func responseFrame(resp kmsg.Response, corr int32) *wire.Buffer {
	return wire.EncodeResponse(corr, reqFlexible(resp.Key(), resp.GetVersion()), resp)
}

// decodeResponse decodes a response frame (size prefix included) with kmsg
// at version, skipping the response header the way a client would.
func decodeResponse(t testing.TB, frame []byte, key, version int16) kmsg.Response {
	t.Helper()
	resp, err := tryDecodeResponse(frame, key, version)
	if err != nil {
		t.Fatalf("%s v%d: decoding response: %v", kmsg.NameForKey(key), version, err)
	}
	return resp
}

func tryDecodeResponse(frame []byte, key, version int16) (kmsg.Response, error) {
	if kmsg.ResponseForKey(key) == nil {
		return nil, fmt.Errorf("unknown key %d", key)
	}
	if len(frame) < 8 {
		return nil, fmt.Errorf("frame of %d bytes", len(frame))
	}
	if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
		return nil, fmt.Errorf("size prefix %d, payload %d bytes", got, len(frame)-4)
	}
	body := frame[8:]
	if key != int16(kmsg.ApiVersions) && reqFlexible(key, version) {
		// Response header v1: a tag section, which no tag uses today.
		if len(body) < 1 || body[0] != 0 {
			return nil, fmt.Errorf("unexpected response header tags")
		}
		body = body[1:]
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

// clone copies a byte slice.
func clone(b []byte) []byte { return append([]byte(nil), b...) }

// pooled copies frame into a pooled buffer, as ReadFrame would return it.
func pooled(frame []byte) *wire.Buffer {
	b := wire.GetBuffer(len(frame))
	copy(b.B, frame)
	return b
}

// fill sets every exported field of the kmsg message v points to (except
// Version and UnknownTags) to a non-default value, with two elements in
// every array, so that encodings exercise every field a version has. seed
// varies the values.
func fill(v any, seed int) {
	fillValue(reflect.ValueOf(v).Elem(), seed, 0)
}

func fillValue(v reflect.Value, seed, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Name == "Version" || f.Name == "UnknownTags" {
				continue
			}
			fillValue(v.Field(i), seed+i, depth+1)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(strings.Repeat("opaque", 1+seed%3)))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fillValue(s.Index(i), seed+10*i+1, depth+1)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), seed, depth+1)
		v.Set(p)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fillValue(v.Index(i), seed+i, depth+1)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("str-%d", seed))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(2 + seed%5))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(2 + seed%5))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

// Addresses used by the rewrite tests: every upstream host contains
// upstreamMark so that a leak can be found with bytes.Contains.
const (
	upstreamMark = "upstream.internal"
	gatewayHost  = "gw.tollgate.test"
)

func upstreamHost(id int32) string { return fmt.Sprintf("broker-%d.%s", id, upstreamMark) }

// testMapper advertises gatewayHost:30000+id for node ids below 50 and has
// no address for the others.
type testMapper struct {
	calls []int32
}

func (m *testMapper) Advertise(id int32, host string, port int32) (string, int32, bool) {
	m.calls = append(m.calls, id)
	if id < 0 || id >= 50 {
		return "", 0, false
	}
	return gatewayHost, 30000 + id, true
}

func mappedPort(id int32) int32 { return 30000 + id }

// recordBatch encodes one kmsg record batch carrying n opaque bytes of
// records.
func recordBatch(n int, seed byte) []byte {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = seed + byte(i*7)
	}
	batch := kmsg.RecordBatch{Magic: 2, NumRecords: int32(1 + n/100), Records: payload, FirstTimestamp: 1700000000000}
	enc := batch.AppendTo(nil)
	batch.Length = int32(len(enc) - 12)
	return batch.AppendTo(enc[:0])
}

// fetchResponse builds a Fetch response of version with two topics of
// parts partitions each, recordBytes of records in every partition, and,
// if endpoints, NOT_LEADER partitions with a CurrentLeader and node
// endpoints naming upstream brokers (KIP-951).
func fetchResponse(version int16, parts, recordBytes int, endpoints bool) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	resp.SessionID = 77
	for ti := 0; ti < 2; ti++ {
		topic := kmsg.NewFetchResponseTopic()
		topic.Topic = fmt.Sprintf("events-%d", ti)
		topic.TopicID[0], topic.TopicID[15] = byte(ti+1), 0xbb
		for pi := 0; pi < parts; pi++ {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = int32(pi)
			p.HighWatermark = 5000
			p.LastStableOffset = 4990
			p.LogStartOffset = 10
			if pi%2 == 1 {
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 9, FirstOffset: 4000}}
			}
			p.PreferredReadReplica = -1
			p.RecordBatches = recordBatch(recordBytes, byte(pi))
			if endpoints && pi == 0 {
				p.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
				p.RecordBatches = nil
				p.CurrentLeader.LeaderID = 3
				p.CurrentLeader.LeaderEpoch = 12
			}
			if pi == 1 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 4, 4321
			}
			topic.Partitions = append(topic.Partitions, p)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	if endpoints {
		for _, id := range []int32{3, 1, 99} { // 99 has no gateway address
			b := kmsg.NewFetchResponseBroker()
			b.NodeID, b.Host, b.Port = id, upstreamHost(id), 9092
			b.Rack = kmsg.StringPtr("rack-" + fmt.Sprint(id))
			resp.Brokers = append(resp.Brokers, b)
		}
	}
	return resp
}
