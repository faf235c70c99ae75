package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

func TestApiVersionsMax(t *testing.T) {
	if want := kmsg.NewPtrApiVersionsRequest().MaxVersion(); wire.ApiVersionsMax != want {
		t.Fatalf("ApiVersionsMax = %d, want kmsg's %d", wire.ApiVersionsMax, want)
	}
}

type avKey = kmsg.ApiVersionsResponseApiKey

// upstreamApiVersions is what a broker newer than kmsg might advertise.
func upstreamApiVersions(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	resp.ThrottleMillis = 42
	resp.ApiKeys = []avKey{
		{ApiKey: 0, MinVersion: 0, MaxVersion: 99},   // clamped to 13
		{ApiKey: 1, MinVersion: 4, MaxVersion: 18},   // as is
		{ApiKey: 1000, MinVersion: 0, MaxVersion: 3}, // unknown: dropped
		{ApiKey: 3, MinVersion: 0, MaxVersion: 13},   // as is
		{ApiKey: 18, MinVersion: 0, MaxVersion: 7},   // clamped to 5
		{ApiKey: 17, MinVersion: 2, MaxVersion: 5},   // clamped to 1 < min: dropped
		{ApiKey: -1, MinVersion: 0, MaxVersion: 0},   // unknown: dropped
		{ApiKey: 60, MinVersion: 0, MaxVersion: 2},   // as is
		{ApiKey: 38, MinVersion: 0, MaxVersion: 3},   // dropped by the callback
		{ApiKey: wire.MaxKey + 1, MaxVersion: 1},     // unknown: dropped
		{ApiKey: 12, MinVersion: 5, MaxVersion: 4},   // min > max: dropped
		{ApiKey: 71, MinVersion: 0, MaxVersion: 0},   // dropped by the callback
		{ApiKey: 0x7fff, MinVersion: 0, MaxVersion: 0},
	}
	if version >= 3 {
		resp.ApiKeys[1].UnknownTags.Set(3, []byte("entry tag"))
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{
			{Name: "metadata.version", MinVersion: 1, MaxVersion: 27},
			{Name: "kraft.version", MinVersion: 0, MaxVersion: 1},
		}
		resp.FinalizedFeaturesEpoch = 31337
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{
			{Name: "metadata.version", MaxVersionLevel: 25, MinVersionLevel: 25},
			{Name: "kraft.version", MaxVersionLevel: 1, MinVersionLevel: 1},
		}
		resp.ZkMigrationReady = true
		resp.UnknownTags.Set(40, []byte("top-level tag"))
	}
	return resp
}

func TestRewriteApiVersions(t *testing.T) {
	for v := int16(0); v <= wire.ApiVersionsMax; v++ {
		up := upstreamApiVersions(v)
		buf := wire.EncodeResponse(0x11223344, reqFlexible(int16(kmsg.ApiVersions), v), up)
		// Decode what the client would have seen unchanged, then the
		// expected clamp of it.
		want := decodeResponse(t, buf.B, int16(kmsg.ApiVersions), v).(*kmsg.ApiVersionsResponse)
		want.ApiKeys = []avKey{
			{ApiKey: 0, MinVersion: 0, MaxVersion: 13},
			want.ApiKeys[1],
			{ApiKey: 3, MinVersion: 0, MaxVersion: 13},
			{ApiKey: 18, MinVersion: 0, MaxVersion: 5},
			{ApiKey: 60, MinVersion: 0, MaxVersion: 2},
		}

		var offered []int16
		drop := func(k int16) bool {
			offered = append(offered, k)
			return k == 38 || k == 71
		}
		if err := wire.RewriteApiVersions(buf, v, drop); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if wire.CorrelationID(buf.B[4:]) != 0x11223344 {
			t.Errorf("v%d: correlation id lost", v)
		}
		got := decodeResponse(t, buf.B, int16(kmsg.ApiVersions), v).(*kmsg.ApiVersionsResponse)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("v%d:\n got %+v\nwant %+v", v, got, want)
		}
		if v >= 1 && got.ThrottleMillis != 42 {
			t.Errorf("v%d: throttle %d not preserved", v, got.ThrottleMillis)
		}
		if v >= 3 && (len(got.SupportedFeatures) != 2 || got.FinalizedFeaturesEpoch != 31337 || len(got.FinalizedFeatures) != 2 || !got.ZkMigrationReady || got.UnknownTags.Len() != 1 || got.ApiKeys[1].UnknownTags.Len() != 1) {
			t.Errorf("v%d: feature tags not preserved: %+v", v, got)
		}
		exp := wire.EncodeResponse(0x11223344, true, want)
		if !bytes.Equal(buf.B, exp.B) {
			t.Errorf("v%d: frame differs from kmsg's encoding of the clamped response", v)
		}
		slices.Sort(offered)
		if !slices.Equal(offered, []int16{0, 1, 3, 12, 17, 18, 38, 60, 71}) {
			t.Errorf("v%d: drop offered %v, want every known key once", v, offered)
		}
		buf.Release()
		exp.Release()

		// No callback.
		buf = wire.EncodeResponse(1, false, upstreamApiVersions(v))
		if err := wire.RewriteApiVersions(buf, v, nil); err != nil {
			t.Fatalf("v%d, nil drop: %v", v, err)
		}
		got = decodeResponse(t, buf.B, int16(kmsg.ApiVersions), v).(*kmsg.ApiVersionsResponse)
		var keys []int16
		for _, k := range got.ApiKeys {
			keys = append(keys, k.ApiKey)
			if k.MinVersion > k.MaxVersion || k.MaxVersion > wire.Lookup(k.ApiKey).Max {
				t.Errorf("v%d: entry %+v not clamped", v, k)
			}
		}
		if !slices.Equal(keys, []int16{0, 1, 3, 18, 60, 38, 71}) {
			t.Errorf("v%d, nil drop: keys %v", v, keys)
		}
		buf.Release()
	}
}

