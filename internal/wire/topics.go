package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Per-topic quotas read the topics of Produce requests and Fetch responses
// where they lie, with kbin's reader: the small fields are read, the record
// batches skipped by their length, nothing is copied or allocated (a
// truncated or malformed message only stops the walk). The layouts are
// kmsg's ProduceRequest (flexible from v9, topic ids from v13),
// FetchRequest and FetchResponse (flexible from v12, topic ids from v13).

// TopicVisitor sees each topic of a walk: its name, or (name nil) its id
// when the version names topics by id, and the bytes of its record batches
// (the sum of its partitions' records lengths). A topic whose records lie
// past the end of the bytes walked (the head of a streamed Produce) is
// shown with records -1.
type TopicVisitor interface {
	VisitTopic(name []byte, id [16]byte, records int)
}

// length reads a string, bytes or array length (-1: null).
func length(b *kbin.Reader, flex, array bool) int {
	switch {
	case flex:
		return int(b.Uvarint()) - 1
	case array:
		return int(b.Int32())
	default:
		return int(b.Int16())
	}
}

func skipTagged(b *kbin.Reader) {
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		b.Uvarint()
		b.Span(int(b.Uvarint()))
	}
}

// topicName reads a topic's name, or its id from v13 (ids: true).
func topicName(b *kbin.Reader, flex, ids bool) (name []byte, id [16]byte) {
	if ids {
		if s := b.Span(16); b.Ok() {
			id = [16]byte(s)
		}
		return nil, id
	}
	name = b.Span(max(length(b, flex, false), 0))
	if name == nil {
		name = []byte{} // a null or empty name is still a name
	}
	return name, id
}

// ProduceTopics walks the Produce request body p[bodyOff:] — the whole
// request, or the head of a streamed one — and shows v each topic. It
// reports whether the walk reached the end of the topic array: false for
// the head of a streamed request (its last topic shown with records -1) and
// for a malformed body (what was shown stands).
func ProduceTopics(p []byte, bodyOff int, version int16, v TopicVisitor) bool {
	if bodyOff < 0 || bodyOff > len(p) {
		return false
	}
	flex, ids := version >= 9, version >= 13
	b := kbin.Reader{Src: p[bodyOff:]}
	if version >= 3 {
		b.Span(max(length(&b, flex, false), 0)) // transactional id
	}
	b.Span(2 + 4) // acks, timeout
	for n := length(&b, flex, true); n > 0 && b.Ok(); n-- {
		name, id := topicName(&b, flex, ids)
		if !b.Ok() {
			return false
		}
		records := 0
		for parts := length(&b, flex, true); parts > 0 && b.Ok(); parts-- {
			b.Span(4) // partition
			k := max(length(&b, flex, true), 0)
			b.Span(k)
			records += k
			if flex {
				skipTagged(&b)
			}
		}
		if !b.Ok() {
			v.VisitTopic(name, id, -1)
			return false
		}
		if flex {
			skipTagged(&b)
		}
		v.VisitTopic(name, id, records)
	}
	return b.Ok()
}

// FetchResponseTopics walks the body of a Fetch response p[bodyOff:] (p is
// the response after its size prefix; the body starts after the
// correlation id and, from v12, the header's tags) and shows v each topic
// with the bytes of its record batches. It reports whether the walk
// reached the end of the topic array.
func FetchResponseTopics(p []byte, bodyOff int, version int16, v TopicVisitor) bool {
	if bodyOff < 0 || bodyOff > len(p) {
		return false
	}
	flex, ids := version >= 12, version >= 13
	b := kbin.Reader{Src: p[bodyOff:]}
	if version >= 1 {
		b.Span(4) // throttle
	}
	if version >= 7 {
		b.Span(2 + 4) // error code, session id
	}
	part := 4 + 2 + 8 // partition, error code, high watermark
	if version >= 4 {
		part += 8 // last stable offset
	}
	if version >= 5 {
		part += 8 // log start offset
	}
	for n := length(&b, flex, true); n > 0 && b.Ok(); n-- {
		name, id := topicName(&b, flex, ids)
		records := 0
		for parts := length(&b, flex, true); parts > 0 && b.Ok(); parts-- {
			b.Span(part)
			if version >= 4 {
				for a := length(&b, flex, true); a > 0 && b.Ok(); a-- {
					b.Span(8 + 8) // producer id, first offset
					if flex {
						skipTagged(&b)
					}
				}
			}
			if version >= 11 {
				b.Span(4) // preferred read replica
			}
			k := max(length(&b, flex, true), 0)
			b.Span(k)
			records += k
			if flex {
				skipTagged(&b)
			}
		}
		if flex {
			skipTagged(&b)
		}
		if !b.Ok() {
			return false
		}
		v.VisitTopic(name, id, records)
	}
	return b.Ok()
}

// FetchClamper decides each topic's partition_max_bytes in a Fetch
// request: at most what FetchTopic returns (math.MaxInt32, or anything the
// partitions already ask less than, leaves them).
type FetchClamper interface {
	FetchTopic(name []byte, id [16]byte, parts int) int32
}

// FetchRequestLayout gives the fixed-size parts of a Fetch request body of
// version, for readers that walk it in place: head is the bytes before the
// topic array; part is a partition's bytes before its partition_max_bytes
// (partition, fetch_offset, and the epochs and log start offset of the
// versions that have them).
func FetchRequestLayout(version int16) (head, part int) {
	head = 4 + 4 // max_wait_ms, min_bytes
	if version <= 14 {
		head += 4 // replica_id
	}
	if version >= 3 {
		head += 4 // max_bytes
	}
	if version >= 4 {
		head++ // isolation_level
	}
	if version >= 7 {
		head += 4 + 4 // session id and epoch
	}
	part = 4 + 8 // partition, fetch_offset
	if version >= 9 {
		part += 4 // current_leader_epoch
	}
	if version >= 12 {
		part += 4 // last_fetched_epoch
	}
	if version >= 5 {
		part += 8 // log_start_offset
	}
	return head, part
}

// ClampFetchTopics walks the Fetch request body p[bodyOff:], asks c about
// each topic with its number of partitions, and lowers each partition's
// partition_max_bytes to the answer, in place. It reports whether the walk
// reached the end of the topic array (a malformed body stops it: the broker
// answers that one).
func ClampFetchTopics(p []byte, bodyOff int, version int16, c FetchClamper) bool {
	if bodyOff < 0 || bodyOff > len(p) {
		return false
	}
	flex, ids := version >= 12, version >= 13
	b := kbin.Reader{Src: p[bodyOff:]}
	head, part := FetchRequestLayout(version)
	b.Span(head)
	for n := length(&b, flex, true); n > 0 && b.Ok(); n-- {
		name, id := topicName(&b, flex, ids)
		parts := length(&b, flex, true)
		if !b.Ok() {
			return false
		}
		limit := c.FetchTopic(name, id, max(parts, 0))
		for ; parts > 0 && b.Ok(); parts-- {
			b.Span(part)
			if mb := b.Span(4); b.Ok() && int32(binary.BigEndian.Uint32(mb)) > limit {
				binary.BigEndian.PutUint32(mb, uint32(max(limit, 0)))
			}
			if flex {
				skipTagged(&b)
			}
		}
		if flex {
			skipTagged(&b)
		}
	}
	return b.Ok()
}
