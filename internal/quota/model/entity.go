package model

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
)

// Key is one of the client quota keys: Kafka's four, and Tollgate's
// producer_ids_rate (KIP-936, which Kafka has not adopted). Kafka keeps an
// independent manager per key, each with its own entities, enabled levels
// and buckets.
type Key uint8

// The client quota keys, in Kafka's order.
const (
	ProducerByteRate       Key = iota // producer_byte_rate, bytes/s
	ConsumerByteRate                  // consumer_byte_rate, bytes/s
	RequestPercentage                 // request_percentage, % of one thread
	ControllerMutationRate            // controller_mutation_rate, partitions/s
	ProducerIDsRate                   // producer_ids_rate, new producer ids/s (Tollgate's, KIP-936)

	// NumKeys is how many client quota keys there are.
	NumKeys
)

var keyNames = [NumKeys]string{
	ProducerByteRate:       "producer_byte_rate",
	ConsumerByteRate:       "consumer_byte_rate",
	RequestPercentage:      "request_percentage",
	ControllerMutationRate: "controller_mutation_rate",
	ProducerIDsRate:        "producer_ids_rate",
}

// Keys lists every client quota key.
func Keys() []Key {
	return []Key{ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate, ProducerIDsRate}
}

// String returns Kafka's configuration name of the key.
func (k Key) String() string {
	if k < NumKeys {
		return keyNames[k]
	}
	return "Key(" + strconv.Itoa(int(k)) + ")"
}

// Valid reports whether k is one of the client quota keys.
func (k Key) Valid() bool { return k < NumKeys }

// Counted reports whether k counts events (partitions mutated, producer
// ids) on a token bucket over Kafka's controller quota window, rather
// than bytes or time.
func (k Key) Counted() bool { return k == ControllerMutationRate || k == ProducerIDsRate }

// Kafka reports whether Kafka's brokers know the key.
func (k Key) Kafka() bool { return k < ProducerIDsRate }

// ByteRate reports whether k is producer_byte_rate or consumer_byte_rate.
func (k Key) ByteRate() bool { return k == ProducerByteRate || k == ConsumerByteRate }

// ParseKey maps a Kafka configuration name to its Key.
func ParseKey(s string) (Key, bool) {
	for k, n := range keyNames {
		if n == s {
			return Key(k), true
		}
	}
	return 0, false
}

type nameKind uint8

const (
	absent nameKind = iota
	exact
	dflt
	prefix
)

// Name is one component (user or client-id) of a quota entity: absent (the
// zero Name), a specific name, or the default; a client-id may also be a
// prefix (Redpanda's client-id-prefix). The default is its own kind rather
// than a reserved string because Kafka names are arbitrary: a user may
// literally be called "<default>" and must not become the default.
type Name struct {
	kind nameKind
	name string
}

// Exact names one specific user or client-id. Any string is allowed, and it
// is kept byte for byte.
func Exact(name string) Name { return Name{kind: exact, name: name} }

// Default is the default user or default client-id (entity_name = null on
// the wire).
func Default() Name { return Name{kind: dflt} }

// Prefix is a client-id prefix: the entity {client-id-prefix: p} is one
// quota shared by every client-id that starts with p (Redpanda's
// client-id-prefix entity). Only a client-id component may be a prefix, and
// only alone or with a topic (Entity.Validate). A topic component may be a
// prefix too: one quota shared by every topic that starts with it.
func Prefix(p string) Name { return Name{kind: prefix, name: p} }

// IsSet reports whether the component is present (exact, default or prefix).
func (n Name) IsSet() bool { return n.kind != absent }

// IsDefault reports whether the component is the default.
func (n Name) IsDefault() bool { return n.kind == dflt }

// IsExact reports whether the component names a specific user or client-id.
func (n Name) IsExact() bool { return n.kind == exact }

// IsPrefix reports whether the component is a client-id prefix.
func (n Name) IsPrefix() bool { return n.kind == prefix }

// Value returns the exact name or the prefix, "" for a default or absent
// component.
func (n Name) Value() string { return n.name }

// String renders the component for logs: exact names are quoted so that a
// name spelled "<default>" cannot be confused with the default.
func (n Name) String() string {
	switch n.kind {
	case exact:
		return strconv.Quote(n.name)
	case dflt:
		return "<default>"
	case prefix:
		return strconv.Quote(n.name) + "*"
	}
	return "<absent>"
}

