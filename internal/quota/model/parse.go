package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Entry is a quota entry parsed and checked: its entity in Kafka's shape
// and its values by key, the option keys included (shadow 1,
// burst_seconds), as AlterClientQuotas would set them.
type Entry struct {
	Parts  []Part
	Values map[string]float64
}

// FileKeys are the keys of a file entry.
var FileKeys = []string{
	"user", "default_user", "client_id", "default_client_id", "client_id_prefix", "ip", "default_ip", "topic", "topic_prefix",
	"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate", "producer_ids_rate", "connection_creation_rate",
	"shadow", "burst_seconds",
}

// parts is the entry's entity in Kafka's shape: user, client-id,
// client-id-prefix, topic, topic-prefix, ip, each a name or the default.
func (e FileEntry) parts() ([]Part, error) {
	var out []Part
	for _, c := range []struct {
		file, typ string
		name      *string
		dflt      bool
	}{
		{"user", TypeUser, e.User, e.DefaultUser},
		{"client_id", TypeClientID, e.ClientID, e.DefaultClientID},
		{"client_id_prefix", TypeClientIDPrefix, e.ClientIDPrefix, false},
		{"topic", TypeTopic, e.Topic, false},
		{"topic_prefix", TypeTopicPrefix, e.TopicPrefix, false},
		{"ip", TypeIP, e.IP, e.DefaultIP},
	} {
		switch {
		case c.name != nil && c.dflt:
			return nil, fmt.Errorf("%s and default_%s are exclusive", c.file, c.file)
		case c.name != nil:
			out = append(out, Part{Type: c.typ, Name: c.name})
		case c.dflt:
			out = append(out, Part{Type: c.typ})
		}
	}
	return out, nil
}

// Parse checks the entry as AlterClientQuotas checks an entity and the
// values set on it, with Kafka's messages, and returns every problem of
// the entry; beyond Kafka, an entry must set a quota key.
func (e FileEntry) Parse() (Entry, []error) {
	parts, err := e.parts()
	if err != nil {
		return Entry{}, []error{err}
	}
	keys, err := CheckEntity(parts)
	if err != nil {
		return Entry{}, []error{err}
	}
	out := Entry{Parts: parts, Values: map[string]float64{}}
	var errs []error
	set := 0
	for _, kv := range []struct {
		k string
		v *float64
	}{
		{ProducerByteRate.String(), e.ProducerByteRate},
		{ConsumerByteRate.String(), e.ConsumerByteRate},
		{RequestPercentage.String(), e.RequestPercentage},
		{ControllerMutationRate.String(), e.ControllerMutationRate},
		{ProducerIDsRate.String(), e.ProducerIDsRate},
		{KeyConnectionCreationRate, e.ConnectionCreationRate},
		{KeyShadow, shadowValue(e.Shadow)},
		{KeyBurstSeconds, e.BurstSeconds},
	} {
		if kv.v == nil {
			continue
		}
		if kv.k != KeyShadow && kv.k != KeyBurstSeconds {
			set++
		}
		if err := CheckValue(keys, kv.k, *kv.v); err != nil {
			errs = append(errs, err)
			continue
		}
		out.Values[kv.k] = *kv.v
	}
	if set == 0 {
		errs = append(errs, errors.New("no quota key set for "+out.String()))
	}
	return out, errs
}

func shadowValue(on bool) *float64 {
	if !on {
		return nil
	}
	v := 1.0
	return &v
}

// IsIP reports whether the entry is an ip entity's.
func (en Entry) IsIP() bool { _, ok := get(en.Parts, TypeIP); return ok }

// IP returns an ip entity's name, nil for the default ip.
func (en Entry) IP() *string { n, _ := get(en.Parts, TypeIP); return n }

// Entity returns the quota entity of a user, client-id, client-id-prefix
// or per-topic entry; false for an ip entity's.
func (en Entry) Entity() (Entity, bool) {
	e, err := EntityOf(en.Parts)
	return e, err == nil
}

// errIPEntity: an ip entity is the connection quotas', not a client quota
// entity.
var errIPEntity = errors.New("an ip entity has no client quota entity")

// EntityOf is the quota entity of a user, client-id, client-id-prefix or
// per-topic entity in Kafka's shape: an error for parts CheckEntity refuses
// and for an ip entity.
func EntityOf(parts []Part) (Entity, error) {
	if _, err := CheckEntity(parts); err != nil {
		return Entity{}, err
	}
	if _, ok := get(parts, TypeIP); ok {
		return Entity{}, errIPEntity
	}
	name := func(typ string, prefix bool) Name {
		n, ok := get(parts, typ)
		switch {
		case !ok:
			return Name{}
		case n == nil:
			return Default()
		case prefix:
			return Prefix(*n)
		}
		return Exact(*n)
	}
	e := Entity{User: name(TypeUser, false), Client: name(TypeClientID, false), Topic: name(TypeTopic, false)}
	if p := name(TypeClientIDPrefix, true); p.IsSet() {
		e.Client = p
	}
	if p := name(TypeTopicPrefix, true); p.IsSet() {
		e.Topic = p
	}
	return e, nil
}

// Options returns the entry's options.
func (en Entry) Options() Options { return OptionsOf(en.Values) }

// OptionsOf reads an entity's options from its values by key: shadow = 1,
// and burst_seconds.
func OptionsOf(vals map[string]float64) Options {
	o := Options{Shadow: vals[KeyShadow] == 1}
	if v, ok := vals[KeyBurstSeconds]; ok {
		o.Burst, o.HasBurst = v, true
	}
	return o
}

// String renders the entity as type=name pairs, e.g. user=alice or
// user=alice,client-id=<default> (a name quoted when it could be misread).
func (en Entry) String() string {
	var out []string
	for _, p := range en.Parts {
		v := "<default>"
		if p.Name != nil {
			v = QuoteName(*p.Name)
		}
		out = append(out, p.Type+"="+v)
	}
	return strings.Join(out, ",")
}

// QuoteName renders an entity name for messages and listings: as is, or
// quoted when it could be misread (empty, spaces, separators, quotes).
func QuoteName(n string) string {
	if n == "" || strings.ContainsAny(n, " ,=<>\"\\'") || strconv.Quote(n) != `"`+n+`"` {
		return strconv.Quote(n)
	}
	return n
}

// key identifies the entry's entity, whatever the order of its parts.
func (en Entry) key() string {
	ps := slices.Clone(en.Parts)
	slices.SortFunc(ps, func(a, b Part) int { return strings.Compare(a.Type, b.Type) })
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Type)
		if p.Name != nil {
			b.WriteString(strconv.Quote(*p.Name))
		}
		b.WriteByte(',')
	}
	return b.String()
}

// Entries parses a file's entries one by one: each entry as Parse does,
// and each key of an entity set by one entry only.
type Entries struct {
	seen map[string]map[string]bool
}

// Add parses one entry and returns every problem of it.
func (s *Entries) Add(e FileEntry) (Entry, []error) {
	en, errs := e.Parse()
	if len(errs) > 0 {
		return en, errs
	}
	if s.seen == nil {
		s.seen = map[string]map[string]bool{}
	}
	id := en.key()
	if s.seen[id] == nil {
		s.seen[id] = map[string]bool{}
	}
	for _, k := range slices.Sorted(maps.Keys(en.Values)) {
		if s.seen[id][k] {
			errs = append(errs, fmt.Errorf("%s is set twice for %s", k, en))
		}
		s.seen[id][k] = true
	}
	return en, errs
}
