package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestHeader is the parsed request header of one frame. ClientID aliases
// the frame's buffer: copy it before the buffer is released.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      []byte // nil for a null client id; Kafka treats it as ""
	API           API
	// BodyOffset is where the body starts, counted from the start of the
	// payload (after the 4-byte size prefix).
	BodyOffset int
}

// ParseRequestHeader parses the header of payload p (a frame without its
// size prefix). It fails for keys kmsg does not know and for versions it
// cannot parse, except ApiVersions, whose too-new versions a gateway must
// answer (KIP-511) rather than refuse.
func ParseRequestHeader(p []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(p) < 8 {
		return h, ErrShortFrame
	}
	h.Key = int16(binary.BigEndian.Uint16(p))
	h.Version = int16(binary.BigEndian.Uint16(p[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(p[4:]))
	h.API = Lookup(h.Key)
	if !h.API.Known {
		return h, fmt.Errorf("%w %d", ErrUnknownAPIKey, h.Key)
	}
	if h.Version < 0 || (h.Version > h.API.Max && h.Key != int16(kmsg.ApiVersions)) {
		return h, fmt.Errorf("%w: %s v%d (newest known v%d)", ErrUnsupportedVers, h.API.Name, h.Version, h.API.Max)
	}
	if h.Key == int16(kmsg.ControlledShutdown) && h.Version == 0 {
		h.BodyOffset = 8 // the only request with a v0 header
		return h, nil
	}
	if len(p) < 10 {
		return h, ErrShortFrame
	}
	// client_id is a classic nullable string even in flexible headers.
	n := int(int16(binary.BigEndian.Uint16(p[8:])))
	off := 10
	switch {
	case n == -1:
	case n < -1 || off+n > len(p):
		return h, fmt.Errorf("%w: client id length %d", ErrMalformed, n)
	default:
		h.ClientID = p[off : off+n : off+n]
		off += n
	}
	if h.API.Flexible(h.Version) {
		end, err := skipTags(p, off)
		if err != nil {
			return h, err
		}
		off = end
	}
	h.BodyOffset = off
	return h, nil
}

// ResponseBodyOffset returns where the body of response payload p starts:
// after the correlation id and, for flexible responses other than
// ApiVersions, the header tag section.
func ResponseBodyOffset(p []byte, key int16, flexible bool) (int, error) {
	if len(p) < 4 {
		return 0, ErrShortFrame
	}
	if !flexible || key == int16(kmsg.ApiVersions) {
		return 4, nil
	}
	return skipTags(p, 4)
}

// CorrelationID returns the correlation id of a response payload.
func CorrelationID(p []byte) int32 {
	return int32(binary.BigEndian.Uint32(p))
}
