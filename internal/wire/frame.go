package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrame is Kafka's socket.request.max.bytes default (100 MiB).
const DefaultMaxFrame = 104857600

// Errors that describe why a frame was refused. Callers classify with
// errors.Is and turn them into a connection close reason.
var (
	ErrFrameTooLarge   = errors.New("frame larger than socket.request.max.bytes")
	ErrNegativeSize    = errors.New("negative frame size")
	ErrTLSOnPlaintext  = errors.New("TLS handshake on a plaintext listener")
	ErrShortFrame      = errors.New("frame too short for its header")
	ErrUnknownAPIKey   = errors.New("unknown API key")
	ErrUnsupportedVers = errors.New("unsupported API version")
	ErrMalformed       = errors.New("malformed message")
)

// ReadFrame reads one size-prefixed frame from r into a pooled buffer. The
// returned B holds the 4-byte size prefix followed by the payload, so it can
// be written on unchanged. max bounds the payload size; a TLS record header
// in place of a size is reported as ErrTLSOnPlaintext.
func ReadFrame(r io.Reader, max int32) (*Buffer, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if err := checkSize(sz, n, max); err != nil {
		return nil, err
	}
	b := GetBuffer(4 + int(n))
	copy(b.B, sz[:])
	if _, err := io.ReadFull(r, b.B[4:]); err != nil {
		b.Release()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

func checkSize(sz [4]byte, n, max int32) error {
	// A TLS record starts with content type 0x16 (handshake) or 0x15
	// (alert) and major version 3; read as a size it is hundreds of MiB.
	if (sz[0] == 0x16 || sz[0] == 0x15) && sz[1] == 0x03 {
		return ErrTLSOnPlaintext
	}
	if n < 0 {
		return fmt.Errorf("%w: %d", ErrNegativeSize, n)
	}
	if n > max {
		return fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	return nil
}

// FrameSize checks a frame's 4-byte size prefix and returns the payload
// size. It refuses what ReadFrame refuses, without reading further.
func FrameSize(sz [4]byte, max int32) (int, error) {
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if err := checkSize(sz, n, max); err != nil {
		return 0, err
	}
	return int(n), nil
}