func TestRewriteApiVersionsError35(t *testing.T) {
	for _, c := range []struct {
		keys, want []avKey
	}{
		{[]avKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 9}}, []avKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 5}}},
		{[]avKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}, []avKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}},
		{nil, nil}, // pre-2.4 brokers send no entry
	} {
		up := kmsg.NewPtrApiVersionsResponse()
		up.SetVersion(0)
		up.ErrorCode = 35
		up.ApiKeys = c.keys
		for _, v := range []int16{0, 1, 2, 3, 4, 5, 9} {
			buf := wire.EncodeResponse(99, reqFlexible(int16(kmsg.ApiVersions), v), up)
			// The ranges of APIs Tollgate answers itself are not added
			// to an error answer (KIP-511: ApiVersions alone, for the
			// client to retry; Kafka 3.9 answers franz-go's v5 so).
			telemetry := kmsg.ApiVersionsResponseApiKey{ApiKey: 71, MinVersion: 0, MaxVersion: 0}
			if err := wire.RewriteApiVersions(buf, v, func(int16) bool { return false }, telemetry); err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			// Still a v0 body, whatever the request version.
			want := kmsg.NewPtrApiVersionsResponse()
			want.SetVersion(0)
			want.ErrorCode = 35
			want.ApiKeys = c.want
			exp := wire.EncodeResponse(99, false, want)
			if !bytes.Equal(buf.B, exp.B) {
				t.Errorf("v%d, %d keys: got % x, want % x", v, len(c.keys), buf.B, exp.B)
			}
			if len(buf.B) != 4+4+6+6*len(c.keys) {
				t.Errorf("v%d: frame of %d bytes", v, len(buf.B))
			}
			buf.Release()
			exp.Release()
		}
	}
}

func TestRewriteApiVersionsMalformed(t *testing.T) {
	full := wire.EncodeResponse(5, true, upstreamApiVersions(3))
	for cut := 4; cut < len(full.B); cut++ {
		buf := pooled(full.B[:cut])
		err := wire.RewriteApiVersions(buf, 3, nil)
		switch {
		case cut < 4+6:
			if !errors.Is(err, wire.ErrShortFrame) {
				t.Errorf("cut at %d: %v, want ErrShortFrame", cut, err)
			}
		case err == nil:
			// kmsg tolerates a missing tag section at the very end only
			// if it decodes; then the result must decode too.
			if _, derr := tryDecodeResponse(buf.B, int16(kmsg.ApiVersions), 3); derr != nil {
				t.Errorf("cut at %d: rewrote into an undecodable frame: %v", cut, derr)
			}
		case !errors.Is(err, wire.ErrMalformed):
			t.Errorf("cut at %d: %v, want ErrMalformed", cut, err)
		}
		if err != nil && !bytes.Equal(buf.B, full.B[:cut]) {
			t.Errorf("cut at %d: failed rewrite changed the frame", cut)
		}
		buf.Release()
	}
}

func TestUnsupportedApiVersions(t *testing.T) {
	for _, max := range []int16{0, 3, wire.ApiVersionsMax} {
		buf := wire.UnsupportedApiVersions(-7, max)
		if len(buf.B) != 4+4+12 || binary.BigEndian.Uint32(buf.B) != 16 {
			t.Fatalf("max %d: frame of %d bytes, size prefix %d; want a v0 header and a 12-byte body", max, len(buf.B), binary.BigEndian.Uint32(buf.B))
		}
		if wire.CorrelationID(buf.B[4:]) != -7 {
			t.Errorf("max %d: correlation id %d", max, wire.CorrelationID(buf.B[4:]))
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0)
		if err := resp.ReadFrom(buf.B[8:]); err != nil {
			t.Fatal(err)
		}
		want := []avKey{{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: max}}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || !reflect.DeepEqual(resp.ApiKeys, want) {
			t.Errorf("max %d: %+v", max, resp)
		}
		exp := kmsg.NewPtrApiVersionsResponse()
		exp.SetVersion(0)
		exp.ErrorCode = 35
		exp.ApiKeys = want
		if !bytes.Equal(buf.B[8:], exp.AppendTo(nil)) {
			t.Errorf("max %d: body % x", max, buf.B[8:])
		}
		buf.Release()
	}
}

