package wire_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// throttleFacts is where throttle_time_ms exists and from which version
// clients back off themselves (KIP-219), per the proxying reference §3.2:
// {from, after}. Keys with the field that are not listed have {0, 0}.
var throttleFacts = map[int16][2]int16{
	0: {1, 6}, 1: {1, 8}, 2: {2, 3}, 3: {3, 6}, 8: {3, 4}, 9: {3, 4}, 10: {1, 2}, 11: {2, 3},
	12: {1, 2}, 13: {1, 2}, 14: {1, 2}, 15: {1, 2}, 16: {1, 2}, 18: {1, 2}, 19: {2, 3}, 20: {1, 2},
	21: {0, 1}, 22: {0, 1}, 24: {0, 1}, 25: {0, 1}, 26: {0, 1}, 28: {0, 1}, 29: {0, 1}, 30: {0, 1},
	31: {0, 1}, 33: {0, 1}, 34: {0, 1}, 35: {0, 1}, 37: {0, 1}, 42: {0, 1},
	23: {2, 0}, 32: {0, 2}, 38: {0, 1}, 39: {0, 1}, 40: {0, 1}, 41: {0, 1}, 47: {0, 0},
}

// noThrottleKeys have no throttle_time_ms at any version (§3.1).
var noThrottleKeys = map[int16]bool{
	4: true, 5: true, 6: true, 7: true, 17: true, 27: true, 36: true,
	52: true, 53: true, 54: true, 55: true, 58: true,
	83: true, 84: true, 85: true, 86: true, 87: true,
}

// throttleBodyOffset is the offset of the field in the body where it is
// fixed (§3.2); -1 where it depends on the content.
func throttleBodyOffset(key int16) int {
	switch key {
	case int16(kmsg.Produce), int16(kmsg.ApiVersions), 38, 41:
		return -1
	case 39, 40:
		return 10
	case int16(kmsg.OffsetDelete):
		return 2
	}
	return 0
}

// reencodes reports whether SetThrottle may decode and re-encode the
// response (rather than patch it in place).
func reencodes(key, version int16) bool {
	return key == 38 || key == 41 || key == int16(kmsg.ApiVersions) && version >= 3
}

