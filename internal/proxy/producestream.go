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
// v13), walked by wire.ProduceWalk over the stream (a wire.Source).

// errTopicRefused is a streamed Produce that named a topic a filter
// refused.
var errTopicRefused = errors.New("a streamed Produce names a topic the gateway refuses")

type produceStream struct {
	s    *session
	sz   []byte // the size prefix, written with the first bytes
	left int    // payload bytes neither examined nor copied yet
	pend int    // examined bytes at the front of the read buffer, not yet written
	err  error
}

var _ wire.Source = (*produceStream)(nil)

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

// Field implements wire.Source: the examined bytes stay buffered until
// the next flush or copy.
func (st *produceStream) Field(k int) []byte { return st.field(k) }

// Peek implements wire.Source.
func (st *produceStream) Peek(k int) []byte {
	if st.err != nil {
		return nil
	}
	k = min(k, st.left)
	if st.pend+k > readBufSize {
		st.flush()
	}
	b, err := st.s.cr.Peek(st.pend + k)
	if err != nil {
		st.fail(err)
		return nil
	}
	return b[st.pend:]
}

// Skip implements wire.Source: the records, and tag values, are copied.
func (st *produceStream) Skip(k int) bool {
	st.copy(k)
	return st.err == nil
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
	st := &s.pstream
	*st = produceStream{s: s, sz: sz[:], left: n}
	st.field(req.BodyOffset) // the header, parsed already
	var w wire.ProduceWalk
	w.StartFrom(st, req.Version)
	for w.NextTopic() {
		name, id := w.Topic()
		if check != nil && !check(name, id) {
			return ReasonRefused, errTopicRefused
		}
		if sizes != nil && name != nil {
			// The read buffer is reused while the records pass.
			s.wname = append(s.wname[:0], name...)
			name = s.wname
		}
		for w.NextPartition() {
		}
		if sizes != nil && w.Ok() {
			sizes(name, id, w.TopicRecords())
		}
	}
	if !w.Ok() {
		st.fail(fmt.Errorf("%w: streamed produce request", wire.ErrMalformed))
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
