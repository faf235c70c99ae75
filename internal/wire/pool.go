package wire

import (
	"math/bits"
	"sync"
)

// Buffers come in power-of-two size classes from 512 B to 128 MiB. A frame
// is read into the smallest class that holds it, so a 100-byte Metadata
// request and a 50 MiB Fetch response do not share (and pin) one size.
const (
	minClassShift = 9  // 512 B
	maxClassShift = 27 // 128 MiB
)

var classes [maxClassShift - minClassShift + 1]sync.Pool

// Buffer is a pooled byte slice. B is valid until Release.
type Buffer struct {
	B     []byte
	class int8 // -1: not pooled (larger than the largest class)
}

// GetBuffer returns a buffer whose B has length n.
func GetBuffer(n int) *Buffer {
	c := classFor(n)
	if c < 0 {
		return &Buffer{B: make([]byte, n), class: -1}
	}
	if v := classes[c].Get(); v != nil {
		b := v.(*Buffer)
		b.B = b.B[:n]
		return b
	}
	return &Buffer{B: make([]byte, n, 1<<(c+minClassShift)), class: int8(c)}
}

// Release returns b to its pool. b must not be used afterwards.
func (b *Buffer) Release() {
	if b == nil || b.class < 0 {
		return
	}
	// B may no longer be the slice GetBuffer made: grown by append
	// (EncodeResponse, ReplaceBody) or set by a caller. File it under the
	// largest class its capacity fills, so that the pool never hands out a
	// slice shorter than asked for nor pins a big one in a small class.
	c := bits.Len(uint(cap(b.B))) - 1 - minClassShift
	if c < 0 || c > maxClassShift-minClassShift {
		return
	}
	b.class = int8(c)
	b.B = b.B[:0]
	classes[c].Put(b)
}

// Grow makes room for n more bytes past len(b.B), moving to a larger class
// if needed; the contents are kept.
func (b *Buffer) Grow(n int) {
	need := len(b.B) + n
	if need <= cap(b.B) {
		return
	}
	nb := GetBuffer(need)
	copy(nb.B, b.B)
	nb.B = nb.B[:len(b.B)]
	old := *b
	*b = *nb
	nb.B, nb.class = old.B, old.class
	nb.Release()
}

func classFor(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > maxClassShift {
		return -1
	}
	return shift - minClassShift
}
