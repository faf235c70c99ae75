package control

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/store"
)

// Delegated administration
//
// A tenant's admins manage the quotas of its principals through the Kafka
// API (kafka-configs, kadm, `tollgate configs`), as the quota admins manage
// everyone's, within the tenant:
//
// * AlterClientQuotas: an entity whose user is one exact principal of a
// tenant the initiator administers — (user=U), (user=U, client-id=C),
// (user=U, client-id=default) — may be altered; the client-id part is
// allowed because such an entity bounds U's connections only. Entities
// without a user (client-id, client-id-prefix, ip, the default user)
// bound other tenants' clients and are refused, and so is a user of
// another tenant or of none
// * Keys: the ceilings the tenant has (producer_byte_rate,
// consumer_byte_rate, controller_mutation_rate), set to at most the
// ceiling, and shadow and burst_seconds; set or removed. Any other key
// (request_percentage, or a key the tenant has no ceiling for) is refused:
// the admin acts within what the quota admins delegated
// * DescribeClientQuotas: the answer holds the entities of its tenants'
// principals only; a filter that names (EXACT) a user outside them, or the
// default user, is refused
// * A principal that belongs to a tenant (and is no quota admin) likewise
// describes its own tenant's entities only: tenants do not see each other
// * DescribeUserScramCredentials: a tenant's admin may describe (mechanism
// and iterations, never alter) its principals' SCRAM credentials, so that
// kafka-configs --describe --entity-type users works for it; naming any
// other user refuses the whole request, as for anyone without DESCRIBE
// * Refused: CLUSTER_AUTHORIZATION_FAILED (31), per entry for an alteration
// with a message saying why, for the whole response for a description;
// and a "denied" audit event (alter_client_quotas per entry,
// describe_client_quotas)
// * Quota admins are not affected; nor are principals of no tenant

// delegation is who an initiator acts for: the tenants it administers, and
// the tenants whose quotas it may see.
type delegation struct {
	v      *tenantView
	admins []string // tenants it administers
	scope  []string // tenants it may describe (admins, and its own)
}

// delegationOf returns who's delegation, nil when it has none (no tenant
// administered or belonged to).
func (t *Tenants) delegationOf(who Initiator) *delegation {
	v := t.current()
	if v == nil || v.set.Len() == 0 || who.Anonymous() && !isListedAnonymous(v, who) {
		return nil
	}
	d := &delegation{v: v}
	for name, a := range v.admin {
		if a.IsAdmin(who.Principal) {
			d.admins = append(d.admins, name)
		}
	}
	slices.Sort(d.admins)
	d.scope = slices.Clone(d.admins)
	if who.Principal.Type == "" || who.Principal.Type == "User" {
		if own, ok := v.set.Of(who.Principal.Name); ok && !slices.Contains(d.scope, own) {
			d.scope = append(d.scope, own)
		}
	}
	if len(d.scope) == 0 {
		return nil
	}
	return d
}

// isListedAnonymous: ANONYMOUS acts for a tenant only where it is listed
// as an admin explicitly, as for the quota admins.
func isListedAnonymous(v *tenantView, who Initiator) bool {
	for _, a := range v.admin {
		if a.IsAdmin(who.Principal) {
			return true
		}
	}
	return false
}

// userTenant returns the tenant of an entity's user when the entity is one
// principal's (an exact user, with or without a client-id), "" otherwise.
func (d *delegation) userTenant(e store.Entity) (user, tenant string) {
	u, ok := e.Get(store.TypeUser)
	if !ok || u.Default || e.Has(store.TypeIP) || e.Has(store.TypeClientIDPrefix) {
		return "", ""
	}
	t, _ := d.v.set.Of(u.Name)
	return u.Name, t
}

// covers reports whether a described entity is within the scope.
func (d *delegation) covers(e store.Entity) bool {
	_, t := d.userTenant(e)
	return t != "" && slices.Contains(d.scope, t)
}

