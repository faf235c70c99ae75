package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/tollgate/tollgate/internal/wire"
)

// A streamed Produce whose topics a filter must see (Verdict.Topics) is
// forwarded by walking its small fields where they lie in the read buffer
// — the transactional id, acks, timeout, each topic's name or id, each
// partition's index and records length, the tag sections — and copying
// each partition's records as they come: from the read buffer when they
// are already there, socket to socket (splice on Linux) for the rest. A
// topic's name is checked before any byte of it, or after it, is written
// upstream; the bytes before it are, so a refused topic leaves the broker
// an incomplete frame, which it never handles, and the session closes.
// The layout is kmsg's ProduceRequest (flexible from v9, topic ids from
// v13).

// errTopicRefused is a streamed Produce that named a topic a filter
// refused.
var errTopicRefused = errors.New("a streamed Produce names a topic the gateway refuses")

type produceStream struct {
	s     *session
	sz    []byte // the size prefix, written with the first bytes
	left  int    // payload bytes neither examined nor copied yet
	pend  int    // examined bytes at the front of the read buffer, not yet written
	check func(name []byte, id [16]byte) bool
	err   error
}

func (st *produceStream) fail(err error) {
	if st.err == nil {
		st.err = err
	}
}

// field examines the next k payload bytes, which stay buffered until the
// next flush or copy.
func (st *produceStream) field(k int) []byte {
	if st.err != nil {
		return nil
	}
	if k < 0 || k > st.left {
		st.fail(fmt.Errorf("%w: produce field of %d bytes overruns the frame", wire.ErrMalformed, k))
		return nil
	}
	if k == 0 {
		return []byte{}
	}
	if st.pend+k > readBufSize {
		st.flush()
		if k > readBufSize {
			st.fail(fmt.Errorf("%w: produce field of %d bytes", wire.ErrMalformed, k))
			return nil
		}
	}
	b, err := st.s.cr.Peek(st.pend + k)
	if err != nil {
		st.fail(err)
		return nil
	}
	b = b[st.pend:]
	st.pend += k
	st.left -= k
	return b
}

func (st *produceStream) i16() int {
	b := st.field(2)
	if b == nil {
		return 0
	}
	return int(int16(uint16(b[0])<<8 | uint16(b[1])))
}

func (st *produceStream) i32() int {
	b := st.field(4)
	if b == nil {
		return 0
	}
	return int(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
}

func (st *produceStream) uvarint() int {
	var x uint32
	for shift := uint(0); shift < 35; shift += 7 {
		b := st.field(1)
		if b == nil {
			return 0
		}
		x |= uint32(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			return int(x)
		}
	}
	st.fail(fmt.Errorf("%w: varint overflow", wire.ErrMalformed))
	return 0
}

// length reads a string, bytes or array length; -1 is null.
func (st *produceStream) length(flex, array bool) int {
	switch {
	case flex:
		return st.uvarint() - 1
	case array:
		return st.i32()
	default:
		return st.i16()
	}
}

func (st *produceStream) tags() {
	for n := st.uvarint(); n > 0 && st.err == nil; n-- {
		st.uvarint()
		st.copy(st.uvarint())
	}
}

// flush writes the examined bytes upstream.
func (st *produceStream) flush() {
	if st.err != nil || (st.pend == 0 && st.sz == nil) {
		return
	}
	var b []byte
	if st.pend > 0 {
		var err error
		if b, err = st.s.cr.Peek(st.pend); err != nil {
			st.fail(err)
			return
		}
	}
	bufs := net.Buffers{st.sz, b}
	if _, err := bufs.WriteTo(st.s.upstream); err != nil {
		st.fail(errUpstreamWrite{err})
		return
	}
	st.sz = nil
	st.s.cr.Discard(st.pend)
	st.pend = 0
}

// copy forwards the next k payload bytes unexamined: from the read buffer
// when they are there, the rest socket to socket.
func (st *produceStream) copy(k int) {
	if st.err != nil {
		return
	}
	if k < 0 || k > st.left {
		st.fail(fmt.Errorf("%w: produce records of %d bytes overrun the frame", wire.ErrMalformed, k))
		return
	}
	if b := st.s.cr.Buffered(); st.pend+k <= b {
		st.pend += k
		st.left -= k
		return
	}
	// Everything buffered belongs to these bytes: write it out with
	// what was examined before, then copy the rest from the socket.
	from := st.s.cr.Buffered() - st.pend
	st.pend += from
	st.left -= from
	st.flush()
	rest := int64(k - from)
	if st.err != nil || rest == 0 {
		return
	}
	if _, err := copyN(st.s.upstream, st.s.client, rest); err != nil {
		if errors.Is(err, io.EOF) {
			st.fail(fmt.Errorf("client closed mid-frame: %w", err))
		} else {
			st.fail(errUpstreamWrite{err})
		}
		return
	}
	st.left -= int(rest)
}

type errUpstreamWrite struct{ error }

func (e errUpstreamWrite) Unwrap() error { return e.error }

// streamProduceChecked forwards a streamed Produce of n payload bytes whose
// head req was parsed from, showing check (if any) each topic before it is
// written, and sizes (if any) each topic's record bytes once they are.
func (s *session) streamProduceChecked(sz [4]byte, n int, req *Request, check func([]byte, [16]byte) bool,
	sizes func([]byte, [16]byte, int)) (Reason, error) {
	st := &produceStream{s: s, sz: sz[:], left: n, check: check}
	ver, flex := req.Version, req.Flexible
	st.field(req.BodyOffset) // the header, parsed already
	if ver >= 3 {
		st.field(max(st.length(flex, false), 0)) // transactional id
	}
	st.field(2 + 4) // acks, timeout
	var none [16]byte
	for topics := st.length(flex, true); topics > 0 && st.err == nil; topics-- {
		ok := true
		var id [16]byte
		var name []byte
		if ver >= 13 {
			if b := st.field(16); b != nil {
				id = [16]byte(b)
				if check != nil {
					ok = check(nil, id)
				}
			}
		} else if name = st.field(max(st.length(flex, false), 0)); name != nil {
			if check != nil {
				ok = check(name, none)
			}
			if sizes != nil {
				// The read buffer is reused while the records pass.
				s.wname = append(s.wname[:0], name...)
				name = s.wname
			}
		}
		if st.err == nil && !ok {
			return ReasonRefused, errTopicRefused
		}
		records := 0
		for parts := st.length(flex, true); parts > 0 && st.err == nil; parts-- {
			st.field(4) // partition index
			k := max(st.length(flex, true), 0)
			st.copy(k)
			records += k
			if flex {
				st.tags()
			}
		}
		if flex {
			st.tags()
		}
		if sizes != nil && st.err == nil {
			sizes(name, id, records)
		}
	}
	st.copy(st.left) // the request's tag section
	st.flush()
	switch err := st.err; {
	case err == nil:
		return "", nil
	case errors.As(err, new(errUpstreamWrite)):
		return ReasonUpstreamClosed, fmt.Errorf("stream to upstream: %w", err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonClientClosed, err
	default:
		return clientReason(err), err
	}
}
