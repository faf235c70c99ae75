package testkit

import "encoding/binary"

// FrameHeads follows one direction of a Kafka connection — a stream of
// size-prefixed frames, in pieces as Write or Read see them — and hands
// the first Head bytes of each frame (the size prefix included: 12 for a
// request's size, key, version and correlation id, 8 for a response's
// size and correlation id) to a callback, for tests and benchmarks that
// count what passes a connection.
type FrameHeads struct {
	Head int // at most 16
	buf  [16]byte
	have int
	skip int // bytes of the current frame still to pass
}

// Feed takes the next bytes of the stream; frame gets each frame's head
// and the frame's size after the prefix.
func (f *FrameHeads) Feed(p []byte, frame func(head []byte, size int)) {
	for len(p) > 0 {
		if f.skip > 0 {
			n := min(f.skip, len(p))
			f.skip -= n
			p = p[n:]
			continue
		}
		n := copy(f.buf[f.have:f.Head], p)
		f.have += n
		p = p[n:]
		if f.have < f.Head {
			return
		}
		size := int(int32(binary.BigEndian.Uint32(f.buf[:4])))
		frame(f.buf[:f.Head], size)
		f.skip = max(size+4-f.Head, 0)
		f.have = 0
	}
}
