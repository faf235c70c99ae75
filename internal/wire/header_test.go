package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// apiFacts is kmsg v1.15.1's newest version and first flexible version of
// every key (-1: never flexible), as surveyed in the project's proxying
// reference (§1.4). It pins what Lookup must report independently of how
// apis.go derives it.
var apiFacts = map[int16][2]int16{
	0: {13, 9}, 1: {18, 12}, 2: {11, 6}, 3: {13, 9}, 4: {7, 4}, 5: {4, 2}, 6: {8, 6}, 7: {3, 3},
	8: {10, 8}, 9: {10, 6}, 10: {6, 3}, 11: {9, 6}, 12: {4, 4}, 13: {5, 4}, 14: {5, 4}, 15: {6, 5},
	16: {5, 3}, 17: {1, -1}, 18: {5, 3}, 19: {7, 5}, 20: {6, 4}, 21: {2, 2}, 22: {5, 2}, 23: {4, 4},
	24: {5, 3}, 25: {4, 3}, 26: {5, 3}, 27: {2, 1}, 28: {6, 3}, 29: {3, 2}, 30: {3, 2}, 31: {3, 2},
	32: {4, 4}, 33: {2, 2}, 34: {2, 2}, 35: {5, 2}, 36: {2, 2}, 37: {3, 2}, 38: {3, 2}, 39: {2, 2},
	40: {2, 2}, 41: {3, 2}, 42: {3, 2}, 43: {2, 2}, 44: {1, 1}, 45: {1, 0}, 46: {0, 0}, 47: {0, -1},
	48: {1, 1}, 49: {1, 1}, 50: {0, 0}, 51: {0, 0},
	52: {2, 0}, 53: {1, 1}, 54: {1, 1}, 55: {2, 0}, 56: {3, 0}, 57: {2, 0}, 58: {0, 0}, 59: {1, 0},
	60: {2, 0}, 61: {0, 0}, 62: {4, 0}, 63: {2, 0}, 64: {0, 0}, 65: {0, 0}, 66: {2, 0}, 67: {0, 0},
	68: {1, 0}, 69: {1, 0}, 70: {0, 0}, 71: {0, 0}, 72: {0, 0}, 73: {0, 0}, 74: {1, 0}, 75: {0, 0},
	76: {1, 0}, 77: {1, 0}, 78: {2, 0}, 79: {2, 0}, 80: {1, 0}, 81: {0, 0}, 82: {0, 0},
	83: {0, 0}, 84: {0, 0}, 85: {1, 0}, 86: {0, 0}, 87: {1, 0},
	88: {1, 0}, 89: {1, 0}, 90: {1, 0}, 91: {0, 0}, 92: {0, 0}, 93: {0, 0}, 94: {0, 0},
}

func TestLookup(t *testing.T) {
	if wire.MaxKey != 94 {
		t.Fatalf("MaxKey = %d, the facts table covers 0..94", wire.MaxKey)
	}
	for k := int16(0); k <= wire.MaxKey; k++ {
		a := wire.Lookup(k)
		req := kmsg.RequestForKey(k)
		if req == nil {
			if a.Known {
				t.Errorf("key %d: Known without a kmsg request", k)
			}
			continue
		}
		facts, ok := apiFacts[k]
		if !ok {
			t.Errorf("key %d: not in the facts table", k)
			continue
		}
		if !a.Known || a.Max != facts[0] || a.FlexFrom != facts[1] || a.Name != kmsg.NameForKey(k) {
			t.Errorf("key %d: Lookup = %+v, want max %d flex from %d name %q", k, a, facts[0], facts[1], kmsg.NameForKey(k))
		}
		if a.Max != req.MaxVersion() {
			t.Errorf("key %d: Max %d, kmsg %d", k, a.Max, req.MaxVersion())
		}
		for v := int16(-1); v <= a.Max+2; v++ {
			if v >= 0 {
				req.SetVersion(v)
				if got, want := a.Flexible(v), req.IsFlexible(); got != want {
					t.Errorf("key %d v%d: Flexible %v, kmsg %v", k, v, got, want)
				}
			}
			if got, want := a.Supports(v), v >= 0 && v <= a.Max; got != want {
				t.Errorf("key %d v%d: Supports %v", k, v, got)
			}
		}
	}
	for _, k := range []int16{-1, -3327, wire.MaxKey + 1, 200, 32767, -32768} {
		a := wire.Lookup(k)
		if a.Known || a.Supports(0) || a.Flexible(0) {
			t.Errorf("key %d: Lookup = %+v, want unknown", k, a)
		}
	}
}