// Entity is a quota entity: a user, a client-id, or both, each exact or
// default; a client-id prefix alone; or, beyond Kafka, a per-topic quota: a
// topic or topic prefix (Topic) for a user (exact or default), a client-id
// prefix, or every client (neither). It is comparable and can be used as a
// map key.
//
// A tenant (a named set of principals) is meant to be one more principal
// component of a per-topic entity, between an exact user and the default
// user in topicTable's principal order; nothing else of the per-topic
// machinery depends on which principal kinds exist.
type Entity struct {
	User   Name
	Client Name
	// Topic is exact (one topic) or a prefix (every topic starting with
	// it, one bucket for all of them); absent for a client quota.
	Topic Name
}

// TopicEntity is the per-topic entity of principal p (a user, a client-id
// prefix, or the zero Entity for every client) on topic t (Exact or
// Prefix).
func TopicEntity(p Entity, t Name) Entity { p.Topic = t; return p }

// IsTopic reports whether the entity is a per-topic quota.
func (e Entity) IsTopic() bool { return e.Topic.kind != absent }

// UserEntity is the entity {user}.
func UserEntity(user Name) Entity { return Entity{User: user} }

// ClientEntity is the entity {client-id}.
func ClientEntity(client Name) Entity { return Entity{Client: client} }

// UserClientEntity is the entity {user, client-id}.
func UserClientEntity(user, client Name) Entity { return Entity{User: user, Client: client} }

// ClientPrefixEntity is the entity {client-id-prefix: p}.
func ClientPrefixEntity(p string) Entity { return Entity{Client: Prefix(p)} }

// Level returns which of the precedence levels the entity configures, or
// LevelNone if it has no component (or is not valid: a prefix with a user).
func (e Entity) Level() Level {
	if e.Topic.kind != absent {
		switch {
		case e.User.kind == exact:
			return LevelUserTopic
		case e.User.kind == dflt:
			return LevelDefaultUserTopic
		case e.Client.kind == prefix:
			return LevelClientPrefixTopic
		}
		return LevelTopic
	}
	if e.Client.kind == prefix {
		if e.User.kind != absent {
			return LevelNone
		}
		return LevelClientPrefix
	}
	switch e.User.kind {
	case exact:
		switch e.Client.kind {
		case exact:
			return LevelUserClient
		case dflt:
			return LevelUserDefaultClient
		}
		return LevelUser
	case dflt:
		switch e.Client.kind {
		case exact:
			return LevelDefaultUserClient
		case dflt:
			return LevelDefaultUserDefaultClient
		}
		return LevelDefaultUser
	}
	switch e.Client.kind {
	case exact:
		return LevelClient
	case dflt:
		return LevelDefaultClient
	}
	return LevelNone
}

// Validate rejects entities Kafka's AlterClientQuotas would reject: no
// component at all, or an exact name that is empty; and a client-id prefix
// that is empty or comes with a user (a prefix group stands alone, as in
// Redpanda), or a user that is a prefix. Its messages are CheckEntity's
// for the same mistakes.
func (e Entity) Validate() error {
	if e.Topic.kind != absent {
		return e.validateTopic()
	}
	if !e.User.IsSet() && !e.Client.IsSet() {
		return errors.New(msgEmptyEntity)
	}
	if e.User.kind == prefix {
		return fmt.Errorf("quota: a user cannot be a prefix")
	}
	if e.Client.kind == prefix {
		switch {
		case e.User.IsSet():
			return errors.New(msgPrefixAlone)
		case e.Client.name == "":
			return errors.New("Empty client-id-prefix not supported")
		}
		return nil
	}
	if e.User.kind == exact && e.User.name == "" {
		return errors.New("Empty user not supported")
	}
	if e.Client.kind == exact && e.Client.name == "" {
		return errors.New("Empty client-id not supported")
	}
	return nil
}

