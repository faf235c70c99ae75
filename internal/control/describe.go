package control

import (
	"context"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeClientQuotas: v0-1
//
// KIP-546: client quota configuration APIs. v1 is the flexible encoding and
// adds nothing else.
//
// Behavior:
// * ACL: DESCRIBE_CONFIGS on CLUSTER (Authorizer); denied: 31 "Cluster
// authorization failed." for the whole response, entries null
// * Beyond Kafka, a tenant's admin or principal (not a quota admin) sees
// its tenant's principals' user entities only; a filter naming (EXACT) a
// user outside them, or the default user, gets 31 (delegate.go)
// * Filter validation as Kafka's ClientQuotasImage, component by component
// in request order, the first failure answering for the whole response
// with entries null: empty type (42), a type twice (42), an unknown type
// (35 UNSUPPORTED_VERSION), EXACT without a match, DEFAULT or SPECIFIED
// with one, an unknown match type (42); then ip with user or client-id (42)
// * client-id-prefix (Tollgate and Redpanda): EXACT matches a prefix entity
// by its prefix, ANY every prefix entity; DEFAULT is refused (42: a prefix
// has no default), and so is client-id-prefix with any other component
// (42: prefix entities stand alone, such a filter could match nothing)
// * topic and topic-prefix (Tollgate's per-topic quotas): EXACT and ANY as
// for any type; DEFAULT is refused (42: neither has a default), and so is a
// filter with both, or with client-id or ip (42: it could match nothing).
// A filter whose components name neither lists no per-topic entity, so
// Kafka's tools see only what they know (an empty filter lists everything)
// * EXACT matches the raw name, case-sensitively; DEFAULT matches the
// default (null name); SPECIFIED matches any name, defaults included
// * strict: the entity has exactly as many types as there are components;
// no components: every entity (ip included) unless strict, then none
// * Every key and value of each matching entity; entities exist only while
// they have a key
//
// Where Tollgate differs from Kafka:
// * Entries are ordered by entity (canonical key) and values by key; Kafka's
// order is that of its hash maps
// * Answers from the store, so an Alter is visible at once (Kafka's brokers
// lag their metadata log)
// * A store read failure answers -1 UNKNOWN_SERVER_ERROR

// Describe answers a DescribeClientQuotas request.
func (c *ClientQuotas) Describe(ctx context.Context, who Initiator, req *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(code int16, msg string) *kmsg.DescribeClientQuotasResponse {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		resp.Entries = nil
		return resp
	}
	if !c.authorize(who, OpDescribeConfigs) {
		return fail(errClusterAuthorizationFailed, msgClusterAuthorizationFailed)
	}
	f, res := parseFilter(req.Components, req.Strict)
	if res.failed() {
		return fail(res.code, res.msg)
	}
	var dl *delegation // a tenant's principal or admin sees its tenant only
	if c.Tenants != nil && !c.authorize(who, OpAlterConfigs) {
		dl = c.Tenants.delegationOf(who)
	}
	if dl != nil {
		if why := dl.describeRefusal(req.Components); why != "" {
			res := delegatedDenial(who, why)
			c.recordDenied(ctx, describeEvent(who, req.Components, res))
			return fail(res.code, res.msg)
		}
	}
	all, err := c.matching(f)
	if err != nil {
		return fail(errUnknownServerError, "Tollgate could not read its store: "+err.Error())
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, eq := range all {
		if !f.match(eq.Entity) || (dl != nil && !dl.covers(eq.Entity)) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, comp := range eq.Entity {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = comp.Type, comp.NamePtr()
			entry.Entity = append(entry.Entity, ee)
		}
		keys := make([]string, 0, len(eq.Values))
		for k := range eq.Values {
			keys = append(keys, k)
		}
		for _, k := range javaHashOrder(keys) {
			ev := kmsg.NewDescribeClientQuotasResponseEntryValue()
			ev.Key, ev.Value = k, eq.Values[k]
			entry.Values = append(entry.Values, ev)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp
}

// matching is the entities that may pass f, values merged with the fixed
// quotas: for a strict filter of exact components, which names one
// entity, that entity alone, read by its key (not every entity of the
// store); for any other filter, all of them.
func (c *ClientQuotas) matching(f filter) ([]store.EntityQuotas, error) {
	e, ok := f.entity()
	if !ok {
		return c.merged()
	}
	vals, err := c.Store.ClientQuota(e)
	if err != nil {
		return nil, err
	}
	var fixed []store.EntityQuotas
	for _, fq := range c.fixedQuotas() {
		if fq.Entity.Equal(e) {
			fixed = append(fixed, fq)
		}
	}
	var base []store.EntityQuotas
	if len(vals) > 0 {
		base = []store.EntityQuotas{{Entity: e, Values: vals}}
	}
	return Overlay(base, fixed), nil
}

// entity is the one entity a strict filter of exact components names.
func (f filter) entity() (store.Entity, bool) {
	if !f.strict || len(f.any) > 0 || len(f.exact) == 0 {
		return nil, false
	}
	cs := make([]store.Component, 0, len(f.exact))
	for t, name := range f.exact {
		if name == nil {
			cs = append(cs, store.DefaultOf(t))
		} else {
			cs = append(cs, store.Named(t, *name))
		}
	}
	e, err := store.NewEntity(cs...)
	return e, err == nil
}

// filter is a validated DescribeClientQuotas filter.
type filter struct {
	exact  map[string]*string // type → name, nil for DEFAULT
	any    map[string]bool    // SPECIFIED types
	strict bool
	topics bool // a component names topic or topic-prefix
}

// parseFilter validates the components as ClientQuotasImage.describe does.
func parseFilter(comps []kmsg.DescribeClientQuotasRequestComponent, strict bool) (filter, apiError) {
	f := filter{exact: map[string]*string{}, any: map[string]bool{}, strict: strict}
	for _, comp := range comps {
		t := comp.EntityType
		if t == "" {
			return f, invalid("Invalid empty entity type.")
		}
		if _, ok := f.exact[t]; ok || f.any[t] {
			return f, invalid("Entity type " + t + " cannot appear more than once in the filter.")
		}
		if !store.KnownType(t) {
			return f, apiError{code: errUnsupportedVersion, msg: "Unsupported entity type " + t}
		}
		switch comp.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if comp.Match == nil {
				return f, invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			m := *comp.Match
			f.exact[t] = &m
		case kmsg.QuotasMatchTypeDefault:
			if comp.Match != nil {
				return f, invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			if t == store.TypeClientIDPrefix || t == store.TypeTopic || t == store.TypeTopicPrefix {
				return f, invalid("Request specified MATCH_TYPE_DEFAULT for " + t + ", which has no default entity.")
			}
			f.exact[t] = nil
		case kmsg.QuotasMatchTypeAny:
			if comp.Match != nil {
				return f, invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			f.any[t] = true
		default:
			return f, invalid("Unknown match type " + matchTypeString(int8(comp.MatchType)))
		}
	}
	has := func(t string) bool {
		_, ok := f.exact[t]
		return ok || f.any[t]
	}
	if has(store.TypeIP) && (has(store.TypeUser) || has(store.TypeClientID)) {
		return f, invalid("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	topic := has(store.TypeTopic) || has(store.TypeTopicPrefix)
	if has(store.TypeClientIDPrefix) && (has(store.TypeIP) || has(store.TypeUser) || has(store.TypeClientID)) {
		return f, invalid("Invalid entity filter component combination. A client-id-prefix filter component should not be used with another one: client-id-prefix entities stand alone.")
	}
	if topic && (has(store.TypeIP) || has(store.TypeClientID) || has(store.TypeTopic) && has(store.TypeTopicPrefix)) {
		return f, invalid("Invalid entity filter component combination. A topic or topic-prefix filter component should not be used with client-id, ip or each other: no per-topic entity has them.")
	}
	f.topics = topic
	return f, apiError{}
}

// match reports whether an entity passes the filter.
func (f filter) match(e store.Entity) bool {
	n := len(f.exact) + len(f.any)
	if n == 0 {
		return !f.strict
	}
	if f.strict && len(e) != n {
		return false
	}
	if !f.topics && (e.Has(store.TypeTopic) || e.Has(store.TypeTopicPrefix)) {
		return false // a per-topic entity, to a filter that does not ask for one
	}
	for t, name := range f.exact {
		c, ok := e.Get(t)
		if !ok {
			return false
		}
		if name == nil {
			if !c.Default {
				return false
			}
		} else if c.Default || c.Name != *name {
			return false
		}
	}
	for t := range f.any {
		if !e.Has(t) {
			return false
		}
	}
	return true
}

// javaHashOrder orders keys as a java.util.HashMap<String, Double> built
// by putting them in one at a time iterates them: by bucket, the spread
// String.hashCode masked by the table's size (16, doubled past three
// quarters full). Kafka's broker answers an entity's quota values in that
// order, and the Java admin client's own map of them then depends on it
// (kafka-configs prints "consumer_byte_rate=…, request_percentage=…,
// producer_byte_rate=…"). Keys of one bucket, which Java keeps in
// insertion order, are taken by name.
func javaHashOrder(keys []string) []string {
	size := 16
	for len(keys) > size*3/4 {
		size *= 2
	}
	bucket := func(k string) int {
		var h int32
		for _, c := range k { // UTF-16 code units: quota keys are ASCII
			h = 31*h + int32(c)
		}
		u := uint32(h)
		return int((u ^ u>>16) & uint32(size-1))
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := bucket(a) - bucket(b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys
}
