package control

import (
	"context"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/store"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterClientQuotas: v0-1
//
// KIP-546: client quota configuration APIs. v1 is the flexible encoding and
// adds nothing else.
//
// Behavior:
// * ACL: ALTER_CONFIGS on CLUSTER (Authorizer), validate_only included; a
// denied request echoes every entry as sent with 31 "Cluster
// authorization failed."
// * Beyond Kafka, a tenant's admin alters its tenant's principals' user
// entities within the tenant's ceilings, entry by entry; the other entries
// get 31 with the reason (delegate.go)
// * KRaft semantics (ClientQuotaControlManager): entries in request order;
// a repeated type inside an entity collapses (last name wins); a repeated
// key, or an entity seen earlier in the request, gets "Ignoring duplicate
// entity ClientQuotaEntity(entries={…})", which replaces the earlier
// entry's result while the earlier entry's changes stay applied
// * Entity checks: not empty, types user/client-id/ip, no "" name, ip
// alone, a named ip must be an address
// * client-id-prefix (Tollgate and Redpanda; Kafka answers "Unhandled
// client quota entity type"): alone, named, not ""; the keys of a client-id
// * Sets are validated (key allowed for the entity kind, > 0, LONG/INT
// range, fractions beyond 1e-6); removals are not, and removing an unset
// key is a silent success; setting the current value writes nothing
// * Atomic per entity: one bad op rejects its entity and nothing else
// * validate_only: the same checks and response, nothing is written
// * Response: one entry per distinct entity, entries and entity pairs in
// the order Kafka's HashMaps iterate them; success is 0 with a null
// message
// * Audit: one event per request entry (applied, validated, rejected or
// denied, with each key's old and new value), written and synced before
// the change is committed and before the response is returned
//
// Where Tollgate differs from Kafka:
// * Each entity is its own store transaction, durable when its result is
// decided; Kafka commits the whole request as one batch of records
// * A host name as ip entity is refused with Kafka's "is not a valid IP or
// resolvable host." message (Tollgate resolves nothing); a CIDR range is
// accepted
// * NaN is refused as "must be greater than 0" (Kafka stores it)
// * A required audit sink that cannot take the event refuses the entry with
// -1 UNKNOWN_SERVER_ERROR and changes nothing; a store failure likewise
// answers -1
// * Changes are visible at once to Describe and to the data path (OnChange);
// Kafka's brokers apply them asynchronously

// entryResult is one response entry: the entity as Kafka keys it and its
// result.
type entryResult struct {
	entity javaEntity
	err    apiError
}

// resultMap models Kafka's HashMap<ClientQuotaEntity, ApiError>.
type resultMap struct {
	m     *javaMap
	list  []entryResult
	index map[string]int // javaEntity.key → list index
}

func newResultMap() *resultMap {
	return &resultMap{m: newJavaMap(-1), index: map[string]int{}}
}

func (r *resultMap) has(e javaEntity) bool {
	_, ok := r.index[e.key()]
	return ok
}

// put keeps the first key and its position, like HashMap.put.
func (r *resultMap) put(e javaEntity, err apiError) {
	k := e.key()
	if i, ok := r.index[k]; ok {
		r.list[i].err = err
		return
	}
	r.index[k] = len(r.list)
	r.list = append(r.list, entryResult{entity: e, err: err})
	r.m.add(e.hash())
}

// alteration is one op after Kafka's decoding: value nil is a removal.
type alteration struct {
	key   string
	value *float64
}

// Alter answers an AlterClientQuotas request.
func (c *ClientQuotas) Alter(ctx context.Context, who Initiator, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	dl, ok := c.alterer(who)
	if !ok {
		c.denyAlter(ctx, who, req, resp)
		return resp
	}
	results := newResultMap()
	committed := false
	for _, entry := range req.Entries {
		committed = c.alterEntry(ctx, who, dl, req.ValidateOnly, entry, results) || committed
	}
	if committed {
		c.changed()
	}
	for _, i := range results.m.order() {
		r := results.list[i]
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = r.err.code
		if r.err.failed() {
			msg := r.err.msg
			re.ErrorMessage = &msg
		}
		for _, p := range r.entity.pairs {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.typ, p.name
			re.Entity = append(re.Entity, ee)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

// alterer says whether who may alter client quotas: ok, as a quota
// admin (dl nil), or entry by entry as a tenant's admin (dl, delegate.go).
func (c *ClientQuotas) alterer(who Initiator) (dl *delegation, ok bool) {
	if c.authorize(who, OpAlterConfigs) {
		return nil, true
	}
	if c.Tenants != nil {
		if dl = c.Tenants.delegationOf(who); dl != nil && len(dl.admins) > 0 {
			return dl, true
		}
	}
	return nil, false
}

// denyAlter answers every entry of a request who may not make, and
// audits each denial.
func (c *ClientQuotas) denyAlter(ctx context.Context, who Initiator, req *kmsg.AlterClientQuotasRequest, resp *kmsg.AlterClientQuotasResponse) {
	for _, entry := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode = errClusterAuthorizationFailed
		msg := msgClusterAuthorizationFailed
		re.ErrorMessage = &msg
		for _, p := range entry.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ee)
		}
		resp.Entries = append(resp.Entries, re)
		ev := c.event(who, audit.Denied, entry, c.requested(entry, storeEntity(wireEntity(entry))), apiError{code: errClusterAuthorizationFailed, msg: msg})
		c.record(ctx, ev)
	}
}

// alterEntry checks, audits and applies (or, validateOnly, only checks
// and audits) one entry of a request, with Kafka's verdicts in Kafka's
// order, into results; it reports whether the store changed.
func (c *ClientQuotas) alterEntry(ctx context.Context, who Initiator, dl *delegation, validateOnly bool, entry kmsg.AlterClientQuotasRequestEntry, results *resultMap) bool {
	je := wireEntity(entry)
	alts, order := entryAlterations(je, entry, results)
	if results.has(je) {
		res := invalid("Ignoring duplicate entity " + je.String())
		results.put(je, res)
		c.record(ctx, c.event(who, audit.Rejected, entry, c.requested(entry, storeEntity(je)), res))
		return false
	}
	if dl != nil {
		if why := dl.allows(je, alts); why != "" {
			res := delegatedDenial(who, why)
			results.put(je, res)
			c.record(ctx, c.event(who, audit.Denied, entry, c.requested(entry, storeEntity(je)), res))
			return false
		}
	}
	se, res := validate(je, alts, order)
	if !res.failed() {
		res = c.checkNotFixed(se, alts)
	}
	if res.failed() {
		results.put(je, res)
		c.record(ctx, c.event(who, audit.Rejected, entry, c.requested(entry, se), res))
		return false
	}
	if validateOnly {
		results.put(je, c.validated(ctx, who, entry, se))
		return false
	}
	res, changed := c.apply(ctx, who, entry, se, alts)
	results.put(je, res)
	return changed
}

// entryAlterations decodes an entry's ops as Kafka does: the alterations,
// each key once (a key given twice is noted in results, under the
// entity), and the order of Kafka's map of key → value.
func entryAlterations(je javaEntity, entry kmsg.AlterClientQuotasRequestEntry, results *resultMap) ([]alteration, []int) {
	// Kafka's map of key → value (nil: remove), sized for the ops.
	opsMap := newJavaMap(len(entry.Ops))
	var alts []alteration
	seen := make(map[string]bool, len(entry.Ops))
	for _, op := range entry.Ops {
		if seen[op.Key] {
			// The intended message, which the duplicate-entity check
			// in alterEntry always overwrites.
			results.put(je, invalid("Duplicate quota key "+op.Key+" not updating quota for this entity "+je.String()))
			continue
		}
		seen[op.Key] = true
		a := alteration{key: op.Key}
		if !op.Remove {
			v := op.Value
			a.value = &v
		}
		alts = append(alts, a)
		opsMap.add(javaStringHash(op.Key))
	}
	return alts, opsMap.order()
}

// checkNotFixed refuses an alteration of a quota the config file declares.
func (c *ClientQuotas) checkNotFixed(se store.Entity, alts []alteration) apiError {
	for _, a := range alts {
		if c.fixedKey(se, a.key) {
			return invalid("Quota " + a.key + " of " + se.String() + " is declared in Tollgate's config file, which is authoritative for what it names; change it there")
		}
	}
	return apiError{}
}

// validated audits a valid entry of a validate-only request: its result,
// an audit sink's refusal if the event could not be recorded.
func (c *ClientQuotas) validated(ctx context.Context, who Initiator, entry kmsg.AlterClientQuotasRequestEntry, se store.Entity) apiError {
	ev := c.event(who, audit.Validated, entry, c.requested(entry, se), apiError{})
	c.Audit.Prepare(&ev)
	if err := c.record(ctx, ev); err != nil {
		res := auditRefusal(err)
		follow := c.event(who, audit.Rejected, entry, ev.Changes, res)
		follow.Supersedes = ev.ID
		c.record(ctx, follow)
		return res
	}
	return apiError{}
}

// wireEntity is the ClientQuotaEntity Kafka builds from a request entry.
func wireEntity(entry kmsg.AlterClientQuotasRequestEntry) javaEntity {
	types := make([]string, len(entry.Entity))
	names := make([]*string, len(entry.Entity))
	for i, p := range entry.Entity {
		types[i], names[i] = p.Type, p.Name
	}
	return newJavaEntity(types, names)
}

// validate checks an entity and its sets in Kafka's order and returns the
// store entity (nil while the entity itself is invalid).
func validate(je javaEntity, alts []alteration, order []int) (store.Entity, apiError) {
	if res := validateEntity(je); res.failed() {
		return nil, res
	}
	se := storeEntity(je)
	keys, res := keysForEntity(je)
	if res.failed() {
		return se, res
	}
	for _, i := range order {
		a := alts[i]
		if a.value == nil {
			continue
		}
		if res := validateKeyValue(keys, a.key, *a.value); res.failed() {
			return se, res
		}
	}
	return se, apiError{}
}

// storeEntity converts a Kafka entity to the store's, or nil if it is not
// one the store can hold.
func storeEntity(je javaEntity) store.Entity {
	e, err := store.EntityOfParts(je.parts())
	if err != nil {
		return nil
	}
	return e
}

// apply commits one valid entity's ops. The applied event is recorded in
// the store's write transaction, after the effect is computed and before
// the commit: if it cannot be recorded nothing is committed.
func (c *ClientQuotas) apply(ctx context.Context, who Initiator, entry kmsg.AlterClientQuotasRequestEntry, se store.Entity, alts []alteration) (apiError, bool) {
	ops := make([]store.Op, len(alts))
	for i, a := range alts {
		ops[i] = store.Op{Key: a.key, Remove: a.value == nil}
		if a.value != nil {
			ops[i].Value = *a.value
		}
	}
	var ev audit.Event
	var auditErr error
	hooked := false
	rs, err := c.Store.AlterClientQuotasFunc([]store.EntityChange{{Entity: se, Ops: ops}}, func(rs []store.EntityResult) error {
		hooked = true
		ev = c.event(who, audit.Applied, entry, changesOf(rs[0]), apiError{})
		c.Audit.Prepare(&ev)
		auditErr = c.record(ctx, ev)
		return auditErr
	})
	switch {
	case err == nil:
		return apiError{}, rs[0].Changed
	case auditErr != nil:
		res := auditRefusal(auditErr)
		follow := c.event(who, audit.Rejected, entry, ev.Changes, res)
		follow.Supersedes = ev.ID
		c.record(ctx, follow)
		return res, false
	case hooked:
		res := apiError{code: errUnknownServerError, msg: "Tollgate could not commit the change: " + err.Error()}
		follow := c.event(who, audit.Failed, entry, ev.Changes, res)
		follow.Supersedes = ev.ID
		c.record(ctx, follow)
		return res, false
	default:
		res := apiError{code: errUnknownServerError, msg: "Tollgate could not store the change: " + err.Error()}
		c.record(ctx, c.event(who, audit.Rejected, entry, c.requested(entry, se), res))
		return res, false
	}
}

// auditRefusal is the answer to an entry whose audit event a required sink
// could not take. UNKNOWN_SERVER_ERROR is the closest Kafka code: the
// request is fine, the server cannot honour it now (POLICY_VIOLATION would
// blame the request).
func auditRefusal(err error) apiError {
	return apiError{code: errUnknownServerError, msg: "Tollgate refused the alteration because its required audit log could not record it (" + err.Error() + "); nothing was changed"}
}

// event builds an alter_client_quotas event for one request entry.
func (c *ClientQuotas) event(who Initiator, outcome audit.Outcome, entry kmsg.AlterClientQuotasRequestEntry, changes []audit.Change, res apiError) audit.Event {
	ev := audit.Event{
		Action:       audit.ActionAlterClientQuotas,
		Outcome:      outcome,
		ErrorCode:    res.code,
		ErrorMessage: res.msg,
		Initiator:    who.audit(),
		Changes:      changes,
	}
	for _, p := range entry.Entity {
		ev.Target.Entity = append(ev.Target.Entity, audit.Component(p.Type, p.Name))
	}
	return ev
}

// requested lists an entry's ops as sent, each with the key's current value
// when the entity is one the store holds (se non-nil) and the value asked
// for (nil for a removal).
func (c *ClientQuotas) requested(entry kmsg.AlterClientQuotasRequestEntry, se store.Entity) []audit.Change {
	var cur map[string]float64
	if se != nil {
		cur, _ = c.Store.ClientQuota(se)
	}
	out := make([]audit.Change, 0, len(entry.Ops))
	for _, op := range entry.Ops {
		ch := audit.Change{Key: op.Key}
		if v, ok := cur[op.Key]; ok {
			ch.Old = audit.Number(v)
		}
		if !op.Remove {
			ch.New = audit.Number(op.Value)
		}
		out = append(out, ch)
	}
	return out
}

func changesOf(r store.EntityResult) []audit.Change {
	out := make([]audit.Change, len(r.Changes))
	for i, vc := range r.Changes {
		out[i] = audit.Change{Key: vc.Key, Old: audit.NumberPtr(vc.Old), New: audit.NumberPtr(vc.New)}
	}
	return out
}
