package control

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes used by the control plane, from kerr.
var (
	errNone                       int16 = 0
	errUnknownServerError               = kerr.UnknownServerError.Code
	errClusterAuthorizationFailed       = kerr.ClusterAuthorizationFailed.Code
	errUnsupportedVersion               = kerr.UnsupportedVersion.Code
	errInvalidRequest                   = kerr.InvalidRequest.Code
)

// msgClusterAuthorizationFailed is Errors.CLUSTER_AUTHORIZATION_FAILED's
// default message, what Kafka answers a denied request with.
const msgClusterAuthorizationFailed = "Cluster authorization failed."

// configType is a quota key's ConfigDef type.
type configType uint8

const (
	typeDouble configType = iota
	typeLong
	typeInt
	typeFlag  // Tollgate's: 1 sets it, removing the key clears it
	typeBurst // Tollgate's: seconds, 0 to quota.MaxBurstSeconds
)

// The client quota keys and their types (Kafka's QuotaConfigs): the four
// user/client-id keys, and connection_creation_rate for ip entities only.
// Beyond Kafka, user, client-id and client-id-prefix entities take
// Tollgate's option keys (quota.Options).
var (
	userClientKeys = map[string]configType{
		"producer_byte_rate":       typeLong,
		"consumer_byte_rate":       typeLong,
		"request_percentage":       typeDouble,
		"controller_mutation_rate": typeDouble,
		KeyShadow:                  typeFlag,
		KeyBurstSeconds:            typeBurst,
	}
	ipKeys = map[string]configType{
		"connection_creation_rate": typeInt,
	}
	// topicKeys are a per-topic quota's: the byte rates and the options.
	topicKeys = map[string]configType{
		"producer_byte_rate": typeLong,
		"consumer_byte_rate": typeLong,
		KeyShadow:            typeFlag,
		KeyBurstSeconds:      typeBurst,
	}
)

// keyConnectionCreationRate is the ip entity's only key.
const keyConnectionCreationRate = "connection_creation_rate"

// KeyShadow marks every quota of its entity shadow (quota.Options.Shadow):
// measured and shown, not enforced. Its only value is 1; removing it is the
// switch to enforced, one audited AlterClientQuotas entry.
const KeyShadow = "shadow"

// KeyBurstSeconds is the start-up burst of its entity's token buckets in
// seconds of quota (quota.Options.Burst): 0 for none; absent, Kafka's.
const KeyBurstSeconds = "burst_seconds"

// apiError is a Kafka error code and message; code 0 is success.
type apiError struct {
	code int16
	msg  string
}

func (e apiError) failed() bool { return e.code != errNone }

func invalid(msg string) apiError { return apiError{code: errInvalidRequest, msg: msg} }

// validateEntity is ClientQuotaControlManager.validateEntity: the entity
// is not empty, every type is known and no name is "". The pairs are
// checked in the map's iteration order, which decides the message when
// there are several problems.
func validateEntity(e javaEntity) apiError {
	if len(e.pairs) == 0 {
		return invalid("Invalid empty client quota entity")
	}
	for _, p := range e.pairs {
		if !store.KnownType(p.typ) {
			return invalid("Unhandled client quota entity type: " + p.typ)
		}
		if p.name != nil && *p.name == "" {
			return invalid("Empty " + p.typ + " not supported")
		}
	}
	return apiError{}
}

// Messages of the client-id-prefix entity, a Tollgate extension (Kafka has
// no such type and answers "Unhandled client quota entity type").
const (
	msgPrefixAlone   = "Invalid quota entity combination, a client-id-prefix entity stands alone: it cannot be combined with user, client-id or ip"
	msgPrefixDefault = "Invalid quota entity, client-id-prefix has no default entity (a default client-id quota covers every client-id)"
)

// Messages of the per-topic entities, a Tollgate extension.
const (
	msgTopicBoth    = "Invalid quota entity combination, a quota is on a topic or on a topic-prefix, not both"
	msgTopicDefault = "Invalid quota entity, %s has no default entity (a quota is on a named topic or on the topics of a prefix)"
	msgTopicWith    = "Invalid quota entity combination, a topic or topic-prefix quota is for a user, a client-id-prefix or every client: it cannot be combined with client-id or ip"
	msgTopicPrefix  = "Invalid quota entity combination, a client-id-prefix cannot be combined with a user"
)

