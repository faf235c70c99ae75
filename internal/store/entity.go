package store

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// The client-quota entity types (the quota model's) of Kafka's wire model, Redpanda's
// client-id-prefix (a Tollgate extension to Kafka's model: one quota shared
// by every client-id that starts with the name), and Tollgate's per-topic
// quotas: topic and topic-prefix, each with a user, a client-id-prefix or
// alone.
const (
	TypeUser           = model.TypeUser
	TypeClientID       = model.TypeClientID
	TypeIP             = model.TypeIP
	TypeClientIDPrefix = model.TypeClientIDPrefix
	TypeTopic          = model.TypeTopic
	TypeTopicPrefix    = model.TypeTopicPrefix
)

// KnownType reports whether t is one of the entity types.
func KnownType(t string) bool { return model.KnownType(t) }

// Component is one (entity type, name) pair of an entity. Name is used only
// when Default is false; the default (entity_name = null on the wire) is its
// own kind, so any string, "<default>" included, is an ordinary name.
type Component struct {
	Type    string
	Name    string
	Default bool
}

// Named is the component {typ: name}.
func Named(typ, name string) Component { return Component{Type: typ, Name: name} }

// DefaultOf is the component {typ: default}.
func DefaultOf(typ string) Component { return Component{Type: typ, Default: true} }

// NamePtr returns the name as the wire carries it: nil for the default.
func (c Component) NamePtr() *string {
	if c.Default {
		return nil
	}
	n := c.Name
	return &n
}

// String renders the component for logs: names are quoted so that a name
// spelled "<default>" cannot be mistaken for the default.
func (c Component) String() string {
	if c.Default {
		return c.Type + "=<default>"
	}
	return c.Type + "=" + strconv.Quote(c.Name)
}

// Entity is a client-quota entity in canonical form: its components sorted
// by type, each type at most once. Build one with NewEntity; an Entity from
// this package (ClientQuotas, results) is always canonical.
type Entity []Component

// Parts is the entity in the quota model's shape.
func (e Entity) Parts() []model.Part {
	out := make([]model.Part, len(e))
	for i, c := range e {
		out[i] = model.Part{Type: c.Type}
		if !c.Default {
			n := c.Name
			out[i].Name = &n
		}
	}
	return out
}

// EntityOfParts is the entity of a quota model entity's parts (a name, or
// nil for the default, each).
func EntityOfParts(parts []model.Part) (Entity, error) {
	cs := make([]Component, len(parts))
	for i, p := range parts {
		if p.Name == nil {
			cs[i] = DefaultOf(p.Type)
		} else {
			cs[i] = Named(p.Type, *p.Name)
		}
	}
	return NewEntity(cs...)
}

// NewEntity returns the canonical entity of the given components. It
// refuses an empty entity, an unknown type and a type given twice.
func NewEntity(cs ...Component) (Entity, error) {
	if len(cs) == 0 {
		return nil, errors.New("store: empty client quota entity")
	}
	e := slices.Clone(Entity(cs))
	slices.SortFunc(e, func(a, b Component) int { return cmp.Compare(a.Type, b.Type) })
	for i, c := range e {
		if !KnownType(c.Type) {
			return nil, fmt.Errorf("store: unknown entity type %q", c.Type)
		}
		if c.Default {
			e[i].Name = ""
		}
		if i > 0 && e[i-1].Type == c.Type {
			return nil, fmt.Errorf("store: entity type %s given twice", c.Type)
		}
	}
	return e, nil
}

// MustEntity is NewEntity for literals known to be valid; it panics
// otherwise.
func MustEntity(cs ...Component) Entity {
	e, err := NewEntity(cs...)
	if err != nil {
		panic(err)
	}
	return e
}

// Get returns the component of type t.
func (e Entity) Get(t string) (Component, bool) {
	for _, c := range e {
		if c.Type == t {
			return c, true
		}
	}
	return Component{}, false
}

// Has reports whether the entity has a component of type t.
func (e Entity) Has(t string) bool {
	_, ok := e.Get(t)
	return ok
}

// Equal reports whether two canonical entities are the same entity.
func (e Entity) Equal(o Entity) bool { return slices.Equal(e, o) }

// String renders the entity for logs, e.g. client-id=<default>,user="alice".
func (e Entity) String() string {
	parts := make([]string, len(e))
	for i, c := range e {
		parts[i] = c.String()
	}
	return strings.Join(parts, ",")
}

// Key returns the canonical encoding of the entity, the key of its record.
// See encodeEntity.
func (e Entity) Key() []byte { return encodeEntity(e) }

// encodeEntity is the canonical encoding of a canonical entity: for each
// component in type order, uvarint(len(type)) type, one byte 1 for the
// default or 0 for a name, and for a name uvarint(len(name)) name. It is
// injective (every field is length-prefixed) and deterministic (the order
// is fixed), so byte equality of keys is entity equality.
func encodeEntity(e Entity) []byte {
	n := 0
	for _, c := range e {
		n += 2*binary.MaxVarintLen64 + 1 + len(c.Type) + len(c.Name)
	}
	b := make([]byte, 0, n)
	for _, c := range e {
		b = binary.AppendUvarint(b, uint64(len(c.Type)))
		b = append(b, c.Type...)
		if c.Default {
			b = append(b, 1)
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(c.Name)))
		b = append(b, c.Name...)
	}
	return b
}

var errCorrupt = errors.New("store: corrupt entity key")

// decodeEntity reverses encodeEntity and checks the result is canonical.
func decodeEntity(b []byte) (Entity, error) {
	var e Entity
	str := func() (string, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", errCorrupt
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, nil
	}
	for len(b) > 0 {
		t, err := str()
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, errCorrupt
		}
		flag := b[0]
		b = b[1:]
		switch flag {
		case 1:
			e = append(e, DefaultOf(t))
		case 0:
			name, err := str()
			if err != nil {
				return nil, err
			}
			e = append(e, Named(t, name))
		default:
			return nil, errCorrupt
		}
	}
	c, err := NewEntity(e...)
	if err != nil || !c.Equal(e) {
		return nil, errCorrupt
	}
	return c, nil
}
