package wire

import "encoding/binary"

// FetchRequestWalk is the walk of a Fetch request body (kmsg's
// FetchRequest: flexible from v12, topics named by id from v13): its head
// (max_wait_ms, min_bytes, max_bytes), then each topic with its number of
// partitions, and each partition's partition_max_bytes, which Clamp lowers
// in place in a buffered frame. The zero value is ready for Start.
type FetchRequestWalk struct {
	t       topicArray
	version int16
	// The head's fields and the partition's partition_max_bytes, as read,
	// and where they lie (for a patch in place of a buffered frame).
	maxWait, minBytes, maxBytes, partMax field32
}

// field32 is an int32 field a walk read: its value, and its bytes for a
// patch in place (nil when the field is missing).
type field32 struct {
	v int32
	b []byte
}

func (f field32) get() (int32, bool) { return f.v, f.b != nil }

// lower sets the field to max(limit, 0) when it is above limit, in place.
func (f field32) lower(limit int32) bool {
	if f.b == nil || f.v <= limit {
		return false
	}
	binary.BigEndian.PutUint32(f.b, uint32(max(limit, 0)))
	return true
}

// Start walks the Fetch request body p of version.
func (w *FetchRequestWalk) Start(p []byte, version int16) { w.start(p, nil, version) }

// StartFrom walks the Fetch request body of version src reads (Clamp
// patches only a buffered frame).
func (w *FetchRequestWalk) StartFrom(src Source, version int16) { w.start(nil, src, version) }

func (w *FetchRequestWalk) start(p []byte, src Source, version int16) {
	*w = FetchRequestWalk{version: version}
	r := w.t.reset(p, src, version >= 12, version >= 13)
	maxWait, minBytes, maxBytes, head := fetchHeadLayout(version)
	if h := r.field(head); h != nil {
		w.maxWait, w.minBytes = at32(h, maxWait), at32(h, minBytes)
		if maxBytes >= 0 {
			w.maxBytes = at32(h, maxBytes)
		}
	}
	w.t.topics = r.arrayLen()
}

// fetchHeadLayout is the fixed head of a Fetch request body of version:
// where max_wait_ms, min_bytes and max_bytes (-1: none, below v3) sit, and
// the head's length (the bytes before the topic array).
func fetchHeadLayout(version int16) (maxWait, minBytes, maxBytes, head int) {
	if version <= 14 {
		head = 4 // replica_id; from v15 it is a tagged field
	}
	maxWait, minBytes, maxBytes = head, head+4, -1
	head += 8
	if version >= 3 {
		maxBytes = head
		head += 4
	}
	if version >= 4 {
		head++ // isolation_level
	}
	if version >= 7 {
		head += 4 + 4 // session id and epoch
	}
	return maxWait, minBytes, maxBytes, head
}

// at32 is the int32 field at off in b.
func at32(b []byte, off int) field32 {
	f := b[off : off+4]
	return field32{int32(binary.BigEndian.Uint32(f)), f}
}

// head32 is the head field at off (-1: none) of the Fetch request body at
// p[bodyOff:], read in place: the zero field32 when p is too short.
func head32(p []byte, bodyOff, off int) field32 {
	if off < 0 || bodyOff < 0 || bodyOff > len(p) || off+4 > len(p)-bodyOff {
		return field32{}
	}
	return at32(p, bodyOff+off)
}

// MaxWait is the request's max_wait_ms; ok is false if the body is too
// short.
func (w *FetchRequestWalk) MaxWait() (int32, bool) { return w.maxWait.get() }

// MinBytes is the request's min_bytes.
func (w *FetchRequestWalk) MinBytes() (int32, bool) { return w.minBytes.get() }

// MaxBytes is the request's max_bytes; ok is false below v3, which has
// none.
func (w *FetchRequestWalk) MaxBytes() (int32, bool) { return w.maxBytes.get() }

// NextTopic passes what is left of the topic before and reads the next
// topic's name or id.
func (w *FetchRequestWalk) NextTopic() bool {
	for w.NextPartition() {
	}
	return w.t.next()
}

// Topic is the topic NextTopic read: its name, or (name nil) its id. The
// name stays valid until the walk's next read (a buffered frame's for
// good).
func (w *FetchRequestWalk) Topic() (name []byte, id [16]byte) { return w.t.name, w.t.id }

// Parts is the number of partitions of the topic not read yet (reading
// its partition count first: a streamed name is gone then; Ok says whether
// the count was there).
func (w *FetchRequestWalk) Parts() int { return w.t.count() }

