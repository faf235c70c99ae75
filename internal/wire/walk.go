package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// The walks of this package read a message's small fields where they lie
// and pass its record batches by their length, never decoding the message
// nor copying it: one walk per message shape (produce.go: a Produce request
// and its response; fetch.go: a Fetch request, a Fetch or ShareFetch
// response), each resumable — the caller pulls topic after topic and
// partition after partition — and each over a Source, so that the same walk
// reads a frame buffered whole and one streamed from a socket. The fields
// are read as kmsg reads them (kbin's primitives, kmsg's null rules: a null
// string a message may not have is malformed), so a walk answers what a
// kmsg decoding would; tagged fields are passed, never read, but for the
// top-level ones a response carries addresses in.

// Source is the bytes of one frame as a walk reads them, in order: a
// buffered frame (Bytes) or one streamed from a socket (the proxy's
// sessions).
type Source interface {
	// Peek returns the next bytes without passing them: n of them, fewer
	// only at the end of the frame; nil once the source failed.
	Peek(n int) []byte
	// Field passes the next n bytes and returns them for the walk to
	// read (or, in a buffered frame, to patch in place). They stay valid
	// until the next call; a buffered frame's stay valid. nil when fewer
	// than n remain or the source failed.
	Field(n int) []byte
	// Skip passes the next n bytes unread (record batches, tag values).
	// false when fewer than n remain or the source failed.
	Skip(n int) bool
}

// Bytes is a buffered frame, or the head of one, as a Source (what the
// walks read a buffered frame with, without the interface).
type Bytes struct{ r reader }

var _ Source = (*Bytes)(nil)

// Reset makes b read p from its start.
func (b *Bytes) Reset(p []byte) { b.r.reset(p, nil, false) }

// Offset is how many bytes of p were passed.
func (b *Bytes) Offset() int { return b.r.offset() }

// Peek implements Source.
func (b *Bytes) Peek(n int) []byte { return b.r.peek(n) }

// Field implements Source.
func (b *Bytes) Field(n int) []byte { return b.r.field(n) }

// Skip implements Source.
func (b *Bytes) Skip(n int) bool {
	b.r.skip(n)
	return b.r.ok()
}

// reader reads the primitives of a walk from a streamed source, or from a
// buffered frame p without an interface call (so that a walk of one, held
// on the caller's stack, allocates nothing, and its small reads inline). A
// failure sticks: every read after it reads zero.
type reader struct {
	p    []byte // the rest of a buffered frame; nil when streamed
	n    int    // the buffered frame's length
	src  Source // nil: p
	flex bool
	bad  bool
}

func (r *reader) reset(p []byte, src Source, flex bool) {
	*r = reader{src: src, flex: flex}
	if src == nil {
		r.p, r.n = p, len(p)
	}
}

func (r *reader) ok() bool { return !r.bad }

// offset is where a buffered walk is in its frame (-1: streamed).
func (r *reader) offset() int {
	if r.src != nil {
		return -1
	}
	return r.n - len(r.p)
}

// fail makes the failure stick: the buffered fast paths see no bytes.
func (r *reader) fail() {
	r.bad = true
	r.p = nil
}

// field reads the next n bytes; a buffered frame's inline.
func (r *reader) field(n int) []byte {
	if n > 0 && n <= len(r.p) {
		b := r.p[:n:n]
		r.p = r.p[n:]
		return b
	}
	return r.fieldSlow(n)
}

func (r *reader) fieldSlow(n int) []byte {
	var b []byte
	switch {
	case r.bad:
		return nil
	case r.src != nil:
		b = r.src.Field(n)
	case n == 0:
		b = []byte{}
	}
	if b == nil {
		r.fail()
	}
	return b
}

func (r *reader) peek(n int) []byte {
	switch {
	case r.bad:
		return nil
	case r.src != nil:
		return r.src.Peek(n)
	}
	return r.p[:min(n, len(r.p))]
}

func (r *reader) skip(n int) {
	switch {
	case r.bad:
	case r.src == nil:
		r.field(n)
	case !r.src.Skip(n):
		r.fail()
	}
}

