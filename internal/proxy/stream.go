package proxy

import (
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/internal/wire"
)

// Large Fetch responses are streamed: the small fields are staged and
// checked as they pass, the record data between them is copied socket to
// socket (splice on Linux) without entering user space, and throttle_time_ms
// is patched in the head before anything is written. The only field after
// the records that can carry an address, the top-level tag section (node
// endpoints, KIP-951), is rewritten to the same length.

const (
	// stageFlush is when staged small fields are written out even if no
	// large record block follows.
	stageFlush = 64 << 10
	// spliceMin is the smallest record block worth a splice; smaller ones
	// are staged with the fields around them.
	spliceMin = 16 << 10
)

type fetchStream struct {
	s     *session
	left  int // payload bytes not yet read from upstream
	stage []byte
	err   error
}

func (st *fetchStream) fail(err error) {
	if st.err == nil {
		st.err = err
	}
}

// read stages the next k payload bytes and returns them.
func (st *fetchStream) read(k int) []byte {
	if st.err != nil {
		return nil
	}
	if k < 0 || k > st.left {
		st.fail(fmt.Errorf("%w: fetch response field of %d bytes overruns the frame", wire.ErrMalformed, k))
		return nil
	}
	at := len(st.stage)
	st.stage = append(st.stage, make([]byte, k)...)
	if _, err := io.ReadFull(st.s.ur, st.stage[at:]); err != nil {
		st.fail(err)
		return nil
	}
	st.left -= k
	return st.stage[at:]
}

var _ wire.Source = (*fetchStream)(nil)

// Field implements wire.Source: the field is staged.
func (st *fetchStream) Field(k int) []byte { return st.read(k) }

// Peek implements wire.Source.
func (st *fetchStream) Peek(k int) []byte {
	if st.err != nil {
		return nil
	}
	b, err := st.s.ur.Peek(min(k, st.left))
	if err != nil {
		st.fail(err)
		return nil
	}
	return b
}

// Skip implements wire.Source: record blocks (and tag values) are staged
// or spliced by their size.
func (st *fetchStream) Skip(k int) bool {
	st.records(k)
	return st.err == nil
}

func (st *fetchStream) flush() {
	if st.err != nil || len(st.stage) == 0 {
		return
	}
	if err := st.s.writeClient(st.stage); err != nil {
		st.fail(errClientWrite{err})
		return
	}
	st.stage = st.stage[:0]
}

// copyRaw flushes what is staged, then copies k payload bytes from
// upstream to the client.
func (st *fetchStream) copyRaw(k int) {
	if k > st.left {
		st.fail(fmt.Errorf("%w: record block of %d bytes overruns the frame", wire.ErrMalformed, k))
	}
	st.flush()
	if st.err != nil || k == 0 {
		return
	}
	s := st.s
	if b := min(s.ur.Buffered(), k); b > 0 {
		p, _ := s.ur.Peek(b)
		if err := s.writeClient(p); err != nil {
			st.fail(errClientWrite{err})
			return
		}
		s.ur.Discard(b)
		st.left -= b
		k -= b
	}
	if k > 0 {
		if err := s.copyToClient(k); err != nil {
			st.fail(err)
			return
		}
		st.left -= k
	}
}

// records handles one record block of k bytes.
func (st *fetchStream) records(k int) {
	if k >= spliceMin {
		st.copyRaw(k)
		return
	}
	st.read(k)
	if len(st.stage) >= stageFlush {
		st.flush()
	}
}

type errClientWrite struct{ error }

func (e errClientWrite) Unwrap() error { return e.error }

// streamFetch forwards one large Fetch response of n payload bytes.
func (s *session) streamFetch(pr *pending, sz [4]byte, n int) (Reason, error) {
	st := &s.fstream
	*st = fetchStream{s: s, left: n, stage: append(s.stage[:0], sz[:]...)}
	defer func() { s.stage = st.stage[:0] }()
	ver := pr.req.Version
	if corr := st.read(4); corr != nil {
		if err := checkCorrelation(corr, pr); err != nil {
			return ReasonUpstreamProtocol, err
		}
	}
	if pr.req.Flexible && !wire.PassTags(st) {
		st.fail(fmt.Errorf("%w: fetch response header tags", wire.ErrMalformed))
	}
	t := s.throttleFor(pr, n)
	pr.throttle = t
	var w wire.FetchResponseWalk
	w.StartFrom(st, ver)
	if b := w.Throttle(); b != nil && t > 0 {
		putThrottle(b, throttleMs(t))
	}
	if ver < 12 && pr.topicBytes == nil && pr.topics == nil {
		// No tagged fields, so nothing after the head can carry an
		// address: the rest goes through verbatim.
		st.copyRaw(st.left)
	} else if r, err := s.streamFetchTopics(st, &w, pr); err != nil {
		return r, err
	}
	if st.err == nil && st.left != 0 {
		st.fail(fmt.Errorf("%w: %d bytes after the end of a fetch response", wire.ErrMalformed, st.left))
	}
	st.flush()
	if st.err != nil {
		if _, ok := st.err.(errClientWrite); ok {
			return writeReason(st.err), st.err
		}
		return upstreamReason(st.err), st.err
	}
	if t > 0 {
		s.mute(time.Now().Add(t))
	}
	return "", nil
}

// streamFetchTopics walks the topics of a streamed Fetch response: for the
// tags of v12+ (the node endpoints rewritten to the same length), and for
// the topics' record bytes when a filter counts them (Verdict.TopicBytes).
func (s *session) streamFetchTopics(st *fetchStream, w *wire.FetchResponseWalk, pr *pending) (Reason, error) {
	for w.NextTopic() {
		name, id := w.Topic()
		if name != nil {
			// The stage is reused while the records pass.
			s.rname = append(s.rname[:0], name...)
			name = s.rname
		}
		if pr.topics != nil && w.Ok() && !pr.topics(name, id) {
			// Nothing of this topic has been written: it is still staged.
			err := fmt.Errorf("a streamed fetch response carries a topic the request may not read")
			st.fail(err)
			return ReasonRefused, err
		}
		for w.NextPartition() {
		}
		if pr.topicBytes != nil && w.Ok() {
			pr.topicBytes(name, id, w.TopicRecords())
		}
	}
	at := len(st.stage)
	if w.Done() && pr.req.Version >= 12 && st.stage[at] != 0 {
		fixed, err := wire.RewriteFetchTagsSameLength(st.stage[at:], pr.req.Version, s.ln)
		if err != nil {
			return ReasonUpstreamProtocol, err
		}
		copy(st.stage[at:], fixed)
	}
	if !w.Ok() {
		st.fail(fmt.Errorf("%w: streamed fetch response", wire.ErrMalformed))
	}
	return "", nil
}
