package wire

import "encoding/binary"

// ClampFetch lowers a Fetch request's max_bytes to max (and min_bytes to at
// most the new max_bytes), in place, as Kafka does for a consumer under a
// fetch quota so one response cannot exceed what the quota window holds
// (KAFKA-9677). p is the request payload, bodyOff where its body starts.
// Versions below 3 have no max_bytes and are left alone. It reports
// whether it changed anything.
func ClampFetch(p []byte, bodyOff int, version int16, max int32) bool {
	if version < 3 {
		return false
	}
	off := bodyOff
	if version < 15 {
		off += 4 // replica_id; from v15 it is a tagged field
	}
	// max_wait_ms, min_bytes, max_bytes
	if off+12 > len(p) {
		return false
	}
	changed := false
	if int32(binary.BigEndian.Uint32(p[off+8:])) > max {
		binary.BigEndian.PutUint32(p[off+8:], uint32(max))
		changed = true
	}
	if int32(binary.BigEndian.Uint32(p[off+4:])) > max {
		binary.BigEndian.PutUint32(p[off+4:], uint32(max))
		changed = true
	}
	return changed
}

// FetchMaxBytes returns a Fetch request's max_bytes; ok is false below v3,
// which has none.
func FetchMaxBytes(p []byte, bodyOff int, version int16) (int32, bool) {
	if version < 3 {
		return 0, false
	}
	off := bodyOff
	if version < 15 {
		off += 4
	}
	if off+12 > len(p) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(p[off+8:])), true
}

// FetchMaxWait returns a Fetch request's max_wait_ms, how long the broker
// may hold it (the long poll); ok is false if the body is too short.
func FetchMaxWait(p []byte, bodyOff int, version int16) (int32, bool) {
	off := bodyOff
	if version < 15 {
		off += 4 // replica_id; from v15 it is a tagged field
	}
	if off+4 > len(p) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(p[off:])), true
}

// FetchMinBytes returns a Fetch request's min_bytes: a broker holds a
// fetch (up to max_wait_ms) only while it has fewer bytes than this to
// answer with, so a fetch with min_bytes ≤ 0 is answered at once. ok is
// false if the body is too short.
func FetchMinBytes(p []byte, bodyOff int, version int16) (int32, bool) {
	off := bodyOff
	if version < 15 {
		off += 4 // replica_id; from v15 it is a tagged field
	}
	if off+8 > len(p) {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(p[off+4:])), true
}