func produceResponse(version int16) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(version)
	for ti := 0; ti < 3; ti++ {
		topic := kmsg.NewProduceResponseTopic()
		topic.Topic = "orders-" + string(rune('a'+ti))
		topic.TopicID[0], topic.TopicID[15] = byte(ti+1), 0xaa
		for pi := 0; pi <= ti; pi++ {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = int32(pi)
			p.BaseOffset = int64(1000 * (pi + 1))
			p.LogAppendTime = 1700000000000
			p.LogStartOffset = 12
			if pi == 1 {
				p.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
				p.ErrorMessage = kmsg.StringPtr("not the leader any more")
				p.CurrentLeader.LeaderID = 2
				p.CurrentLeader.LeaderEpoch = 9
			}
			if pi == 2 {
				p.ErrorCode = 87 // INVALID_RECORD
				p.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{
					{RelativeOffset: 3, ErrorMessage: kmsg.StringPtr("bad timestamp")},
					{RelativeOffset: 8},
				}
			}
			topic.Partitions = append(topic.Partitions, p)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	if version >= 9 {
		resp.Topics[0].UnknownTags.Set(7, []byte("topic tag"))
		resp.UnknownTags.Set(9, []byte{1, 2, 3})
	}
	for id := int32(1); id <= 2; id++ {
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = id, upstreamHost(id), 9092
		if id == 1 {
			b.Rack = kmsg.StringPtr("rack-a")
		}
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp
}

func createDelegationTokenResponse(version int16) *kmsg.CreateDelegationTokenResponse {
	resp := kmsg.NewPtrCreateDelegationTokenResponse()
	resp.SetVersion(version)
	resp.PrincipalType, resp.PrincipalName = "User", "alice"
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = "User", "bob"
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = 1, 2, 3
	resp.TokenID = "token-id-0123456789"
	resp.HMAC = bytes.Repeat([]byte{0x5a}, 64)
	return resp
}

func describeDelegationTokenResponse(version int16) *kmsg.DescribeDelegationTokenResponse {
	resp := kmsg.NewPtrDescribeDelegationTokenResponse()
	resp.SetVersion(version)
	for i := 0; i < 3; i++ {
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = "User", "owner-"+string(rune('a'+i))
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = "User", "requester"
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = 10, 20, 30
		d.TokenID = "id-" + string(rune('a'+i))
		d.HMAC = bytes.Repeat([]byte{byte(i)}, 32)
		for r := 0; r < i; r++ {
			d.Renewers = append(d.Renewers, kmsg.DescribeDelegationTokenResponseTokenDetailRenewer{PrincipalType: "User", PrincipalName: "renewer"})
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return resp
}

// throttleResponses returns the responses of (key, version) the throttle
// tests run on: the empty default, one with every field filled, and for
// the keys whose throttle must be found by walking, realistic ones.
func throttleResponses(key, version int16) []kmsg.Response {
	empty := kmsg.ResponseForKey(key)
	empty.SetVersion(version)
	filled := kmsg.ResponseForKey(key)
	fill(filled, int(key)*31+int(version))
	filled.SetVersion(version)
	out := []kmsg.Response{empty, filled}
	switch key {
	case int16(kmsg.Produce):
		out = append(out, produceResponse(version))
	case int16(kmsg.Fetch):
		out = append(out, fetchResponse(version, 3, 4096, true))
	case int16(kmsg.ApiVersions):
		out = append(out, upstreamApiVersions(version))
	case 38:
		out = append(out, createDelegationTokenResponse(version))
	case 41:
		out = append(out, describeDelegationTokenResponse(version))
	}
	return out
}

func TestThrottleTableMatchesKmsg(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		resp := kmsg.ResponseForKey(k)
		if resp == nil {
			continue
		}
		_, isThrottle := resp.(kmsg.ThrottleResponse)
		if isThrottle == noThrottleKeys[k] {
			t.Errorf("%s: kmsg ThrottleResponse %v, reference says no throttle %v", kmsg.NameForKey(k), isThrottle, noThrottleKeys[k])
		}
		facts, listed := throttleFacts[k]
		if !listed && isThrottle {
			facts = [2]int16{0, 0}
		}
		for v := int16(0); v <= resp.MaxVersion()+1; v++ {
			// Independent of throttle.go: encode with two values and compare.
			has := false
			if isThrottle {
				a, b := kmsg.ResponseForKey(k), kmsg.ResponseForKey(k)
				fill(a, 1)
				fill(b, 1)
				a.SetVersion(v)
				b.SetVersion(v)
				a.(kmsg.SetThrottleResponse).SetThrottle(0)
				b.(kmsg.SetThrottleResponse).SetThrottle(0x01020304)
				ea, eb := a.AppendTo(nil), b.AppendTo(nil)
				has = !bytes.Equal(ea, eb)
				if has && v <= resp.MaxVersion() {
					if off := throttleBodyOffset(k); off >= 0 {
						at := 0
						for ea[at] == eb[at] {
							at++
						}
						if at != off {
							t.Errorf("%s v%d: throttle at body offset %d, reference says %d", kmsg.NameForKey(k), v, at, off)
						}
					}
				}
			}
			if v > resp.MaxVersion() {
				continue // kmsg encodes as its newest version; only HasThrottle is compared below
			}
			if got := wire.HasThrottle(k, v); got != has {
				t.Errorf("%s v%d: HasThrottle %v, encodings differ %v", kmsg.NameForKey(k), v, got, has)
			}
			if isThrottle && has != (v >= facts[0]) {
				t.Errorf("%s v%d: field exists %v, reference says from v%d", kmsg.NameForKey(k), v, has, facts[0])
			}
			backsOff := false
			if isThrottle {
				r := kmsg.ResponseForKey(k)
				r.SetVersion(v)
				_, backsOff = r.(kmsg.ThrottleResponse).Throttle()
				backsOff = backsOff && has
				if want := has && v >= facts[1]; backsOff != want {
					t.Errorf("%s v%d: kmsg backs off %v, reference %v", kmsg.NameForKey(k), v, backsOff, want)
				}
			}
			if got := wire.ClientBacksOff(k, v); got != backsOff {
				t.Errorf("%s v%d: ClientBacksOff %v, want %v", kmsg.NameForKey(k), v, got, backsOff)
			}
		}
	}
	// A few spot checks straight from the reference.
	for _, c := range []struct {
		key, from int16
	}{{int16(kmsg.Produce), 6}, {int16(kmsg.Fetch), 8}, {int16(kmsg.Metadata), 6}, {int16(kmsg.CreateTopics), 3}, {8, 4}} {
		if wire.ClientBacksOff(c.key, c.from-1) || !wire.ClientBacksOff(c.key, c.from) || !wire.ClientBacksOff(c.key, c.from+1) {
			t.Errorf("%s: clients should back off from v%d", kmsg.NameForKey(c.key), c.from)
		}
	}
	if wire.ClientBacksOff(23, 1) || !wire.ClientBacksOff(23, 2) || wire.HasThrottle(23, 1) {
		t.Errorf("OffsetForLeaderEpoch: the field (and backing off) starts at v2")
	}
	for _, k := range []int16{-1, wire.MaxKey + 1, 200, -3327} {
		if wire.HasThrottle(k, 0) || wire.ClientBacksOff(k, 5) {
			t.Errorf("key %d: unknown keys have no throttle", k)
		}
	}
}

func TestSetThrottleAllKeysAllVersions(t *testing.T) {
	const upstream, gateway = 7, 500
	cases := 0
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		r := kmsg.ResponseForKey(k)
		if r == nil {
			continue
		}
		_, isThrottle := r.(kmsg.ThrottleResponse)
		for v := int16(0); v <= r.MaxVersion(); v++ {
			flex := reqFlexible(k, v)
			for ci, resp := range throttleResponses(k, v) {
				name := fmt.Sprintf("%s v%d case %d", kmsg.NameForKey(k), v, ci)
				if isThrottle {
					resp.(kmsg.SetThrottleResponse).SetThrottle(upstream)
				}
				buf := responseFrame(resp, 0x0a0b0c0d)
				orig := clone(buf.B)
				has := wire.HasThrottle(k, v)
				want := decodeResponse(t, orig, k, v)

				cur, err := wire.Throttle(buf, k, v, flex)
				if err != nil || (has && cur != upstream) || (!has && cur != 0) {
					t.Errorf("%s: Throttle = %d, %v", name, cur, err)
				}

				// A smaller value keeps the upstream's.
				got, err := wire.SetThrottle(buf, k, v, flex, upstream-2)
				if err != nil || !bytes.Equal(buf.B, orig) || (has && got != upstream) || (!has && got != 0) {
					t.Errorf("%s: SetThrottle(smaller) = %d, %v (frame changed %v)", name, got, err, !bytes.Equal(buf.B, orig))
				}

				data := unsafe.SliceData(buf.B)
				got, err = wire.SetThrottle(buf, k, v, flex, gateway)
				if err != nil {
					t.Errorf("%s: SetThrottle: %v", name, err)
					continue
				}
				cases++
				if !has {
					if got != 0 || !bytes.Equal(buf.B, orig) {
						t.Errorf("%s: no field, yet SetThrottle = %d (frame changed %v)", name, got, !bytes.Equal(buf.B, orig))
					}
					continue
				}
				if got != gateway {
					t.Errorf("%s: SetThrottle = %d, want %d", name, got, gateway)
				}
				if !reencodes(k, v) && (unsafe.SliceData(buf.B) != data || len(buf.B) != len(orig)) {
					t.Errorf("%s: SetThrottle reallocated the frame instead of patching it", name)
				}
				// kmsg sees the new value and nothing else changed.
				after := decodeResponse(t, buf.B, k, v)
				if th, _ := after.(kmsg.ThrottleResponse).Throttle(); th != gateway {
					t.Errorf("%s: decoded throttle %d, want %d", name, th, gateway)
				}
				want.(kmsg.SetThrottleResponse).SetThrottle(gateway)
				if !reflect.DeepEqual(after, want) {
					t.Errorf("%s: more than the throttle changed:\n got %+v\nwant %+v", name, after, want)
				}
				exp := responseFrame(want, 0x0a0b0c0d)
				if !bytes.Equal(buf.B, exp.B) {
					t.Errorf("%s: frame differs from kmsg's encoding with the new throttle", name)
				}
				exp.Release()

				if cur, err := wire.Throttle(buf, k, v, flex); err != nil || cur != gateway {
					t.Errorf("%s: Throttle after SetThrottle = %d, %v", name, cur, err)
				}
				patched := clone(buf.B)
				if got, err := wire.SetThrottle(buf, k, v, flex, 100); err != nil || got != gateway || !bytes.Equal(buf.B, patched) {
					t.Errorf("%s: SetThrottle(100) after 500 = %d, %v", name, got, err)
				}
				buf.Release()
			}
		}
	}
	if cases < 500 {
		t.Fatalf("only %d cases", cases)
	}
}

// A KIP-511 UNSUPPORTED_VERSION answer is a v0 body whatever the version
// asked: it has no throttle field and must be left alone.
func TestSetThrottleApiVersionsError35(t *testing.T) {
	for _, keys := range [][]kmsg.ApiVersionsResponseApiKey{
		{{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: 4}},
		nil, // pre-2.4 brokers: no entries
	} {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0)
		resp.ErrorCode = 35
		resp.ApiKeys = keys
		for v := int16(0); v <= wire.ApiVersionsMax+3; v++ {
			buf := wire.EncodeResponse(11, false, resp)
			orig := clone(buf.B)
			got, err := wire.SetThrottle(buf, int16(kmsg.ApiVersions), v, reqFlexible(int16(kmsg.ApiVersions), v), 500)
			if err != nil || got != 0 || !bytes.Equal(buf.B, orig) {
				t.Errorf("v%d, %d keys: SetThrottle = %d, %v (changed %v)", v, len(keys), got, err, !bytes.Equal(buf.B, orig))
			}
			if th, err := wire.Throttle(buf, int16(kmsg.ApiVersions), v, reqFlexible(int16(kmsg.ApiVersions), v)); err != nil || th != 0 {
				t.Errorf("v%d, %d keys: Throttle = %d, %v", v, len(keys), th, err)
			}
			buf.Release()
		}
	}
}

func TestSetThrottleMalformed(t *testing.T) {
	for _, c := range []struct {
		resp kmsg.Response
	}{
		{produceResponse(8)}, {produceResponse(11)}, {produceResponse(13)},
		{upstreamApiVersions(2)}, {upstreamApiVersions(4)},
		{createDelegationTokenResponse(3)}, {describeDelegationTokenResponse(2)},
		{fetchResponse(16, 1, 100, false)},
	} {
		k, v := c.resp.Key(), c.resp.GetVersion()
		c.resp.(kmsg.SetThrottleResponse).SetThrottle(7)
		full := responseFrame(c.resp, 1)
		for cut := 4; cut < len(full.B); cut++ {
			frame := clone(full.B[:cut])
			buf := &wire.Buffer{B: frame}
			// Whatever is cut, no panic, and either an error or a frame
			// kmsg agrees with.
			got, err := wire.SetThrottle(buf, k, v, reqFlexible(k, v), 500)
			if err != nil {
				if !bytes.Equal(buf.B, full.B[:cut]) {
					t.Errorf("%s v%d cut at %d: failed SetThrottle changed the frame", kmsg.NameForKey(k), v, cut)
				}
				continue
			}
			if got != 500 {
				continue
			}
			binary.BigEndian.PutUint32(buf.B, uint32(len(buf.B)-4))
			if resp, err := tryDecodeResponse(buf.B, k, v); err == nil {
				if th, _ := resp.(kmsg.ThrottleResponse).Throttle(); th != 500 {
					t.Errorf("%s v%d cut at %d: reported 500, kmsg reads %d", kmsg.NameForKey(k), v, cut, th)
				}
			}
		}
		full.Release()
	}
}
