package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The client-quota entity types of Kafka's wire model, Redpanda's
// client-id-prefix (a Tollgate extension to Kafka's model: one quota shared
// by every client-id that starts with the name), and Tollgate's per-topic
// quotas: topic and topic-prefix, each with a user, a client-id-prefix or
// alone.
const (
	TypeUser           = "user"
	TypeClientID       = "client-id"
	TypeIP             = "ip"
	TypeClientIDPrefix = "client-id-prefix"
	TypeTopic          = "topic"
	TypeTopicPrefix    = "topic-prefix"
)

// KnownType reports whether t is one of the entity types.
func KnownType(t string) bool {
	switch t {
	case TypeUser, TypeClientID, TypeIP, TypeClientIDPrefix, TypeTopic, TypeTopicPrefix:
		return true
	}
	return false
}

// The quota keys beyond Key's: the ip entity's only key, and Tollgate's
// option keys (Options).
const (
	// KeyConnectionCreationRate is the ip entity's only key.
	KeyConnectionCreationRate = "connection_creation_rate"
	// KeyShadow marks every quota of its entity shadow (Options.Shadow):
	// measured and shown, not enforced. Its only value is 1; removing it
	// is the switch to enforced.
	KeyShadow = "shadow"
	// KeyBurstSeconds is the start-up burst of its entity's token buckets
	// in seconds of quota (Options.Burst): 0 for none; absent, Kafka's.
	KeyBurstSeconds = "burst_seconds"
)

// ValueType is a quota key's ConfigDef type.
type ValueType uint8

// The value types.
const (
	TypeDouble ValueType = iota
	TypeLong
	TypeInt
	TypeFlag  // Tollgate's: 1 sets it, removing the key clears it
	TypeBurst // Tollgate's: seconds, 0 to MaxBurstSeconds
)

// KeySet is the keys an entity may carry, with their types.
type KeySet map[string]ValueType

// The client quota keys and their types (Kafka's QuotaConfigs): the four
// user/client-id keys, and connection_creation_rate for ip entities only.
// Beyond Kafka, user, client-id and client-id-prefix entities take
// Tollgate's option keys; a per-topic quota the byte rates and the options.
var (
	UserClientKeys = KeySet{
		"producer_byte_rate":       TypeLong,
		"consumer_byte_rate":       TypeLong,
		"request_percentage":       TypeDouble,
		"controller_mutation_rate": TypeDouble,
		"producer_ids_rate":        TypeDouble,
		KeyShadow:                  TypeFlag,
		KeyBurstSeconds:            TypeBurst,
	}
	IPKeys    = KeySet{KeyConnectionCreationRate: TypeInt}
	TopicKeys = KeySet{
		"producer_byte_rate": TypeLong,
		"consumer_byte_rate": TypeLong,
		KeyShadow:            TypeFlag,
		KeyBurstSeconds:      TypeBurst,
	}
)

// Part is one (type, name) pair of an entity as Kafka's API carries it:
// Name nil is the default entity of the type.
type Part struct {
	Type string
	Name *string
}

// get returns the name of the part of type typ.
func get(parts []Part, typ string) (*string, bool) {
	for _, p := range parts {
		if p.Type == typ {
			return p.Name, true
		}
	}
	return nil, false
}

// Messages of the entity checks. Kafka's own are
// ClientQuotaControlManager's; the client-id-prefix and per-topic ones are
// Tollgate's, in Kafka's style (Kafka has no such types and answers
// "Unhandled client quota entity type").
const (
	msgEmptyEntity   = "Invalid empty client quota entity"
	msgIPCombined    = "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId" // "shouldnot" (sic) is Kafka's text, asserted by its tests
	msgPrefixAlone   = "Invalid quota entity combination, a client-id-prefix entity stands alone: it cannot be combined with user, client-id or ip"
	msgPrefixDefault = "Invalid quota entity, client-id-prefix has no default entity (a default client-id quota covers every client-id)"
	msgTopicBoth     = "Invalid quota entity combination, a quota is on a topic or on a topic-prefix, not both"
	msgTopicDefault  = "Invalid quota entity, %s has no default entity (a quota is on a named topic or on the topics of a prefix)"
	msgTopicWith     = "Invalid quota entity combination, a topic or topic-prefix quota is for a user, a client-id-prefix or every client: it cannot be combined with client-id or ip"
	msgTopicPrefix   = "Invalid quota entity combination, a client-id-prefix cannot be combined with a user"
)