// validateTopic checks a per-topic entity: a named topic or topic prefix,
// for an exact or default user, a client-id prefix, or nobody in
// particular (every client).
func (e Entity) validateTopic() error {
	switch {
	case e.Topic.kind == dflt:
		return fmt.Errorf(msgTopicDefault, TypeTopic)
	case e.Topic.name == "" && e.Topic.kind == prefix:
		return errors.New("Empty topic-prefix not supported")
	case e.Topic.name == "":
		return errors.New("Empty topic not supported")
	case e.User.kind == prefix:
		return fmt.Errorf("quota: a user cannot be a prefix")
	case e.User.kind == exact && e.User.name == "":
		return errors.New("Empty user not supported")
	case e.Client.kind == exact || e.Client.kind == dflt:
		return errors.New(msgTopicWith)
	case e.Client.kind == prefix && e.User.IsSet():
		return errors.New(msgTopicPrefix)
	case e.Client.kind == prefix && e.Client.name == "":
		return errors.New("Empty client-id-prefix not supported")
	}
	return nil
}

// String renders the entity for logs, e.g. user="alice",client-id=<default>,
// client-id-prefix="bar-" or user="alice",topic-prefix="logs-".
func (e Entity) String() string {
	if e.Topic.kind != absent {
		t := "topic=" + strconv.Quote(e.Topic.name)
		if e.Topic.kind == prefix {
			t = "topic-prefix=" + strconv.Quote(e.Topic.name)
		}
		if p := (Entity{User: e.User, Client: e.Client}); p.User.IsSet() || p.Client.IsSet() {
			return p.String() + "," + t
		}
		return t
	}
	if e.Client.kind == prefix && !e.User.IsSet() {
		return "client-id-prefix=" + strconv.Quote(e.Client.name)
	}
	switch {
	case e.User.IsSet() && e.Client.IsSet():
		return "user=" + e.User.String() + ",client-id=" + e.Client.String()
	case e.User.IsSet():
		return "user=" + e.User.String()
	case e.Client.IsSet():
		return "client-id=" + e.Client.String()
	}
	return "<empty>"
}

// Level is one of Kafka's eight user/client-id quota levels, or Tollgate's
// client-id prefix level between Kafka's 7 and 8, in precedence order (the
// first wins). LevelNone means no quota applies.
type Level uint8

// The levels of §3.2, with who shares one bucket. LevelClientPrefix is
// Redpanda's client-id-prefix: after an exact client-id (7), before the
// default client-id (8); docs/quotas.md has the table.
const (
	LevelNone                     Level = iota // no quota: unlimited
	LevelUserClient                            // (U, C): all connections of U with C
	LevelUserDefaultClient                     // (U, default): one bucket per client-id of U
	LevelUser                                  // (U): all client-ids of U together
	LevelDefaultUserClient                     // (default, C): one bucket per user using C
	LevelDefaultUserDefaultClient              // (default, default): one bucket per (user, client-id)
	LevelDefaultUser                           // (default): one bucket per user
	LevelClient                                // (C): all users of C together
	LevelClientPrefix                          // (C-prefix P): all client-ids starting with P, all users, together
	LevelDefaultClient                         // (client default): one bucket per client-id

	// The per-topic levels (beyond Kafka), in precedence order; each on a
	// topic or a topic prefix (exact first, then the longest prefix).
	LevelUserTopic         // (U, topic): U's traffic to the topic
	LevelDefaultUserTopic  // (default user, topic): one bucket per user
	LevelClientPrefixTopic // (client-id prefix P, topic): every client-id starting with P, together
	LevelTopic             // (topic): every client together
)

var levelNames = [...]string{
	LevelNone:                     "none",
	LevelUserClient:               "user+client-id",
	LevelUserDefaultClient:        "user+default-client-id",
	LevelUser:                     "user",
	LevelDefaultUserClient:        "default-user+client-id",
	LevelDefaultUserDefaultClient: "default-user+default-client-id",
	LevelDefaultUser:              "default-user",
	LevelClient:                   "client-id",
	LevelClientPrefix:             "client-id-prefix",
	LevelDefaultClient:            "default-client-id",
	LevelUserTopic:                "user+topic",
	LevelDefaultUserTopic:         "default-user+topic",
	LevelClientPrefixTopic:        "client-id-prefix+topic",
	LevelTopic:                    "topic",
}

// String names the level for logs and metrics.
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// Compare orders entities for listings: by level, then by name.
func Compare(a, b Entity) int {
	return cmp.Or(
		cmp.Compare(a.Level(), b.Level()),
		cmp.Compare(a.User.name, b.User.name),
		cmp.Compare(a.Client.name, b.Client.name),
		cmp.Compare(a.Topic.kind, b.Topic.kind),
		cmp.Compare(a.Topic.name, b.Topic.name),
	)
}
