package wire

// ProduceWalk is the walk of a Produce request body (kmsg's ProduceRequest:
// flexible from v9, topics named by id from v13): its head (acks,
// timeout_ms), then each topic, each partition's index and the length of
// its records, which are passed, never read. The zero value is ready for
// Start; a walk holds no reference once done and may be reused.
//
//	w.Start(body, version)
//	for w.NextTopic() {
//		name, id := w.Topic()
//		for w.NextPartition() { … }
//		… w.TopicRecords() once NextPartition said false, if w.Ok()
//	}
type ProduceWalk struct {
	t       topicArray
	acks    int16
	timeout int32
	got     uint8 // head fields read: 1 acks, 2 timeout
	txnBad  bool  // a transactional id length below -1
	index   int32
	length  int // the partition's records
}

// Start walks the Produce request body p (the whole body, or the head of
// a streamed request) of version.
func (w *ProduceWalk) Start(p []byte, version int16) { w.start(p, nil, version) }

// StartFrom walks the body of version that src reads.
func (w *ProduceWalk) StartFrom(src Source, version int16) { w.start(nil, src, version) }

func (w *ProduceWalk) start(p []byte, src Source, version int16) {
	*w = ProduceWalk{}
	r := w.t.reset(p, src, version >= 9, version >= 13)
	if version >= 3 {
		n := r.strLen() // transactional id
		w.txnBad = n < -1 && !r.flex
		if n > 0 {
			r.field(n)
		}
	}
	if w.acks = r.i16(); r.ok() {
		w.got++
	}
	if w.timeout = r.i32(); r.ok() {
		w.got++
	}
	w.t.topics = r.arrayLen()
}

// head is the error of a head field: ErrMalformed for a transactional id
// length below -1 (kmsg reads it as null; the gateway refuses the frame),
// ErrShortFrame when the body ends before the field.
func (w *ProduceWalk) head(field uint8) error {
	switch {
	case w.txnBad:
		return malformed("transactional id length")
	case w.got < field:
		return ErrShortFrame
	}
	return nil
}

// Acks is the request's acks.
func (w *ProduceWalk) Acks() (int16, error) { return w.acks, w.head(1) }

// Timeout is the request's timeout_ms.
func (w *ProduceWalk) Timeout() (int32, error) { return w.timeout, w.head(2) }

// NextTopic passes what is left of the topic before (its partitions and
// tags) and reads the next topic's name or id. It reports false after the
// last topic, or when the body ends or is malformed (Ok says which).
func (w *ProduceWalk) NextTopic() bool {
	for w.NextPartition() {
	}
	return w.t.next()
}

// Topic is the topic NextTopic read: its name, or (name nil) its id when
// the version names topics by id. The name stays valid until the walk's
// next read (a buffered frame's for good).
func (w *ProduceWalk) Topic() (name []byte, id [16]byte) { return w.t.name, w.t.id }

// Last reports whether the topic read is the request's last.
func (w *ProduceWalk) Last() bool { return w.t.topics <= 0 }

// NextPartition reads the topic's next partition, passing its records:
// it reports whether it read the partition's index (its records may be
// cut: Ok says). It reports false after the last one, having passed the
// topic's tags (then TopicRecords is the topic's whole), or when the body
// ends or is malformed.
func (w *ProduceWalk) NextPartition() bool {
	if !w.t.partition() {
		return false
	}
	r := &w.t.r
	if w.index = r.i32(); !r.ok() {
		return false
	}
	w.length = r.records()
	r.tags()
	w.t.sum += w.length
	return true
}

// Partition is the partition NextPartition read: its index and the length
// of its records.
func (w *ProduceWalk) Partition() (index int32, records int) { return w.index, w.length }

// TopicRecords is the sum of the records lengths of the topic's partitions
// read so far.
func (w *ProduceWalk) TopicRecords() int { return w.t.sum }

// Ok reports that nothing the walk read was missing or malformed.
func (w *ProduceWalk) Ok() bool { return w.t.r.ok() }

// Done passes the rest of the body (the topics not read, the tags) and
// reports whether it was whole and well formed.
func (w *ProduceWalk) Done() bool {
	for w.NextTopic() {
	}
	w.t.r.tags()
	return w.t.r.ok()
}

// ProduceAcks returns the acks field of a Produce request payload without
// touching its records. acks=0 is the one request with no response.
func ProduceAcks(p []byte, h RequestHeader) (int16, error) {
	var w ProduceWalk
	if !w.startAt(p, h.BodyOffset, h.Version) {
		return 0, ErrShortFrame
	}
	return w.Acks()
}

// ProduceTimeout returns the timeout_ms field of a Produce request payload:
// how long the broker may wait for replication before answering.
func ProduceTimeout(p []byte, h RequestHeader) (int32, error) {
	var w ProduceWalk
	if !w.startAt(p, h.BodyOffset, h.Version) {
		return 0, ErrShortFrame
	}
	return w.Timeout()
}

// startAt starts w on the body of version at bodyOffset in the Produce
// request payload p; false when that is past p. (The offset and version,
// not the header: a header copied costs ProduceAcks a tenth.)
func (w *ProduceWalk) startAt(p []byte, bodyOffset int, version int16) bool {
	if bodyOffset > len(p) {
		return false
	}
	w.Start(p[bodyOffset:], version)
	return true
}

// produceLayout walks a Produce response body (v1+; kmsg's
// ProduceResponse) and returns the offset of throttle_time_ms, which
// follows the topic array, and of the top-level tag section (-1 below v9).
func produceLayout(p []byte, bodyOff int, version int16) (throttle, tags int, err error) {
	if bodyOff < 0 || bodyOff > len(p) {
		return 0, 0, ErrShortFrame
	}
	var r reader
	r.reset(p[bodyOff:], nil, version >= 9)
	for t := r.arrayLen(); t > 0 && r.ok(); t-- {
		if version >= 13 {
			r.uuid()
		} else {
			r.str()
		}
		for n := r.arrayLen(); n > 0 && r.ok(); n-- {
			r.field(4 + 2 + 8) // partition, error, base offset
			if version >= 2 {
				r.field(8) // log append time
			}
			if version >= 5 {
				r.field(8) // log start offset
			}
			if version >= 8 {
				for e := r.arrayLen(); e > 0 && r.ok(); e-- {
					r.field(4) // batch index
					r.nullableStr()
					r.tags()
				}
				r.nullableStr() // error message
			}
			r.tags()
		}
		r.tags()
	}
	throttle = bodyOff + r.offset()
	r.field(4)
	tags = -1
	if r.flex {
		tags = bodyOff + r.offset()
		r.tags()
	}
	if !r.ok() {
		return 0, 0, malformed("produce response")
	}
	return throttle, tags, nil
}