func TestParseRequestHeaderAllKeysAllVersions(t *testing.T) {
	id := "tollgate-test-client"
	empty := ""
	clientIDs := []*string{nil, &empty, &id}
	corr := int32(0x01020304)
	n := 0
	for _, k := range knownKeys() {
		req := kmsg.RequestForKey(k)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			for ci, cid := range clientIDs {
				for filled := 0; filled < 2; filled++ {
					req := kmsg.RequestForKey(k)
					if filled == 1 {
						fill(req, int(k)+int(v))
					}
					req.SetVersion(v)
					corr++
					frame := requestFrame(req, corr, cid)
					if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
						t.Fatalf("kmsg frame size %d != %d", got, len(frame)-4)
					}
					p := frame[4:]
					h, err := wire.ParseRequestHeader(p)
					if err != nil {
						t.Errorf("%s v%d client id #%d: %v", kmsg.NameForKey(k), v, ci, err)
						continue
					}
					n++
					if h.Key != k || h.Version != v || h.CorrelationID != corr {
						t.Errorf("%s v%d: header %d v%d corr %d, want corr %d", kmsg.NameForKey(k), v, h.Key, h.Version, h.CorrelationID, corr)
					}
					if h.API != wire.Lookup(k) {
						t.Errorf("%s v%d: API %+v", kmsg.NameForKey(k), v, h.API)
					}
					switch {
					case k == int16(kmsg.ControlledShutdown) && v == 0:
						// Request header v0: no client id at all.
						if h.ClientID != nil || h.BodyOffset != 8 {
							t.Errorf("ControlledShutdown v0: client id %q, body offset %d", h.ClientID, h.BodyOffset)
						}
					case cid == nil:
						if h.ClientID != nil {
							t.Errorf("%s v%d: null client id parsed as %q", kmsg.NameForKey(k), v, h.ClientID)
						}
					default:
						if h.ClientID == nil || string(h.ClientID) != *cid {
							t.Errorf("%s v%d: client id %q (nil %v), want %q", kmsg.NameForKey(k), v, h.ClientID, h.ClientID == nil, *cid)
						}
						if cap(h.ClientID) != len(h.ClientID) {
							t.Errorf("%s v%d: client id slice may be appended into the frame (cap %d)", kmsg.NameForKey(k), v, cap(h.ClientID))
						}
					}
					if h.BodyOffset > len(p) {
						t.Fatalf("%s v%d: body offset %d past payload %d", kmsg.NameForKey(k), v, h.BodyOffset, len(p))
					}
					if body := req.AppendTo(nil); !bytes.Equal(p[h.BodyOffset:], body) {
						t.Errorf("%s v%d client id #%d: body at offset %d is not the request body", kmsg.NameForKey(k), v, ci, h.BodyOffset)
					}
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d headers parsed", n)
	}
}

// withHeaderTags returns a copy of a flexible request frame whose (empty)
// request header tag section is replaced by tags, with the size prefix
// fixed. No request header tag is defined today, so only the section's
// framing matters.
func withHeaderTags(t *testing.T, frame []byte, tags []byte) []byte {
	t.Helper()
	h, err := wire.ParseRequestHeader(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	tagAt := 4 + h.BodyOffset - 1
	if frame[tagAt] != 0 {
		t.Fatalf("expected an empty header tag section at %d", tagAt)
	}
	out := append(clone(frame[:tagAt]), tags...)
	out = append(out, frame[tagAt+1:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func TestParseRequestHeaderTags(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	topic := "orders"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	id := "c"
	frame := requestFrame(req, 9, &id)
	body := req.AppendTo(nil)

	// Two tags (ids 0 and 300), 3 and 0 bytes long.
	tags := []byte{2, 0, 3, 'a', 'b', 'c', 0xac, 0x02, 0}
	tagged := withHeaderTags(t, frame, tags)
	h, err := wire.ParseRequestHeader(tagged[4:])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tagged[4+h.BodyOffset:], body) || string(h.ClientID) != "c" {
		t.Fatalf("body offset %d does not skip the header tags", h.BodyOffset)
	}

	// Truncated tag sections.
	for _, bad := range [][]byte{
		{2, 0, 3, 'a'},                       // second tag missing, first one short
		{1, 0, 0x7f},                         // tag longer than the message
		{1, 0x80},                            // truncated tag id varint
		{1, 0},                               // missing size
		{0x80},                               // truncated count
		{0xff, 0xff, 0xff, 0xff, 0xff, 0x0f}, // varint overflow
	} {
		p := clone(frame[4 : 4+h.BodyOffset-len(tags)])
		// p now ends right before the header tag section.
		p = append(p, bad...)
		if _, err := wire.ParseRequestHeader(p); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("tags % x: err %v, want ErrMalformed", bad, err)
		}
	}
	// A flexible header that ends right after the client id.
	p := frame[4 : 4+h.BodyOffset-len(tags)]
	if _, err := wire.ParseRequestHeader(p); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("missing tag section: err %v, want ErrMalformed", err)
	}
}

func TestParseRequestHeaderErrors(t *testing.T) {
	id := "tollgate"
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	good := requestFrame(meta, 77, &id)[4:]

	patchKeyVersion := func(key, version int16) []byte {
		p := clone(good)
		binary.BigEndian.PutUint16(p, uint16(key))
		binary.BigEndian.PutUint16(p[2:], uint16(version))
		return p
	}

	t.Run("unknown key", func(t *testing.T) {
		for _, k := range []int16{200, -3327, -1, wire.MaxKey + 1, 1000, -10495} {
			h, err := wire.ParseRequestHeader(patchKeyVersion(k, 0))
			if !errors.Is(err, wire.ErrUnknownAPIKey) {
				t.Errorf("key %d: err %v, want ErrUnknownAPIKey", k, err)
			}
			if h.Key != k || h.CorrelationID != 77 {
				t.Errorf("key %d: header %+v should still carry key and corr id", k, h)
			}
		}
	})

	t.Run("version above max", func(t *testing.T) {
		for _, k := range knownKeys() {
			if k == int16(kmsg.ApiVersions) {
				continue
			}
			max := kmsg.RequestForKey(k).MaxVersion()
			for _, v := range []int16{max + 1, max + 7, 32767, -1, -32768} {
				_, err := wire.ParseRequestHeader(patchKeyVersion(k, v))
				if !errors.Is(err, wire.ErrUnsupportedVers) {
					t.Errorf("%s v%d: err %v, want ErrUnsupportedVers", kmsg.NameForKey(k), v, err)
				}
			}
		}
		if _, err := wire.ParseRequestHeader(patchKeyVersion(int16(kmsg.ApiVersions), -1)); !errors.Is(err, wire.ErrUnsupportedVers) {
			t.Errorf("ApiVersions v-1: err %v, want ErrUnsupportedVers", err)
		}
	})

	t.Run("ApiVersions newer than kmsg", func(t *testing.T) {
		// KIP-511: the header of a too-new ApiVersions request must parse
		// (as a flexible v2 header) so that the gateway can answer it.
		for _, v := range []int16{wire.ApiVersionsMax + 1, 9, 127} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(v)
			req.ClientSoftwareName = "kgo"
			req.ClientSoftwareVersion = "1.0"
			frame := requestFrame(req, 5, &id)
			h, err := wire.ParseRequestHeader(frame[4:])
			if err != nil {
				t.Fatalf("ApiVersions v%d: %v", v, err)
			}
			if h.Version != v || h.CorrelationID != 5 || string(h.ClientID) != id || h.API.Supports(v) {
				t.Errorf("ApiVersions v%d: %+v", v, h)
			}
			if !bytes.Equal(frame[4+h.BodyOffset:], req.AppendTo(nil)) {
				t.Errorf("ApiVersions v%d: wrong body offset %d", v, h.BodyOffset)
			}
		}
	})

	t.Run("short frames", func(t *testing.T) {
		for n := 0; n < 10; n++ {
			if _, err := wire.ParseRequestHeader(good[:n]); !errors.Is(err, wire.ErrShortFrame) {
				t.Errorf("%d bytes: err %v, want ErrShortFrame", n, err)
			}
		}
		// ControlledShutdown v0 has a v0 header: 8 bytes are a whole header.
		cs := kmsg.NewPtrControlledShutdownRequest()
		cs.SetVersion(0)
		frame := requestFrame(cs, 3, &id)
		for n := 0; n < 8; n++ {
			if _, err := wire.ParseRequestHeader(frame[4 : 4+n]); !errors.Is(err, wire.ErrShortFrame) {
				t.Errorf("ControlledShutdown v0, %d bytes: err %v", n, err)
			}
		}
		h, err := wire.ParseRequestHeader(frame[4:12])
		if err != nil || h.BodyOffset != 8 || h.CorrelationID != 3 {
			t.Errorf("ControlledShutdown v0 header alone: %+v, %v", h, err)
		}
		// Non-flexible v1 header cut inside the client id.
		old := kmsg.NewPtrMetadataRequest()
		old.SetVersion(1)
		frame = requestFrame(old, 3, &id)
		for n := 10; n < 10+len(id); n++ {
			if _, err := wire.ParseRequestHeader(frame[4 : 4+n]); !errors.Is(err, wire.ErrMalformed) {
				t.Errorf("Metadata v1 cut at %d: err %v, want ErrMalformed", n, err)
			}
		}
	})

	t.Run("bad client id length", func(t *testing.T) {
		for _, n := range []int16{-2, -32768, int16(len(good)), 32767} {
			p := clone(good)
			binary.BigEndian.PutUint16(p[8:], uint16(n))
			if _, err := wire.ParseRequestHeader(p); !errors.Is(err, wire.ErrMalformed) {
				t.Errorf("client id length %d: err %v, want ErrMalformed", n, err)
			}
		}
		// The longest length that still fits leaves no room for the tag
		// section of a flexible header.
		p := clone(good)
		binary.BigEndian.PutUint16(p[8:], uint16(len(p)-10))
		if _, err := wire.ParseRequestHeader(p); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("client id swallowing the tags: err %v", err)
		}
	})
}
