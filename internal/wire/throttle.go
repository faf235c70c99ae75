package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Where throttle_time_ms sits, per key. Computed once from kmsg by encoding
// each response with two throttle values and diffing the bytes, so the
// table cannot drift from the protocol definitions.
type throttleSpot struct {
	from    int16 // first version carrying the field; -1 if none
	backOff int16 // first version at which clients back off themselves (KIP-219)
	// offset from the body start, or -1 when it depends on the content
	// (Produce, ApiVersions, Create/DescribeDelegationToken).
	offset int16
}

var throttleSpots [MaxKey + 1]throttleSpot

func init() {
	for k := int16(0); k <= MaxKey; k++ {
		throttleSpots[k] = throttleSpot{from: -1, backOff: -1, offset: -1}
		resp := kmsg.ResponseForKey(k)
		if resp == nil {
			continue
		}
		if _, ok := resp.(kmsg.ThrottleResponse); !ok {
			continue
		}
		spot := &throttleSpots[k]
		for v := int16(0); v <= resp.MaxVersion(); v++ {
			a, b := kmsg.ResponseForKey(k), kmsg.ResponseForKey(k)
			a.SetVersion(v)
			b.SetVersion(v)
			b.(kmsg.SetThrottleResponse).SetThrottle(0x01020304)
			ea, eb := a.AppendTo(nil), b.AppendTo(nil)
			if _, after := b.(kmsg.ThrottleResponse).Throttle(); after && spot.backOff < 0 {
				spot.backOff = v
			}
			if bytes.Equal(ea, eb) {
				continue // the field does not exist at this version
			}
			if spot.from < 0 {
				spot.from = v
				spot.offset = int16(bytes.Index(eb, []byte{1, 2, 3, 4}))
			}
		}
		switch k {
		case int16(kmsg.Produce), int16(kmsg.ApiVersions), 38, 41:
			spot.offset = -1
		}
	}
	// kmsg reports OffsetForLeaderEpoch as backing off at every version
	// although the field only exists from v2; nothing to do at v0-1.
}

// HasThrottle reports whether a response of (key, version) has a
// throttle_time_ms field.
func HasThrottle(key, version int16) bool {
	if key < 0 || key > MaxKey {
		return false
	}
	s := throttleSpots[key]
	return s.from >= 0 && version >= s.from
}

// ClientBacksOff reports whether clients receiving this response version
// wait out throttle_time_ms themselves (Kafka's shouldClientThrottle). Below
// it only holding the connection enforces a throttle.
func ClientBacksOff(key, version int16) bool {
	if key < 0 || key > MaxKey {
		return false
	}
	s := throttleSpots[key]
	return s.backOff >= 0 && version >= s.backOff && HasThrottle(key, version)
}

// throttleOffset returns the offset in payload p of throttle_time_ms, or -1
// when it can only be set by decoding.
func throttleOffset(p []byte, bodyOff int, key, version int16) (int, error) {
	s := throttleSpots[key]
	switch {
	case s.offset >= 0:
		return bodyOff + int(s.offset), nil
	case key == int16(kmsg.Produce):
		off, _, err := produceLayout(p, bodyOff, version)
		return off, err
	case key == int16(kmsg.ApiVersions) && version <= 2:
		if len(p) < bodyOff+6 {
			return 0, ErrShortFrame
		}
		if int16(binary.BigEndian.Uint16(p[bodyOff:])) == kerr.UnsupportedVersion.Code {
			return -1, nil // v0 body on UNSUPPORTED_VERSION: no throttle field
		}
		n := int(int32(binary.BigEndian.Uint32(p[bodyOff+2:])))
		if n < 0 {
			n = 0 // a null array, as kmsg and Kafka read it
		}
		return bodyOff + 6 + 6*n, nil
	}
	return -1, nil
}

// throttleField finds throttle_time_ms in the response frame in buf (size
// prefix included): p is the frame's payload, bodyOff the body's offset in
// it and off the field's (-1: it can only be set by decoding). ok is false
// for a version without the field.
func throttleField(buf *Buffer, key, version int16, flexible bool) (p []byte, bodyOff, off int, ok bool, err error) {
	if !HasThrottle(key, version) {
		return nil, 0, 0, false, nil
	}
	p = buf.B[4:]
	if bodyOff, err = ResponseBodyOffset(p, key, flexible); err != nil {
		return nil, 0, 0, true, err
	}
	off, err = throttleOffset(p, bodyOff, key, version)
	return p, bodyOff, off, true, err
}

// SetThrottle raises the throttle_time_ms of the response frame in buf (size
// prefix included) to at least ms and returns the value the response now
// carries. The field is patched in place wherever its offset can be found
// by skipping; only rare responses (delegation tokens, flexible
// ApiVersions) are decoded and re-encoded at their own version. It reports
// 0, nil for versions without the field.
func SetThrottle(buf *Buffer, key, version int16, flexible bool, ms int32) (int32, error) {
	p, bodyOff, off, ok, err := throttleField(buf, key, version, flexible)
	if !ok || err != nil {
		return 0, err
	}
	if off >= 0 {
		if off+4 > len(p) {
			return 0, fmt.Errorf("%w: no room for throttle", ErrShortFrame)
		}
		cur := int32(binary.BigEndian.Uint32(p[off:]))
		if ms > cur {
			binary.BigEndian.PutUint32(p[off:], uint32(ms))
			return ms, nil
		}
		return cur, nil
	}
	if key == int16(kmsg.ApiVersions) && len(p) >= bodyOff+2 && int16(binary.BigEndian.Uint16(p[bodyOff:])) == kerr.UnsupportedVersion.Code {
		return 0, nil
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(p[bodyOff:]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	cur, _ := resp.(kmsg.ThrottleResponse).Throttle()
	if ms <= cur {
		return cur, nil
	}
	resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
	ReplaceBody(buf, bodyOff, resp)
	return ms, nil
}

// Throttle returns the throttle_time_ms a response frame carries (0 if the
// version has none).
func Throttle(buf *Buffer, key, version int16, flexible bool) (int32, error) {
	p, bodyOff, off, ok, err := throttleField(buf, key, version, flexible)
	if !ok || err != nil {
		return 0, err
	}
	if off >= 0 {
		if off+4 > len(p) {
			return 0, ErrShortFrame
		}
		return int32(binary.BigEndian.Uint32(p[off:])), nil
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(p[bodyOff:]); err != nil {
		return 0, nil // e.g. the v0 body of an UNSUPPORTED_VERSION reply
	}
	t, _ := resp.(kmsg.ThrottleResponse).Throttle()
	return t, nil
}

// ReplaceBody re-encodes buf's frame with resp as its body, keeping the
// response header (correlation id and header tags: the first bodyOff bytes
// of the payload) and fixing the size prefix.
func ReplaceBody(buf *Buffer, bodyOff int, resp kmsg.Response) {
	hdrEnd := 4 + bodyOff
	nb := GetBuffer(hdrEnd)
	copy(nb.B, buf.B[:hdrEnd])
	nb.B = resp.AppendTo(nb.B)
	binary.BigEndian.PutUint32(nb.B, uint32(len(nb.B)-4))
	old := *buf
	*buf = *nb
	nb.B, nb.class = old.B, old.class
	nb.Release()
}
