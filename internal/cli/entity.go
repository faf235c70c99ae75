package cli

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// allKeys lists every quota key in a fixed order, for listings.
var allKeys = []string{
	"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
	model.KeyConnectionCreationRate, model.KeyShadow, model.KeyBurstSeconds,
}

func keyRank(k string) int {
	if i := slices.Index(allKeys, k); i >= 0 {
		return i
	}
	return len(allKeys)
}

func isClientQuotaKey(k string) bool { _, ok := model.ParseKey(k); return ok }

// isOptionKey reports whether k is one of Tollgate's option keys
// (model.Options), which user, client-id and client-id-prefix entities take.
func isOptionKey(k string) bool { return k == model.KeyShadow || k == model.KeyBurstSeconds }

// options reads an entity's options from its described values.
func options(vals map[string]float64) model.Options { return model.OptionsOf(vals) }

// part is one component of an entity: absent, the default, or a name.
type part struct {
	set  bool   // the component is present
	dflt bool   // it is the default (name null on the wire)
	name string // the name when not the default
}

func named(n string) part { return part{set: true, name: n} }
func dfltPart() part      { return part{set: true, dflt: true} }

// wirePart is the part of a nullable entity name: the default for null.
func wirePart(name *string) part {
	if name == nil {
		return dfltPart()
	}
	return named(*name)
}

// configsPart is the part of an entity name kafka-configs was given: the
// default for "".
func configsPart(n string) part {
	if n == "" {
		return dfltPart()
	}
	return named(n)
}

// wire is the nullable entity name.
func (p part) wire() *string {
	if p.dflt {
		return nil
	}
	n := p.name
	return &n
}

func comparePart(a, b part) int {
	rank := func(p part) int {
		switch {
		case !p.set:
			return 0
		case p.dflt:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.name, b.name))
}

// entity is a client quota entity: a user, a client-id or both, an ip, or a
// client-id prefix; or a per-topic quota: a topic or topic prefix with a
// user, a client-id prefix or alone. It is comparable.
type entity struct {
	user, client, ip, prefix part
	topic, topicPrefix       part
}

// isTopic reports whether the entity is a per-topic quota.
func (e entity) isTopic() bool { return e.topic.set || e.topicPrefix.set }

// componentTypes are the entity types on the wire (the quota model's:
// ClientQuotaEntity.USER, CLIENT_ID, IP, and Redpanda's client-id-prefix,
// which Tollgate accepts too; and Tollgate's per-topic topic and
// topic-prefix) in the canonical order, each with its name in a shape and
// its part of an entity.
var componentTypes = [...]struct {
	typ, shape string
	of         func(*entity) *part
}{
	{model.TypeUser, "user", func(e *entity) *part { return &e.user }},
	{model.TypeClientID, "client_id", func(e *entity) *part { return &e.client }},
	{model.TypeIP, "ip", func(e *entity) *part { return &e.ip }},
	{model.TypeClientIDPrefix, "client_id_prefix", func(e *entity) *part { return &e.prefix }},
	{model.TypeTopic, "topic", func(e *entity) *part { return &e.topic }},
	{model.TypeTopicPrefix, "topic_prefix", func(e *entity) *part { return &e.topicPrefix }},
}

// component is one present component of an entity: its type and part.
type component struct {
	typ string
	p   part
}

// components returns the present components in the canonical order user,
// client-id, ip, client-id-prefix, topic, topic-prefix.
func (e entity) components() []component {
	var out []component
	for _, c := range componentTypes {
		if p := *c.of(&e); p.set {
			out = append(out, component{c.typ, p})
		}
	}
	return out
}

// partOf is the entity's part of type typ; false for a type it has not.
func (e *entity) partOf(typ string) (*part, bool) {
	for _, c := range componentTypes {
		if c.typ == typ {
			return c.of(e), true
		}
	}
	return nil, false
}

func (e *entity) setPart(typ string, p part) bool {
	ep, ok := e.partOf(typ)
	if ok {
		*ep = p
	}
	return ok
}

// shape names which components an entity has, e.g. "user+client_id".
func (e entity) shape() string {
	var s []string
	for _, c := range componentTypes {
		if c.of(&e).set {
			s = append(s, c.shape)
		}
	}
	return strings.Join(s, "+")
}

func shapeRank(s string) int {
	return slices.Index(allShapes, s)
}

func compareEntities(a, b entity) int {
	if c := cmp.Compare(shapeRank(a.shape()), shapeRank(b.shape())); c != 0 {
		return c
	}
	for _, c := range componentTypes {
		if r := comparePart(*c.of(&a), *c.of(&b)); r != 0 {
			return r
		}
	}
	return 0
}

// String renders the entity for Tollgate's own output (quotas apply and
// resolve): user=alice,client-id=<default>. Names that could be misread
// are quoted.
func (e entity) String() string {
	var parts []string
	for _, c := range e.components() {
		v := "<default>"
		if !c.p.dflt {
			v = quoteName(c.p.name)
		}
		parts = append(parts, c.typ+"="+v)
	}
	return strings.Join(parts, ",")
}

