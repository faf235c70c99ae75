package wire

import (
	"encoding/binary"
	"fmt"
)

// ProduceAcks returns the acks field of a Produce request payload without
// touching its records. acks=0 is the one request with no response.
func ProduceAcks(p []byte, h RequestHeader) (int16, error) {
	off, err := produceAcksOffset(p, h)
	if err != nil {
		return 0, err
	}
	if off+2 > len(p) {
		return 0, ErrShortFrame
	}
	return int16(binary.BigEndian.Uint16(p[off:])), nil
}

// ProduceTimeout returns the timeout_ms field of a Produce request payload:
// how long the broker may wait for replication before answering.
func ProduceTimeout(p []byte, h RequestHeader) (int32, error) {
	off, err := produceAcksOffset(p, h)
	if err != nil {
		return 0, err
	}
	if off+6 > len(p) {
		return 0, ErrShortFrame
	}
	return int32(binary.BigEndian.Uint32(p[off+2:])), nil
}

// produceAcksOffset is where acks sits, after the transactional id.
func produceAcksOffset(p []byte, h RequestHeader) (int, error) {
	off := h.BodyOffset
	if h.Version >= 3 { // transactional_id comes first
		if h.API.Flexible(h.Version) {
			n, o, err := uvarint(p, off)
			if err != nil {
				return 0, err
			}
			off = o
			if n > 0 {
				off += int(n) - 1
			}
		} else {
			if off+2 > len(p) {
				return 0, ErrShortFrame
			}
			n := int(int16(binary.BigEndian.Uint16(p[off:])))
			off += 2
			if n > 0 {
				off += n
			} else if n < -1 {
				return 0, fmt.Errorf("%w: transactional id length %d", ErrMalformed, n)
			}
		}
	}
	if off < 0 {
		return 0, ErrShortFrame
	}
	return off, nil
}