// keysForEntity is configKeysForEntityType: ip goes alone, and a named ip
// must be an address. Beyond Kafka, a client-id-prefix goes alone too and
// must have a name (Redpanda's rules); and a topic or topic-prefix (a
// per-topic quota) goes alone or with a user or a client-id-prefix. It
// returns the keys the entity may carry.
func keysForEntity(e javaEntity) (map[string]configType, apiError) {
	ip, hasIP := e.get(store.TypeIP)
	_, hasUser := e.get(store.TypeUser)
	_, hasClient := e.get(store.TypeClientID)
	prefix, hasPrefix := e.get(store.TypeClientIDPrefix)
	topic, hasTopic := e.get(store.TypeTopic)
	tprefix, hasTopicPrefix := e.get(store.TypeTopicPrefix)
	switch {
	case hasTopic && hasTopicPrefix:
		return nil, invalid(msgTopicBoth)
	case hasTopic && topic == nil:
		return nil, invalid(fmt.Sprintf(msgTopicDefault, store.TypeTopic))
	case hasTopicPrefix && tprefix == nil:
		return nil, invalid(fmt.Sprintf(msgTopicDefault, store.TypeTopicPrefix))
	case (hasTopic || hasTopicPrefix) && (hasClient || hasIP):
		return nil, invalid(msgTopicWith)
	case (hasTopic || hasTopicPrefix) && hasPrefix && hasUser:
		return nil, invalid(msgTopicPrefix)
	case (hasTopic || hasTopicPrefix) && hasPrefix && prefix == nil:
		return nil, invalid(msgPrefixDefault)
	case hasTopic || hasTopicPrefix:
		return topicKeys, apiError{}
	}
	switch {
	case hasIP && (hasUser || hasClient):
		// "shouldnot" (sic) is Kafka's text, asserted by its tests.
		return nil, invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
	case hasPrefix && len(e.pairs) > 1:
		return nil, invalid(msgPrefixAlone)
	case hasPrefix && prefix == nil:
		return nil, invalid(msgPrefixDefault)
	case hasPrefix:
		return userClientKeys, apiError{}
	case hasIP:
		if ip != nil {
			if e := validIPEntity(*ip); e.failed() {
				return nil, e
			}
		}
		return ipKeys, apiError{}
	case hasUser || hasClient:
		return userClientKeys, apiError{}
	}
	return nil, invalid("Invalid empty client quota entity")
}

// validIPEntity accepts what Tollgate can enforce: an IPv4 or IPv6 literal
// and, beyond Kafka, a CIDR range (admission.ParseIPEntity). Kafka also
// accepts a host name that resolves on the controller; Tollgate does not
// resolve names (an address pinned at alter time would silently go stale),
// so a host name gets Kafka's message for one that does not resolve.
func validIPEntity(name string) apiError {
	if name == strings.TrimSpace(name) {
		_, err := admission.ParseIPEntity(name)
		if err == nil {
			return apiError{}
		}
		if strings.Contains(name, "/") {
			return invalid(err.Error())
		}
	}
	return invalid(name + " is not a valid IP or resolvable host.")
}

// validateKeyValue is validateQuotaKeyValue for a set (removals are not
// validated). Beyond Kafka, NaN is refused as not greater than 0: Kafka lets
// it through every check and stores it.
func validateKeyValue(keys map[string]configType, key string, v float64) apiError {
	typ, ok := keys[key]
	if !ok {
		return invalid("Invalid configuration key " + key)
	}
	switch typ {
	case typeFlag:
		if v != 1 {
			return invalid("Quota " + key + " must be 1 (it marks the entity's quotas " + key + ": measured, not enforced; remove the key to enforce them)")
		}
		return apiError{}
	case typeBurst:
		if !(v >= 0 && v <= quota.MaxBurstSeconds) {
			return invalid("Quota " + key + " must be from 0 to " + strconv.Itoa(quota.MaxBurstSeconds) +
				" (seconds of quota a fresh client may send at once; 0: none; remove the key for Kafka's, 10)")
		}
		return apiError{}
	}
	if !(v > 0) {
		return invalid("Quota " + key + " must be greater than 0")
	}
	switch typ {
	case typeLong:
		// Java compares with Long.MAX_VALUE as a double, i.e. 2^63.
		if v > math.MaxInt64 {
			return invalid("Proposed value for " + key + " is too large for a LONG.")
		}
	case typeInt:
		if v > math.MaxInt32 {
			return invalid("Proposed value for " + key + " is too large for an INT.")
		}
	default:
		return apiError{}
	}
	// Java's % on doubles truncates like math.Mod: only values at most
	// 1e-6 above an integer pass, 2.9999999 does not.
	if math.Abs(math.Mod(v, 1)) > 1e-6 {
		return invalid(key + " cannot be a fractional value.")
	}
	return apiError{}
}

// matchTypeString renders a match type as Java prints a byte.
func matchTypeString(m int8) string { return strconv.Itoa(int(m)) }
