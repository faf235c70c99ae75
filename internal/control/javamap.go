package control

import (
	"encoding/binary"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kafka's AlterClientQuotas keeps entities, ops and results in
// java.util.HashMap. Their iteration order is deterministic: it depends only
// on the keys' hashCode, the insertion order and the map's capacity. That
// order decides which error an entity with several problems gets, the text
// of "Ignoring duplicate entity ClientQuotaEntity(entries={…})", the order
// of the type/name pairs echoed in a response entry and the order of the
// response entries. Tollgate reproduces it with this small model of
// HashMap (no treeification: it changes nothing below 64 buckets and 8
// collisions, far beyond any real request).

// javaStringHash is java.lang.String.hashCode over the UTF-16 code units of
// s. Invalid UTF-8 counts as U+FFFD per bad byte, as Kafka's decoder does
// for a lone byte.
func javaStringHash(s string) int32 {
	var h int32
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// javaNullableHash is Objects.hashCode of a nullable String.
func javaNullableHash(s *string) int32 {
	if s == nil {
		return 0
	}
	return javaStringHash(*s)
}

// javaTableSizeFor is HashMap.tableSizeFor: the next power of two ≥ c,
// at least 1.
func javaTableSizeFor(c int) int {
	n := 1
	for n < c {
		n <<= 1
	}
	return n
}

// javaMap models a HashMap's capacity as keys are added, and the order in
// which it would iterate them.
type javaMap struct {
	capacity  int // 0 until the first insertion
	threshold int
	hashes    []int32 // of the keys, in insertion order
}

// newJavaMap models new HashMap<>(initialCapacity); initialCapacity < 0
// models new HashMap<>().
func newJavaMap(initialCapacity int) *javaMap {
	if initialCapacity < 0 {
		return &javaMap{}
	}
	return &javaMap{threshold: javaTableSizeFor(initialCapacity)}
}

// add records the insertion of a key not already in the map (putting an
// existing key changes neither the capacity nor the order).
func (m *javaMap) add(hash int32) {
	if m.capacity == 0 {
		// HashMap.resize on the first put.
		if m.threshold > 0 {
			m.capacity = m.threshold
		} else {
			m.capacity = 16
		}
		m.threshold = int(float32(m.capacity) * 0.75)
	}
	m.hashes = append(m.hashes, hash)
	if len(m.hashes) > m.threshold {
		old := m.capacity
		m.capacity <<= 1
		if old >= 16 {
			m.threshold <<= 1
		} else {
			m.threshold = int(float32(m.capacity) * 0.75)
		}
	}
}

// order returns the insertion indexes in iteration order: by bucket
// (spread hash modulo capacity), then by insertion within a bucket (a
// resize splits each bucket's list keeping its relative order).
func (m *javaMap) order() []int {
	idx := make([]int, len(m.hashes))
	for i := range idx {
		idx[i] = i
	}
	bucket := func(h int32) int {
		u := uint32(h)
		return int((u ^ u>>16) & uint32(m.capacity-1))
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return bucket(m.hashes[a]) - bucket(m.hashes[b])
	})
	return idx
}

// pair is one entry of a ClientQuotaEntity's map: a type and a nullable
// name (nil is the default).
type pair struct {
	typ  string
	name *string
}

// javaEntity is a ClientQuotaEntity as Kafka builds it from a request
// entry: a HashMap from type to name, sized for the entry's list, where a
// repeated type keeps its first position and takes the last name. pairs is
// in the map's iteration order.
type javaEntity struct {
	pairs []pair
}

func newJavaEntity(types []string, names []*string) javaEntity {
	m := newJavaMap(len(types))
	var ins []pair
	at := make(map[string]int, len(types))
	for i, t := range types {
		if j, ok := at[t]; ok {
			ins[j].name = names[i]
			continue
		}
		at[t] = len(ins)
		ins = append(ins, pair{typ: t, name: names[i]})
		m.add(javaStringHash(t))
	}
	e := javaEntity{pairs: make([]pair, 0, len(ins))}
	for _, i := range m.order() {
		e.pairs = append(e.pairs, ins[i])
	}
	return e
}

// hash is ClientQuotaEntity.hashCode: Objects.hash(entries) = 31 + the
// map's hash, the sum of hash(key) ^ hash(value) over its entries.
func (e javaEntity) hash() int32 {
	var h int32
	for _, p := range e.pairs {
		h += javaStringHash(p.typ) ^ javaNullableHash(p.name)
	}
	return 31 + h
}

func (e javaEntity) get(typ string) (*string, bool) {
	for _, p := range e.pairs {
		if p.typ == typ {
			return p.name, true
		}
	}
	return nil, false
}

// key is a canonical encoding of the entity: equal entities (same types,
// same names, in any order) have equal keys.
func (e javaEntity) key() string {
	ps := slices.Clone(e.pairs)
	slices.SortFunc(ps, func(a, b pair) int { return strings.Compare(a.typ, b.typ) })
	var b []byte
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(len(p.typ)))
		b = append(b, p.typ...)
		if p.name == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(*p.name)))
		b = append(b, *p.name...)
	}
	return string(b)
}

// String is ClientQuotaEntity.toString, e.g.
// ClientQuotaEntity(entries={user=alice, client-id=null}).
func (e javaEntity) String() string {
	var b strings.Builder
	b.WriteString("ClientQuotaEntity(entries={")
	for i, p := range e.pairs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.typ)
		b.WriteByte('=')
		if p.name == nil {
			b.WriteString("null")
		} else {
			b.WriteString(*p.name)
		}
	}
	b.WriteString("})")
	return b.String()
}