// CheckParts is ClientQuotaControlManager.validateEntity: the entity is
// not empty, every type is known and no name is "". The parts are checked
// in their order, which decides the message when there are several
// problems.
func CheckParts(parts []Part) error {
	if len(parts) == 0 {
		return errors.New(msgEmptyEntity)
	}
	for _, p := range parts {
		if !KnownType(p.Type) {
			return errors.New("Unhandled client quota entity type: " + p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return errors.New("Empty " + p.Type + " not supported")
		}
	}
	return nil
}

// KeysFor is Kafka's configKeysForEntityType on parts CheckParts accepted:
// ip goes alone, and a named ip must be an address. Beyond Kafka, a
// client-id-prefix goes alone too and must have a name (Redpanda's
// rules); and a topic or topic-prefix (a per-topic quota) goes alone or
// with a user or a client-id-prefix. It returns the keys the entity may
// carry.
func KeysFor(parts []Part) (KeySet, error) {
	_, hasTopic := get(parts, TypeTopic)
	_, hasTopicPrefix := get(parts, TypeTopicPrefix)
	if hasTopic || hasTopicPrefix {
		return topicKeysFor(parts)
	}
	ip, hasIP := get(parts, TypeIP)
	_, hasUser := get(parts, TypeUser)
	_, hasClient := get(parts, TypeClientID)
	prefix, hasPrefix := get(parts, TypeClientIDPrefix)
	switch {
	case hasIP && (hasUser || hasClient):
		return nil, errors.New(msgIPCombined)
	case hasPrefix && len(parts) > 1:
		return nil, errors.New(msgPrefixAlone)
	case hasPrefix && prefix == nil:
		return nil, errors.New(msgPrefixDefault)
	case hasPrefix:
		return UserClientKeys, nil
	case hasIP:
		if ip != nil {
			if err := CheckIP(*ip); err != nil {
				return nil, err
			}
		}
		return IPKeys, nil
	case hasUser || hasClient:
		return UserClientKeys, nil
	}
	return nil, errors.New(msgEmptyEntity)
}

// topicKeysFor is KeysFor for a per-topic entity.
func topicKeysFor(parts []Part) (KeySet, error) {
	topic, hasTopic := get(parts, TypeTopic)
	tprefix, hasTopicPrefix := get(parts, TypeTopicPrefix)
	_, hasIP := get(parts, TypeIP)
	_, hasUser := get(parts, TypeUser)
	_, hasClient := get(parts, TypeClientID)
	prefix, hasPrefix := get(parts, TypeClientIDPrefix)
	switch {
	case hasTopic && hasTopicPrefix:
		return nil, errors.New(msgTopicBoth)
	case hasTopic && topic == nil:
		return nil, fmt.Errorf(msgTopicDefault, TypeTopic)
	case hasTopicPrefix && tprefix == nil:
		return nil, fmt.Errorf(msgTopicDefault, TypeTopicPrefix)
	case hasClient || hasIP:
		return nil, errors.New(msgTopicWith)
	case hasPrefix && hasUser:
		return nil, errors.New(msgTopicPrefix)
	case hasPrefix && prefix == nil:
		return nil, errors.New(msgPrefixDefault)
	}
	return TopicKeys, nil
}

// CheckEntity is CheckParts, then KeysFor.
func CheckEntity(parts []Part) (KeySet, error) {
	if err := CheckParts(parts); err != nil {
		return nil, err
	}
	return KeysFor(parts)
}

// CheckIP accepts what Tollgate can enforce: an IPv4 or IPv6 literal and,
// beyond Kafka, a CIDR range (ParseIPEntity). Kafka also accepts a host
// name that resolves on the controller; Tollgate does not resolve names (an
// address pinned at alter time would silently go stale), so a host name
// gets Kafka's message for one that does not resolve.
func CheckIP(name string) error {
	if name == strings.TrimSpace(name) {
		_, err := ParseIPEntity(name)
		if err == nil {
			return nil
		}
		if strings.Contains(name, "/") {
			return err
		}
	}
	return errors.New(name + " is not a valid IP or resolvable host.")
}

// CheckValue is Kafka's validateQuotaKeyValue for a value set on an
// entity that takes keys. Beyond Kafka, NaN is refused as not greater than
// 0: Kafka lets it through every check and stores it.
func CheckValue(keys KeySet, key string, v float64) error {
	typ, ok := keys[key]
	if !ok {
		return errors.New("Invalid configuration key " + key)
	}
	switch typ {
	case TypeFlag:
		if v != 1 {
			return errors.New("Quota " + key + " must be 1 (it marks the entity's quotas " + key + ": measured, not enforced; remove the key to enforce them)")
		}
		return nil
	case TypeBurst:
		if !(v >= 0 && v <= MaxBurstSeconds) {
			return errors.New("Quota " + key + " must be from 0 to " + strconv.Itoa(MaxBurstSeconds) +
				" (seconds of quota a fresh client may send at once; 0: none; remove the key for Kafka's, 10)")
		}
		return nil
	}
	if !(v > 0) {
		return errors.New("Quota " + key + " must be greater than 0")
	}
	switch typ {
	case TypeLong:
		// Java compares with Long.MAX_VALUE as a double, i.e. 2^63.
		if v > math.MaxInt64 {
			return errors.New("Proposed value for " + key + " is too large for a LONG.")
		}
	case TypeInt:
		if v > math.MaxInt32 {
			return errors.New("Proposed value for " + key + " is too large for an INT.")
		}
	default:
		return nil
	}
	// Java's % on doubles truncates like math.Mod: only values at most
	// 1e-6 above an integer pass, 2.9999999 does not.
	if math.Abs(math.Mod(v, 1)) > 1e-6 {
		return errors.New(key + " cannot be a fractional value.")
	}
	return nil
}
