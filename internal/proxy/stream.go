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

func (st *fetchStream) uvarint() uint32 {
	var x uint32
	for shift := uint(0); shift < 35; shift += 7 {
		b := st.read(1)
		if b == nil {
			return 0
		}
		x |= uint32(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			return x
		}
	}
	st.fail(fmt.Errorf("%w: varint overflow", wire.ErrMalformed))
	return 0
}

func (st *fetchStream) tags() {
	for n := st.uvarint(); n > 0 && st.err == nil; n-- {
		st.uvarint()
		st.read(int(st.uvarint()))
	}
}

// compactLen reads a compact array or bytes length (null reads as 0).
func (st *fetchStream) compactLen() int {
	n := int(st.uvarint()) - 1
	if n < 0 {
		return 0
	}
	return n
}

// length reads an array, string or bytes length in either encoding (null
// reads as 0): classic arrays and bytes have an int32 length, strings an
// int16 one (short: true).
func (st *fetchStream) length(flex, short bool) int {
	if flex {
		return st.compactLen()
	}
	var n int
	if short {
		if b := st.read(2); b != nil {
			n = int(int16(uint16(b[0])<<8 | uint16(b[1])))
		}
	} else if b := st.read(4); b != nil {
		n = int(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])))
	}
	return max(n, 0)
}

func (st *fetchStream) flush() {
	if st.err != nil || len(st.stage) == 0 {
		return
	}
	if _, err := st.s.client.Write(st.stage); err != nil {
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
		if _, err := s.client.Write(p); err != nil {
			st.fail(errClientWrite{err})
			return
		}
		s.ur.Discard(b)
		st.left -= b
		k -= b
	}
	if k > 0 {
		if _, err := copyN(s.client, s.upstream, int64(k)); err != nil {
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
	st := &fetchStream{s: s, left: n, stage: append(s.stage[:0], sz[:]...)}
	defer func() { s.stage = st.stage[:0] }()
	ver := pr.req.Version
	if corr := st.read(4); corr != nil {
		if err := checkCorrelation(corr, pr); err != nil {
			return ReasonUpstreamProtocol, err
		}
	}
	if pr.req.Flexible {
		st.tags()
	}
	t := s.throttleFor(pr, n)
	pr.throttle = t
	if ver >= 1 {
		if b := st.read(4); b != nil && t > 0 {
			putThrottle(b, throttleMs(t))
		}
	}
	if ver < 12 && pr.topicBytes == nil {
		// No tagged fields, so nothing after the head can carry an
		// address: the rest goes through verbatim.
		st.copyRaw(st.left)
	} else {
		// Walked: for the tags of v12+, and for the topics' record
		// bytes when a filter counts them (Verdict.TopicBytes).
		flex := ver >= 12
		if ver >= 7 {
			st.read(2 + 4) // error code, session id
		}
		part := 4 + 2 + 8 // partition, error, hwm
		if ver >= 4 {
			part += 8 // last stable offset
		}
		if ver >= 5 {
			part += 8 // log start offset
		}
		for topics := st.length(flex, false); topics > 0 && st.err == nil; topics-- {
			var id [16]byte
			var name []byte
			if ver >= 13 {
				if b := st.read(16); b != nil {
					id = [16]byte(b)
				}
			} else if b := st.read(st.length(flex, true)); b != nil {
				// The stage is reused while the records pass.
				s.rname = append(s.rname[:0], b...)
				name = s.rname
			}
			records := 0
			for parts := st.length(flex, false); parts > 0 && st.err == nil; parts-- {
				st.read(part)
				if ver >= 4 {
					for a := st.length(flex, false); a > 0 && st.err == nil; a-- {
						st.read(16) // producer id, first offset
						if flex {
							st.tags()
						}
					}
				}
				if ver >= 11 {
					st.read(4) // preferred read replica
				}
				k := st.length(flex, false)
				st.records(k)
				records += k
				if flex {
					st.tags()
				}
			}
			if flex {
				st.tags()
			}
			if pr.topicBytes != nil && st.err == nil {
				pr.topicBytes(name, id, records)
			}
		}
	}
	if ver >= 12 {
		at := len(st.stage)
		st.tags()
		if st.err == nil && st.stage[at] != 0 {
			fixed, err := wire.RewriteFetchTagsSameLength(st.stage[at:], ver, s.ln)
			if err != nil {
				return ReasonUpstreamProtocol, err
			}
			copy(st.stage[at:], fixed)
		}
	}
	if st.err == nil && st.left != 0 {
		st.fail(fmt.Errorf("%w: %d bytes after the end of a fetch response", wire.ErrMalformed, st.left))
	}
	st.flush()
	if st.err != nil {
		if _, ok := st.err.(errClientWrite); ok {
			return ReasonClientClosed, st.err
		}
		return upstreamReason(st.err), st.err
	}
	if t > 0 {
		s.mute(time.Now().Add(t))
	}
	return "", nil
}
