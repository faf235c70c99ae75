package wire

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersionsMax is the newest ApiVersions version the gateway can decode.
var ApiVersionsMax = Lookup(int16(kmsg.ApiVersions)).Max

// Clamp limits an ApiVersions response so that clients only negotiate what
// the gateway can parse: keys kmsg does not know are dropped (their header
// layout is unknowable), every max is lowered to kmsg's, entries left empty
// are dropped, and drop lets the caller hide keys it refuses to carry.
// Min versions are never raised (Kafka 4 advertises Produce min 0 on
// purpose, KAFKA-18659).
func Clamp(resp *kmsg.ApiVersionsResponse, drop func(key int16) bool) {
	keys := resp.ApiKeys[:0]
	for _, k := range resp.ApiKeys {
		a := Lookup(k.ApiKey)
		if !a.Known || (drop != nil && drop(k.ApiKey)) {
			continue
		}
		if k.MaxVersion > a.Max {
			k.MaxVersion = a.Max
		}
		if k.MinVersion > k.MaxVersion {
			continue
		}
		keys = append(keys, k)
	}
	resp.ApiKeys = keys
}

// RewriteApiVersions decodes the ApiVersions response frame in buf, clamps
// it, applies the overrides and re-encodes it at the same version. An
// override replaces the broker's range of its key (added when the broker
// has none); one made by Floor only adds its range when the broker has
// none, and keeps the broker's otherwise. A body that starts with error
// 35 is in v0 format whatever the request version (KIP-511) and is decoded
// as such.
func RewriteApiVersions(buf *Buffer, version int16, drop func(key int16) bool, override ...kmsg.ApiVersionsResponseApiKey) error {
	p := buf.B[4:]
	if len(p) < 6 {
		return ErrShortFrame
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	if int16(binary.BigEndian.Uint16(p[4:])) == kerr.UnsupportedVersion.Code {
		resp.SetVersion(0)
	}
	if err := resp.ReadFrom(p[4:]); err != nil {
		return fmt.Errorf("%w: ApiVersions v%d: %v", ErrMalformed, resp.Version, err)
	}
	Clamp(resp, drop)
	if resp.ErrorCode != 0 {
		// KIP-511's answer to a version the broker does not know (a
		// client newer than the broker: ApiVersions v5 to Kafka 3.9) lists
		// ApiVersions alone, so that the client retries at that version;
		// the ranges of the APIs Tollgate answers belong in the answer to
		// the retry. Added here, they made franz-go take the error answer
		// as the whole list and send versions the broker did not have.
		ReplaceBody(buf, 4, resp)
		return nil
	}
	for _, o := range override {
		i := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == o.ApiKey })
		floor := o.MinVersion < 0
		if floor {
			o.MinVersion = 0
		}
		switch {
		case i < 0:
			resp.ApiKeys = append(resp.ApiKeys, o)
		case !floor:
			resp.ApiKeys[i].MinVersion, resp.ApiKeys[i].MaxVersion = o.MinVersion, o.MaxVersion
		}
	}
	ReplaceBody(buf, 4, resp)
	return nil
}

// Floor is an override of RewriteApiVersions advertising key from v0 to
// max only when the broker does not advertise it.
func Floor(key, max int16) kmsg.ApiVersionsResponseApiKey {
	return kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: -1, MaxVersion: max}
}

// UnsupportedApiVersions builds the KIP-511 answer to an ApiVersions request
// newer than the gateway can decode: a v0 header and a v0 body with
// UNSUPPORTED_VERSION and the one entry {18, 0, max}, so the client retries
// at max.
func UnsupportedApiVersions(correlationID int32, max int16) *Buffer {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: max}}
	return EncodeResponse(correlationID, false, resp)
}

// EncodeResponse builds a response frame (size prefix, correlation id, the
// header tag byte iff flexible and not ApiVersions, body) with kmsg.
func EncodeResponse(correlationID int32, flexible bool, resp kmsg.Response) *Buffer {
	b := GetBuffer(8)
	binary.BigEndian.PutUint32(b.B[4:], uint32(correlationID))
	if flexible && resp.Key() != int16(kmsg.ApiVersions) {
		b.B = append(b.B, 0)
	}
	b.B = resp.AppendTo(b.B)
	binary.BigEndian.PutUint32(b.B, uint32(len(b.B)-4))
	return b
}