// NextPartition reads the topic's next partition; false after the last.
func (w *FetchRequestWalk) NextPartition() bool {
	if !w.t.partition() {
		return false
	}
	r := &w.t.r
	fixed := 4 + 8 // partition, fetch_offset
	if w.version >= 9 {
		fixed += 4 // current_leader_epoch
	}
	if w.version >= 12 {
		fixed += 4 // last_fetched_epoch
	}
	if w.version >= 5 {
		fixed += 8 // log_start_offset
	}
	if b := r.field(fixed + 4); b != nil {
		w.partMax = field32{int32(binary.BigEndian.Uint32(b[fixed:])), b[fixed:]}
	} else {
		w.partMax = field32{}
	}
	r.tags()
	return r.ok()
}

// PartitionMaxBytes is the partition's partition_max_bytes.
func (w *FetchRequestWalk) PartitionMaxBytes() int32 { return w.partMax.v }

// Clamp lowers the partition's partition_max_bytes to at most limit (not
// below 0), in place: in a buffered frame (a streamed one's fields are
// gone by then).
func (w *FetchRequestWalk) Clamp(limit int32) {
	if w.t.r.src == nil {
		w.partMax.lower(limit)
	}
}

// Ok reports that nothing the walk read was missing or malformed.
func (w *FetchRequestWalk) Ok() bool { return w.t.r.ok() }

// Done passes the rest of the body (the topics not read, the forgotten
// topics, the rack, the tags) and reports whether it was whole and well
// formed.
func (w *FetchRequestWalk) Done() bool {
	for w.NextTopic() {
	}
	r := &w.t.r
	if w.version >= 7 {
		for n := r.arrayLen(); n > 0 && r.ok(); n-- {
			if w.version >= 13 {
				r.uuid()
			} else {
				r.str()
			}
			if k := r.arrayLen(); k > 0 {
				r.field(4 * k)
			}
			r.tags()
		}
	}
	if w.version >= 11 {
		r.str() // rack id
	}
	r.tags()
	return r.ok()
}

// ClampFetch lowers a Fetch request's max_bytes to max (and min_bytes to at
// most the new max_bytes), in place, as Kafka does for a consumer under a
// fetch quota so one response cannot exceed what the quota window holds
// (KAFKA-9677). p is the request payload, bodyOff where its body starts.
// Versions below 3 have no max_bytes and are left alone. It reports
// whether it changed anything.
func ClampFetch(p []byte, bodyOff int, version int16, max int32) bool {
	_, minBytes, maxBytes, _ := fetchHeadLayout(version)
	mx := head32(p, bodyOff, maxBytes)
	if mx.b == nil {
		return false
	}
	changed := false
	for _, f := range [2]field32{mx, head32(p, bodyOff, minBytes)} {
		if f.v > max {
			binary.BigEndian.PutUint32(f.b, uint32(max))
			changed = true
		}
	}
	return changed
}

// FetchMaxBytes returns a Fetch request's max_bytes; ok is false below v3,
// which has none.
func FetchMaxBytes(p []byte, bodyOff int, version int16) (int32, bool) {
	_, _, maxBytes, _ := fetchHeadLayout(version)
	return head32(p, bodyOff, maxBytes).get()
}

// FetchMaxWait returns a Fetch request's max_wait_ms, how long the broker
// may hold it (the long poll); ok is false if the body is too short.
func FetchMaxWait(p []byte, bodyOff int, version int16) (int32, bool) {
	maxWait, _, _, _ := fetchHeadLayout(version)
	return head32(p, bodyOff, maxWait).get()
}

// FetchMinBytes returns a Fetch request's min_bytes: a broker holds a
// fetch (up to max_wait_ms) only while it has fewer bytes than this to
// answer with, so a fetch with min_bytes ≤ 0 is answered at once. ok is
// false if the body is too short.
func FetchMinBytes(p []byte, bodyOff int, version int16) (int32, bool) {
	_, minBytes, _, _ := fetchHeadLayout(version)
	return head32(p, bodyOff, minBytes).get()
}

// FetchResponseWalk is the walk of a Fetch response body (kmsg's
// FetchResponse: flexible from v12, topics named by id from v13) or of a
// ShareFetch one (StartShare; flexible, topics by id): each topic, each
// partition's records length, the records passed; then (Done) the
// top-level tag section, whose values are read as fields (they carry the
// node endpoints a stream rewrites). The zero value is ready for Start.
type FetchResponseWalk struct {
	t        topicArray
	version  int16
	share    bool
	throttle []byte
	length   int
	tagsAt   int
}

// Start walks the Fetch response body p of version.
func (w *FetchResponseWalk) Start(p []byte, version int16) { w.start(p, nil, version, false) }

// StartFrom walks the Fetch response body of version src reads.
func (w *FetchResponseWalk) StartFrom(src Source, version int16) { w.start(nil, src, version, false) }