// allows decides one AlterClientQuotas entry: "" when it may be applied,
// else why not.
func (d *delegation) allows(je javaEntity, alts []alteration) string {
	if len(d.admins) == 0 {
		return "it administers no tenant"
	}
	se := storeEntity(je)
	user, tenant := d.userTenant(se)
	switch {
	case se == nil || user == "":
		return "a tenant's admin alters user entities of its tenant's principals only (user=NAME, optionally with a client-id), not " + je.String()
	case tenant == "":
		return fmt.Sprintf("%s belongs to no tenant", user)
	case !slices.Contains(d.admins, tenant):
		return fmt.Sprintf("%s is not a principal of %s", user, strings.Join(d.admins, ", "))
	}
	in, _ := d.v.info(tenant)
	ceil := in.Ceilings()
	for _, a := range alts {
		if a.key == KeyShadow || a.key == KeyBurstSeconds {
			continue
		}
		c, ok := ceil[a.key]
		switch {
		case !ok:
			return fmt.Sprintf("tenant %s has no %s ceiling: its admins may not set or remove %s", tenant, a.key, a.key)
		case a.value != nil && *a.value > c:
			return fmt.Sprintf("%s %s is above tenant %s's ceiling of %s", a.key, ceilingString(*a.value), tenant, ceilingString(c))
		}
	}
	return ""
}

// administers reports whether user is a principal of a tenant the
// initiator administers.
func (d *delegation) administers(user string) bool {
	t, ok := d.v.set.Of(user)
	return ok && slices.Contains(d.admins, t)
}

// describesUsers reports whether a tenant's admin may describe the SCRAM
// credentials of users: all of them its principals (none named: its
// principals' only are listed).
func (d *delegation) describesUsers(users []kmsg.DescribeUserSCRAMCredentialsRequestUser) bool {
	if len(d.admins) == 0 {
		return false
	}
	for _, u := range users {
		if !d.administers(u.Name) {
			return false
		}
	}
	return true
}

// describeRefusal is why a scoped initiator may not use a filter, "" when
// it may: one that names (EXACT) a user outside its scope, or the default
// user.
func (d *delegation) describeRefusal(comps []kmsg.DescribeClientQuotasRequestComponent) string {
	for _, c := range comps {
		if c.EntityType != store.TypeUser {
			continue
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeDefault:
			return "the default user's quotas are the quota admins'"
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				continue
			}
			if t, ok := d.v.set.Of(*c.Match); !ok || !slices.Contains(d.scope, t) {
				return fmt.Sprintf("%s is not a principal of %s", *c.Match, strings.Join(d.scope, ", "))
			}
		}
	}
	return ""
}

func delegatedDenial(who Initiator, why string) apiError {
	return apiError{code: errClusterAuthorizationFailed, msg: msgClusterAuthorizationFailed + " " + who.Principal.String() + ": " + why}
}

// describeEvent is the audit event of a refused description.
func describeEvent(who Initiator, comps []kmsg.DescribeClientQuotasRequestComponent, res apiError) audit.Event {
	ev := audit.Event{Action: audit.ActionDescribeClientQuotas, Outcome: audit.Denied, ErrorCode: res.code, ErrorMessage: res.msg,
		Initiator: who.audit()}
	for _, c := range comps {
		ev.Target.Entity = append(ev.Target.Entity, audit.Component(c.EntityType, c.Match))
	}
	return ev
}

// scramDescribeDenied is the audit event of a tenant's admin refused
// DescribeUserScramCredentials.
func scramDescribeDenied(who Initiator, req *kmsg.DescribeUserSCRAMCredentialsRequest) audit.Event {
	ev := audit.Event{Action: audit.ActionDescribeUserScramCredentials, Outcome: audit.Denied,
		ErrorCode: errClusterAuthorizationFailed, ErrorMessage: msgClusterAuthorizationFailed, Initiator: who.audit()}
	for _, u := range req.Users {
		n := u.Name
		ev.Target.Entity = append(ev.Target.Entity, audit.Component(store.TypeUser, &n))
	}
	return ev
}

// recordDenied writes a refused description's audit event.
func (c *ClientQuotas) recordDenied(ctx context.Context, ev audit.Event) { c.Audit.Record(ctx, ev) }