func (r *reader) i16() int16 {
	if len(r.p) >= 2 {
		v := int16(binary.BigEndian.Uint16(r.p))
		r.p = r.p[2:]
		return v
	}
	if b := r.fieldSlow(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) i32() int32 {
	if len(r.p) >= 4 {
		v := int32(binary.BigEndian.Uint32(r.p))
		r.p = r.p[4:]
		return v
	}
	if b := r.fieldSlow(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) uuid() (id [16]byte) {
	if b := r.field(16); b != nil {
		id = [16]byte(b)
	}
	return id
}

// uvarint reads an unsigned varint; a buffered frame's one-byte ones
// inline.
func (r *reader) uvarint() uint32 {
	if len(r.p) > 0 && r.p[0] < 0x80 {
		v := uint32(r.p[0])
		r.p = r.p[1:]
		return v
	}
	return r.uvarintSlow()
}

func (r *reader) uvarintSlow() uint32 {
	v, n := kbin.Uvarint(r.peek(5))
	if n <= 0 {
		r.fail()
		return 0
	}
	r.field(n)
	return v
}

// compactLen reads a compact length (negative: null).
func (r *reader) compactLen() int {
	if len(r.p) > 0 && r.p[0] < 0x80 {
		v := int(r.p[0]) - 1
		r.p = r.p[1:]
		return v
	}
	return int(r.uvarintSlow()) - 1
}

// arrayLen reads an array length (negative: null).
func (r *reader) arrayLen() int {
	if r.flex {
		return r.compactLen()
	}
	return int(r.i32())
}

// strLen reads a string's length (negative: null).
func (r *reader) strLen() int {
	if r.flex {
		return r.compactLen()
	}
	return int(r.i16())
}

// str reads a string that may not be null (kmsg's readString).
func (r *reader) str() []byte {
	n := r.strLen()
	if n < 0 {
		r.fail()
		return nil
	}
	return r.field(n)
}

// nullableStr passes a nullable string.
func (r *reader) nullableStr() {
	if n := r.strLen(); n > 0 {
		r.field(n)
	}
}

// records passes nullable bytes (record batches) and returns their
// length, 0 for null.
func (r *reader) records() int {
	n := r.arrayLen()
	if n <= 0 {
		return 0
	}
	if n <= len(r.p) {
		r.p = r.p[n:]
		return n
	}
	r.skip(n)
	return n
}

// tags passes a tag section of a flexible version; an empty one inline.
func (r *reader) tags() {
	if p := r.p; !r.flex || len(p) > 0 && p[0] == 0 {
		if r.flex {
			r.p = p[1:]
		}
		return
	}
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		r.uvarint()
		r.skip(int(r.uvarint()))
	}
}

// readTags reads a tag section's values as fields (a response's top-level
// tags, which carry addresses: a stream keeps them for a rewrite).
func (r *reader) readTags() {
	if !r.flex {
		return
	}
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		r.uvarint()
		r.field(int(r.uvarint()))
	}
}

// malformed is the error of a walk that failed.
func malformed(what string) error {
	return fmt.Errorf("%w: %s", ErrMalformed, what)
}

// skipTags skips a tag section that starts at off and returns its end.
func skipTags(p []byte, off int) (int, error) {
	if off < 0 || off > len(p) {
		return 0, ErrShortFrame
	}
	var r reader
	r.reset(p[off:], nil, true)
	r.tags()
	if !r.ok() {
		return 0, malformed("tag section")
	}
	return off + r.offset(), nil
}

// uvarint reads the unsigned varint at off and returns it and the offset
// after it.
func uvarint(p []byte, off int) (uint32, int, error) {
	if off < 0 || off > len(p) {
		return 0, 0, ErrShortFrame
	}
	v, n := kbin.Uvarint(p[off:])
	if n <= 0 {
		return 0, 0, malformed("varint")
	}
	return v, off + n, nil
}

// hasTags reports whether the tag section at off has any tag.
func hasTags(p []byte, off int) bool {
	return off >= 0 && off < len(p) && p[off] != 0
}

// topicArray is what the walks share: a topic array, each topic's name or
// id, and each topic's partition array, whose partitions the walk reads.
type topicArray struct {
	r      reader
	byID   bool
	state  uint8
	topics int // topics not started
	parts  int // partitions left in the topic
	name   []byte
	id     [16]byte
	sum    int // the topic's records
}

const (
	betweenTopics = iota
	topicStarted  // its partition count not read yet
	inPartitions
)

func (t *topicArray) reset(p []byte, src Source, flex, byID bool) *reader {
	*t = topicArray{byID: byID}
	t.r.reset(p, src, flex)
	return &t.r
}

// next reads the next topic's name or id; the topic before must be passed.
func (t *topicArray) next() bool {
	r := &t.r
	if !r.ok() || t.topics <= 0 {
		return false
	}
	t.topics--
	if t.byID {
		t.name, t.id = nil, r.uuid()
	} else {
		t.name = r.str()
	}
	t.state, t.sum = topicStarted, 0
	return r.ok()
}

// count reads the topic's partition count.
func (t *topicArray) count() int {
	if t.state == topicStarted {
		t.parts, t.state = t.r.arrayLen(), inPartitions
	}
	return max(t.parts, 0)
}

// partition reports whether a partition follows; false once the topic's
// partitions and tags are passed (or the walk failed).
func (t *topicArray) partition() bool {
	if t.parts > 0 && t.state == inPartitions { // a failed walk fails the partition's first read
		t.parts--
		return true
	}
	return t.partitionSlow()
}

func (t *topicArray) partitionSlow() bool {
	if t.state == betweenTopics || !t.r.ok() {
		return false
	}
	if t.count() == 0 {
		t.r.tags()
		t.state = betweenTopics
		return false
	}
	t.parts--
	return true
}

// PassTags passes a tag section src reads (a flexible response header's)
// and reports whether it was whole.
func PassTags(src Source) bool {
	var r reader
	r.reset(nil, src, true)
	r.tags()
	return r.ok()
}