// StartShare walks the ShareFetch response body p of version.
func (w *FetchResponseWalk) StartShare(p []byte, version int16) { w.start(p, nil, version, true) }

func (w *FetchResponseWalk) start(p []byte, src Source, version int16, share bool) {
	*w = FetchResponseWalk{version: version, share: share, tagsAt: -1}
	r := w.t.reset(p, src, share || version >= 12, share || version >= 13)
	if share || version >= 1 {
		w.throttle = r.field(4)
	}
	switch {
	case share:
		r.field(2) // error code
		r.nullableStr()
		if version >= 1 {
			r.field(4) // acquisition lock timeout
		}
	case version >= 7:
		r.field(2 + 4) // error code, session id
	}
	w.t.topics = r.arrayLen()
}

// Throttle is the response's throttle_time_ms field, to patch in place
// (nil below v1, or when the body is too short).
func (w *FetchResponseWalk) Throttle() []byte { return w.throttle }

// NextTopic passes what is left of the topic before and reads the next
// topic's name or id.
func (w *FetchResponseWalk) NextTopic() bool {
	for w.NextPartition() {
	}
	return w.t.next()
}

// Topic is the topic NextTopic read: its name, or (name nil) its id. The
// name stays valid until the walk's next read (a buffered frame's for
// good).
func (w *FetchResponseWalk) Topic() (name []byte, id [16]byte) { return w.t.name, w.t.id }

// NextPartition reads the topic's next partition, passing its records;
// false after the last one (TopicRecords is then the topic's whole).
func (w *FetchResponseWalk) NextPartition() bool {
	if !w.t.partition() {
		return false
	}
	r := &w.t.r
	if w.share {
		w.sharePartition()
		return r.ok()
	}
	fixed := 4 + 2 + 8 // partition, error code, high watermark
	if w.version >= 4 {
		fixed += 8 // last stable offset
	}
	if w.version >= 5 {
		fixed += 8 // log start offset
	}
	r.field(fixed)
	if w.version >= 4 {
		for a := r.arrayLen(); a > 0 && r.ok(); a-- {
			r.field(8 + 8) // producer id, first offset
			r.tags()
		}
	}
	if w.version >= 11 {
		r.field(4) // preferred read replica
	}
	w.length = r.records()
	r.tags()
	w.t.sum += w.length
	return r.ok()
}

func (w *FetchResponseWalk) sharePartition() {
	r := &w.t.r
	r.field(4 + 2) // partition, error code
	r.nullableStr()
	r.field(2) // acknowledge error code
	r.nullableStr()
	r.field(4 + 4) // current leader: id, epoch
	r.tags()
	w.length = r.records()
	for a := r.arrayLen(); a > 0 && r.ok(); a-- {
		r.field(8 + 8 + 2) // first and last offset, delivery count
		r.tags()
	}
	r.tags()
	w.t.sum += w.length
}

// Records is the records length of the partition NextPartition read.
func (w *FetchResponseWalk) Records() int { return w.length }

// TopicRecords is the sum of the records lengths of the topic's
// partitions read so far.
func (w *FetchResponseWalk) TopicRecords() int { return w.t.sum }

// Ok reports that nothing the walk read was missing or malformed.
func (w *FetchResponseWalk) Ok() bool { return w.t.r.ok() }

// Done passes the rest of the body: the topics not read, a ShareFetch's
// node endpoints, and the top-level tag section, read as fields. It
// reports whether the body was whole and well formed.
func (w *FetchResponseWalk) Done() bool {
	for w.NextTopic() {
	}
	r := &w.t.r
	if w.share {
		for n := r.arrayLen(); n > 0 && r.ok(); n-- {
			r.field(4) // node id
			r.str()    // host
			r.field(4) // port
			r.nullableStr()
			r.tags()
		}
	}
	if r.ok() {
		w.tagsAt = r.offset()
	}
	r.readTags()
	return r.ok()
}

// TagsOffset is, after Done, where the top-level tag section starts in a
// buffered body (-1: streamed, or not reached).
func (w *FetchResponseWalk) TagsOffset() int { return w.tagsAt }

// fetchTagsOffset walks a flexible Fetch response body (v12+) past all
// record data, which is length-prefixed and skipped without a copy, and
// returns the offset of the top-level tag section.
func fetchTagsOffset(p []byte, bodyOff int, version int16) (int, error) {
	if bodyOff < 0 || bodyOff > len(p) {
		return 0, ErrShortFrame
	}
	var w FetchResponseWalk
	w.Start(p[bodyOff:], version)
	if !w.Done() {
		return 0, malformed("fetch response")
	}
	return bodyOff + w.TagsOffset(), nil
}