func TestClamp(t *testing.T) {
	resp := upstreamApiVersions(3)
	wire.Clamp(resp, func(k int16) bool { return k == 0 })
	var keys []int16
	for _, k := range resp.ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	if !slices.Equal(keys, []int16{1, 3, 18, 60, 38, 71}) || resp.ApiKeys[2].MaxVersion != 5 {
		t.Fatalf("Clamp: %+v", resp.ApiKeys)
	}
	// Min versions are never raised, even when Kafka advertises a min
	// below what it accepts (KAFKA-18659).
	resp.ApiKeys = []avKey{{ApiKey: 0, MinVersion: 0, MaxVersion: 13}}
	wire.Clamp(resp, nil)
	if resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 13 {
		t.Fatalf("Clamp changed a valid entry: %+v", resp.ApiKeys)
	}
	empty := kmsg.NewPtrApiVersionsResponse()
	wire.Clamp(empty, nil)
	if len(empty.ApiKeys) != 0 {
		t.Fatal("Clamp of nothing")
	}
}

func TestEncodeResponseHeader(t *testing.T) {
	for _, c := range []struct {
		resp kmsg.Response
		flex bool
	}{
		{kmsg.NewPtrMetadataResponse(), false},
		{kmsg.NewPtrMetadataResponse(), true},
		{kmsg.NewPtrApiVersionsResponse(), true}, // header v0 even when flexible
		{kmsg.NewPtrApiVersionsResponse(), false},
	} {
		v := int16(1)
		if c.flex {
			v = 12
			if c.resp.Key() == int16(kmsg.ApiVersions) {
				v = 4
			}
		}
		c.resp.SetVersion(v)
		body := c.resp.AppendTo(nil)
		buf := wire.EncodeResponse(1234, c.flex, c.resp)
		hdr := 4
		if c.flex && c.resp.Key() != int16(kmsg.ApiVersions) {
			hdr = 5
			if buf.B[8] != 0 {
				t.Errorf("%s v%d: header tag byte %d", kmsg.NameForKey(c.resp.Key()), v, buf.B[8])
			}
		}
		if int(binary.BigEndian.Uint32(buf.B)) != len(buf.B)-4 || wire.CorrelationID(buf.B[4:]) != 1234 || !bytes.Equal(buf.B[4+hdr:], body) {
			t.Errorf("%s v%d flexible %v: frame % x", kmsg.NameForKey(c.resp.Key()), v, c.flex, buf.B)
		}
		off, err := wire.ResponseBodyOffset(buf.B[4:], c.resp.Key(), c.flex)
		if err != nil || off != hdr {
			t.Errorf("%s v%d: ResponseBodyOffset %d, %v; want %d", kmsg.NameForKey(c.resp.Key()), v, off, err, hdr)
		}
		buf.Release()
	}
	if _, err := wire.ResponseBodyOffset([]byte{0, 0, 1}, 3, false); !errors.Is(err, wire.ErrShortFrame) {
		t.Errorf("short response: %v", err)
	}
	if _, err := wire.ResponseBodyOffset([]byte{0, 0, 0, 1}, 3, true); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("flexible response without header tags: %v", err)
	}
}

// An override made by Floor adds its key when the broker has none and
// keeps the broker's range when it has one; a plain override replaces it.
func TestRewriteApiVersionsFloor(t *testing.T) {
	for _, c := range []struct {
		name string
		up   []avKey
		want avKey
	}{
		{"broker without the key", []avKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}, avKey{ApiKey: 74, MinVersion: 0, MaxVersion: 0}},
		{"broker with the key", []avKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}, {ApiKey: 74, MinVersion: 0, MaxVersion: 1}}, avKey{ApiKey: 74, MinVersion: 0, MaxVersion: 1}},
	} {
		up := kmsg.NewPtrApiVersionsResponse()
		up.SetVersion(3)
		up.ApiKeys = c.up
		buf := wire.EncodeResponse(1, reqFlexible(int16(kmsg.ApiVersions), 3), up)
		if err := wire.RewriteApiVersions(buf, 3, nil, wire.Floor(74, 0)); err != nil {
			t.Fatal(err)
		}
		got := kmsg.NewPtrApiVersionsResponse()
		got.SetVersion(3)
		if err := got.ReadFrom(buf.B[4+4:]); err != nil { // ApiVersions answers have a v0 header
			t.Fatal(err)
		}
		var k74 []avKey
		for _, k := range got.ApiKeys {
			if k.ApiKey == 74 {
				k74 = append(k74, k)
			}
		}
		if len(k74) != 1 || k74[0].MinVersion != c.want.MinVersion || k74[0].MaxVersion != c.want.MaxVersion {
			t.Errorf("%s: key 74 advertised as %+v, want %+v", c.name, k74, c.want)
		}
		buf.Release()
	}
}