func quoteName(n string) string { return model.QuoteName(n) }

// quotaEntity converts a user/client-id or client-id prefix entity for the
// quota package.
func (e entity) quotaEntity() (model.Entity, bool) {
	var parts []model.Part
	for _, c := range e.components() {
		parts = append(parts, model.Part{Type: c.typ, Name: c.p.wire()})
	}
	qe, err := model.EntityOf(parts)
	return qe, err == nil
}

// described is one entity and its quota values as DescribeClientQuotas
// returned them.
type described struct {
	entity entity
	values map[string]float64
}

// state is every quota configured on the cluster.
type state map[entity]map[string]float64

// describeAll fetches every client quota (an empty, non-strict filter).
// Entities with a component type this tool does not know are skipped.
func describeAll(ctx context.Context, cl *kgo.Client) ([]described, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, &serverError{err: err, msg: deref(resp.ErrorMessage)}
	}
	var out []described
entries:
	for _, en := range resp.Entries {
		var e entity
		for _, c := range en.Entity {
			if !e.setPart(c.Type, wirePart(c.Name)) {
				continue entries
			}
		}
		d := described{entity: e, values: map[string]float64{}}
		for _, v := range en.Values {
			d.values[v.Key] = v.Value
		}
		out = append(out, d)
	}
	return out, nil
}

func toState(ds []described) state {
	st := state{}
	for _, d := range ds {
		if st[d.entity] == nil {
			st[d.entity] = map[string]float64{}
		}
		for k, v := range d.values {
			st[d.entity][k] = v
		}
	}
	return st
}

// op is one change of an AlterClientQuotas entry.
type op struct {
	key    string
	value  float64
	remove bool
}

// alterResult is the outcome for one entity of an AlterClientQuotas.
type alterResult struct {
	entity entity
	err    *serverError // nil on success
}

// alterQuotas sends one AlterClientQuotas request with an entry per entity
// and returns the per-entity results in the order of entities.
func alterQuotas(ctx context.Context, cl *kgo.Client, entities []entity, ops map[entity][]op) ([]alterResult, error) {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	for _, e := range entities {
		re := kmsg.NewAlterClientQuotasRequestEntry()
		for _, c := range e.components() {
			ce := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ce.Type = c.typ
			ce.Name = c.p.wire()
			re.Entity = append(re.Entity, ce)
		}
		for _, o := range ops[e] {
			ro := kmsg.NewAlterClientQuotasRequestEntryOp()
			ro.Key = o.key
			ro.Value = o.value
			ro.Remove = o.remove
			re.Ops = append(re.Ops, ro)
		}
		req.Entries = append(req.Entries, re)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	got := map[entity]*serverError{}
	seen := map[entity]bool{}
	for _, re := range resp.Entries {
		var e entity
		for _, c := range re.Entity {
			e.setPart(c.Type, wirePart(c.Name))
		}
		seen[e] = true
		if err := kerr.ErrorForCode(re.ErrorCode); err != nil {
			got[e] = &serverError{err: err, msg: deref(re.ErrorMessage)}
		}
	}
	out := make([]alterResult, len(entities))
	for i, e := range entities {
		out[i] = alterResult{entity: e, err: got[e]}
		if !seen[e] && len(resp.Entries) != len(entities) {
			out[i].err = &serverError{err: kerr.UnknownServerError, msg: "the response has no result for this entity"}
		}
	}
	return out, nil
}

// serverError is an error code and message a broker returned.
type serverError struct {
	err error // a *kerr.Error
	msg string
}

func (e *serverError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	if ke, ok := e.err.(*kerr.Error); ok {
		return ke.Description
	}
	return e.err.Error()
}

// javaName is the name of the exception Kafka's Java client raises for the
// error, e.g. InvalidRequestException for INVALID_REQUEST.
func (e *serverError) javaName() string {
	ke, ok := e.err.(*kerr.Error)
	if !ok {
		return "KafkaException"
	}
	return javaException(ke.Message)
}

func javaException(code string) string {
	switch code {
	case "UNKNOWN_SERVER_ERROR":
		return "UnknownServerException"
	case "INVALID_CONFIG":
		return "InvalidConfigurationException"
	case "REQUEST_TIMED_OUT":
		return "TimeoutException"
	case "SASL_AUTHENTICATION_FAILED":
		return "SaslAuthenticationException"
	case "ILLEGAL_SASL_STATE":
		return "IllegalSaslStateException"
	}
	code = strings.TrimSuffix(code, "_FAILED") // *_AUTHORIZATION_FAILED
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(code), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	b.WriteString("Exception")
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// formatValue renders a quota value for Tollgate's own output: plain
// decimal, no exponent, no trailing ".0" (1048576, 0.5, 50).
func formatValue(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Sprint(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
