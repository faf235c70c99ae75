package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
)

// Tenants
//
// A tenant is a named set of principals — listed, by principal prefix, or
// by principal mapping rules — with ceilings all of them share
// (producer_byte_rate, consumer_byte_rate, controller_mutation_rate,
// producer_ids_rate), a
// shadow mark and a burst for the whole tenant, and admins who manage its
// principals' quotas through the Kafka API (delegate.go). The quota engine
// enforces them (quota.TenantSet).
//
// Behavior:
// * Tenants come from the config file (fixed: authoritative for their
// names, changed only there) and from the admin HTTP API (kept in the
// store); a stored tenant that would take a principal or prefix a fixed
// one has is left out, and said so
// * Create, replace, alter and delete need ALTER_CONFIGS on CLUSTER (the
// quota admins); denied: ErrNotAuthorized and a "denied" audit event. A
// tenant's admins cannot change their tenant (they could take other
// tenants' principals in)
// * Validation (ErrInvalid): a name of letters, digits, '.', '_' and '-'
// (at most 249 bytes); principals, prefixes and admins not empty, at most
// 1024 bytes of UTF-8 without control characters, none twice; each rule
// one Kafka principal mapping rule (RULE:pattern/replacement/[LU] or
// DEFAULT); at most 10000 entries per list and 512 KiB in all (one
// record of a Tollgate cluster's shared topic); ceilings > 0, the byte rates
// whole numbers; burst_seconds from 0 to 3600; no principal listed and no
// prefix given by two tenants
// * A principal belongs to the tenant that lists it, else to the one with
// the longest prefix it starts with, else to the first tenant, by name,
// one of whose rules maps it to the tenant's name
// * Audit: tenant_create, tenant_alter and tenant_delete events (target
// resource "tenant"), each field's old and new value, recorded and synced
// before the change is committed; a required sink that cannot take the
// event refuses the change
// * Effect: the engine and the delegation see a change before the call
// returns

// TenantSpec is a tenant as the config file, the admin HTTP API and the
// CLI write it (declared with the admin API's types).
type TenantSpec = api.TenantSpec

// Limits of a tenant's lists, and of the whole: a tenant is one record of
// a Tollgate cluster's shared configuration topic, whose batches hold
// under 1 MiB.
const (
	maxTenantList  = 10000
	maxTenantEntry = 1024
	maxTenantBytes = 512 << 10
)

// ceilingKeys are a tenant's ceilings by Kafka's key names.
var ceilingKeys = api.CeilingKeys

// ValidateTenant checks one tenant alone (the checks across tenants are
// the set's). The error's text is the message for the operator.
func ValidateTenant(s TenantSpec) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch {
	case s.Name == "":
		bad("a tenant needs a name")
	case len(s.Name) > quota.MaxTenantName:
		bad("tenant name is %d bytes long, more than %d", len(s.Name), quota.MaxTenantName)
	case strings.IndexFunc(s.Name, func(r rune) bool {
		return !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '-'))
	}) >= 0:
		bad("tenant name %q: use letters, digits, '.', '_' and '-' only", s.Name)
	}
	for _, l := range []struct {
		what string
		vs   []string
	}{{"principals", s.Principals}, {"principal_prefixes", s.PrincipalPrefixes}, {"principal_rules", s.PrincipalRules}, {"admins", s.Admins}} {
		if len(l.vs) > maxTenantList {
			bad("%s: %d entries, more than %d", l.what, len(l.vs), maxTenantList)
			continue
		}
		seen := map[string]bool{}
		for _, v := range l.vs {
			switch {
			case v == "":
				bad("%s: an empty entry", l.what)
			case len(v) > maxTenantEntry:
				bad("%s: an entry of %d bytes, more than %d", l.what, len(v), maxTenantEntry)
			case !utf8.ValidString(v):
				bad("%s: %q is not valid UTF-8", l.what, v)
			case strings.IndexFunc(v, unicode.IsControl) >= 0:
				bad("%s: %q contains a control character", l.what, v)
			case seen[v]:
				bad("%s: %q given twice", l.what, v)
			}
			seen[v] = true
		}
	}
	for _, r := range s.PrincipalRules {
		if _, err := compileRule(r); err != nil {
			bad("principal_rules: %v", err)
		}
	}
	for k, v := range s.Ceilings() {
		switch {
		case !(v > 0) || math.IsInf(v, 1):
			bad("%s must be greater than 0 and finite", k)
		case k != "controller_mutation_rate" && k != "producer_ids_rate" && (v > math.MaxInt64 || math.Abs(math.Mod(v, 1)) > 1e-6):
			bad("%s must be a whole number of bytes per second", k)
		}
	}
	if b := s.BurstSeconds; b != nil && !(*b >= 0 && *b <= model.MaxBurstSeconds) {
		bad("burst_seconds must be from 0 to %d (0: none; absent: Kafka's, 10)", model.MaxBurstSeconds)
	}
	if b, err := json.Marshal(storeTenant(s)); err == nil && len(b) > maxTenantBytes {
		bad("the tenant takes %d bytes, more than %d: use principal prefixes or rules rather than long lists", len(b), maxTenantBytes)
	}
	return errors.Join(errs...)
}

// compileRule parses one principal mapping rule.
func compileRule(r string) (*auth.Mapper, error) {
	m, err := auth.ParseMappingRules(r)
	if err != nil {
		return nil, err
	}
	if n := len(m.Rules()); n != 1 {
		return nil, fmt.Errorf("%q is %d rules, want one per entry", r, n)
	}
	return m, nil
}

// quotaTenant is the engine's tenant of s (s valid).
func quotaTenant(s TenantSpec) quota.Tenant {
	t := quota.Tenant{Name: s.Name, Principals: s.Principals, Prefixes: s.PrincipalPrefixes, Ceilings: map[model.Key]float64{},
		Options: model.Options{Shadow: s.Shadow}}
	for k, v := range s.Ceilings() {
		key, _ := model.ParseKey(k)
		t.Ceilings[key] = v
	}
	if s.BurstSeconds != nil {
		t.Options.Burst, t.Options.HasBurst = *s.BurstSeconds, true
	}
	if len(s.PrincipalRules) > 0 {
		var ms []*auth.Mapper
		for _, r := range s.PrincipalRules {
			if m, err := compileRule(r); err == nil {
				ms = append(ms, m)
			}
		}
		name := s.Name
		t.Match = func(p string) bool {
			for _, m := range ms {
				if out, err := m.Map(p); err == nil && out == name {
					return true
				}
			}
			return false
		}
	}
	return t
}

func storeTenant(s TenantSpec) store.Tenant {
	t := store.Tenant{Name: s.Name, Principals: s.Principals, PrincipalPrefixes: s.PrincipalPrefixes, PrincipalRules: s.PrincipalRules,
		Shadow: s.Shadow, BurstSeconds: s.BurstSeconds, Admins: s.Admins}
	if c := s.Ceilings(); len(c) > 0 {
		t.Ceilings = c
	}
	return t
}

func specOf(t store.Tenant) TenantSpec {
	s := TenantSpec{Name: t.Name, Principals: t.Principals, PrincipalPrefixes: t.PrincipalPrefixes, PrincipalRules: t.PrincipalRules,
		Shadow: t.Shadow, BurstSeconds: t.BurstSeconds, Admins: t.Admins}
	for _, k := range ceilingKeys {
		if v, ok := t.Ceilings[k]; ok {
			s.SetCeiling(k, &v)
		}
	}
	return s
}

// TenantInfo is a tenant and where it is declared.
type TenantInfo struct {
	TenantSpec
	// Fixed: declared in the config file, changed only there.
	Fixed bool
}

// tenantView is the tenants in force; never modified once published.
type tenantView struct {
	set   *quota.TenantSet
	infos []TenantInfo // by name
	admin map[string]Admins
}

func (v *tenantView) info(name string) (TenantInfo, bool) {
	i, ok := slices.BinarySearchFunc(v.infos, name, func(t TenantInfo, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return TenantInfo{}, false
	}
	return v.infos[i], true
}

// merge lays the fixed tenants over the stored ones and leaves out a
// stored tenant whose name is fixed or that lists a principal or gives a
// prefix an earlier tenant has (fixed ones first, then by name); what is
// left out is returned as errors.
func merge(fixed []TenantSpec, stored []store.Tenant) ([]TenantInfo, []error) {
	var out []TenantInfo
	var errs []error
	principals, prefixes, names := map[string]string{}, map[string]string{}, map[string]bool{}
	take := func(s TenantSpec) error {
		for _, p := range s.Principals {
			if o, ok := principals[p]; ok {
				return fmt.Errorf("tenant %q lists principal %q, which tenant %q lists", s.Name, p, o)
			}
		}
		for _, p := range s.PrincipalPrefixes {
			if o, ok := prefixes[p]; ok {
				return fmt.Errorf("tenant %q gives principal prefix %q, which tenant %q gives", s.Name, p, o)
			}
		}
		for _, p := range s.Principals {
			principals[p] = s.Name
		}
		for _, p := range s.PrincipalPrefixes {
			prefixes[p] = s.Name
		}
		names[s.Name] = true
		return nil
	}
	for _, s := range fixed {
		if err := take(s); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, TenantInfo{TenantSpec: s, Fixed: true})
	}
	for _, t := range stored {
		s := specOf(t)
		if names[s.Name] {
			continue // the config file's tenant of that name is authoritative
		}
		if err := ValidateTenant(s); err != nil {
			errs = append(errs, fmt.Errorf("stored tenant %q left out: %w", s.Name, err))
			continue
		}
		if err := take(s); err != nil {
			errs = append(errs, fmt.Errorf("stored tenant left out: %w", err))
			continue
		}
		out = append(out, TenantInfo{TenantSpec: s})
	}
	slices.SortFunc(out, func(a, b TenantInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, errs
}

func compile(infos []TenantInfo) (*tenantView, error) {
	ts := make([]quota.Tenant, len(infos))
	v := &tenantView{infos: infos, admin: map[string]Admins{}}
	for i, in := range infos {
		ts[i] = quotaTenant(in.TenantSpec)
		if len(in.Admins) > 0 {
			v.admin[in.Name] = Admins{Principals: in.Admins}
		}
	}
	set, err := quota.NewTenantSet(ts)
	if err != nil {
		return nil, err
	}
	v.set = set
	return v, nil
}

// Tenants manages the tenants: the config file's and the store's, every
// change authorized and audited, and hands the engine the set in force
// (OnChange). Its reads are safe for concurrent use.
type Tenants struct {
	Store *store.Store
	// Audit records one event per change; nil records nothing.
	Audit *audit.Logger
	// Authz decides who may change tenants (ALTER_CONFIGS); nil is
	// Admins{}: nobody.
	Authz Authorizer
	// OnChange, if set, gets the set in force after every load: after
	// each change (before its call returns), SetFixed and Load.
	OnChange func(*quota.TenantSet)

	mu    sync.Mutex // serialises changes: read, validate, commit
	load  sync.Mutex // serialises loads
	fixed atomic.Pointer[[]TenantSpec]
	view  atomic.Pointer[tenantView]
}

// ValidateTenants checks the config file's tenants: each alone, then
// together.
func ValidateTenants(specs []TenantSpec) error {
	var errs []error
	for i, s := range specs {
		if err := ValidateTenant(s); err != nil {
			errs = append(errs, fmt.Errorf("tenants[%d] (%s): %w", i, s.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	names := map[string]bool{}
	for i, s := range specs {
		if names[s.Name] {
			errs = append(errs, fmt.Errorf("tenants[%d]: tenant %q is declared twice", i, s.Name))
		}
		names[s.Name] = true
	}
	infos, merr := merge(specs, nil)
	errs = append(errs, merr...)
	if len(errs) == 0 {
		if _, err := compile(infos); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetFixed sets the config file's tenants (validated with
// ValidateTenants) and loads.
func (t *Tenants) SetFixed(specs []TenantSpec) error {
	t.SetFixedOnly(specs)
	return t.Load()
}

// SetFixedOnly sets the config file's tenants for the next Load.
func (t *Tenants) SetFixedOnly(specs []TenantSpec) {
	c := slices.Clone(specs)
	t.fixed.Store(&c)
}

func (t *Tenants) fixedSpecs() []TenantSpec {
	if p := t.fixed.Load(); p != nil {
		return *p
	}
	return nil
}

// Load reads the store, merges the fixed tenants over it and publishes
// the result. Stored tenants left out (see merge) are reported in the
// error; the rest is in force all the same.
func (t *Tenants) Load() error {
	t.load.Lock()
	defer t.load.Unlock()
	var stored []store.Tenant
	if t.Store != nil {
		var err error
		if stored, err = t.Store.Tenants(); err != nil {
			return err
		}
	}
	infos, errs := merge(t.fixedSpecs(), stored)
	if old := t.view.Load(); old != nil && reflect.DeepEqual(old.infos, infos) {
		// Nothing changed (a reload, another instance's change to
		// something else): the engine keeps its resolutions.
		return errors.Join(errs...)
	}
	v, err := compile(infos)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	t.view.Store(v)
	if t.OnChange != nil {
		t.OnChange(v.set)
	}
	return errors.Join(errs...)
}

func (t *Tenants) current() *tenantView {
	if t == nil {
		return nil
	}
	if v := t.view.Load(); v != nil {
		return v
	}
	return &tenantView{}
}

// Set returns the tenants in force as the engine takes them.
func (t *Tenants) Set() *quota.TenantSet { return t.current().set }

// List returns every tenant in force, by name.
func (t *Tenants) List() []TenantInfo { return slices.Clone(t.current().infos) }

// Get returns the tenant named name.
func (t *Tenants) Get(name string) (TenantInfo, bool) { return t.current().info(name) }

// ErrConflict: the tenant exists already, or is declared in the config
// file (which is authoritative for it).
var ErrConflict = errors.New("conflict")

// TenantAlter is a change to a tenant, kafka-configs style (declared
// with the admin API's types).
type TenantAlter = api.TenantAlter

// applyAlter returns s changed by a.
func applyAlter(a TenantAlter, s TenantSpec) (TenantSpec, error) {
	var errs []error
	edit := func(what string, list []string, add, remove []string) []string {
		out := slices.Clone(list)
		for _, r := range remove {
			i := slices.Index(out, r)
			if i < 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not there to remove", what, r))
				continue
			}
			out = slices.Delete(out, i, i+1)
		}
		for _, v := range add {
			if slices.Contains(out, v) {
				errs = append(errs, fmt.Errorf("%s: %q is there already", what, v))
				continue
			}
			out = append(out, v)
		}
		return out
	}
	s.Principals = edit("principals", s.Principals, a.AddPrincipals, a.RemovePrincipals)
	s.PrincipalPrefixes = edit("principal_prefixes", s.PrincipalPrefixes, a.AddPrincipalPrefixes, a.RemovePrincipalPrefixes)
	s.PrincipalRules = edit("principal_rules", s.PrincipalRules, a.AddPrincipalRules, a.RemovePrincipalRules)
	s.Admins = edit("admins", s.Admins, a.AddAdmins, a.RemoveAdmins)
	for _, k := range a.Delete {
		switch {
		case slices.Contains(ceilingKeys, k):
			s.SetCeiling(k, nil)
		case k == KeyShadow:
			s.Shadow = false
		case k == KeyBurstSeconds:
			s.BurstSeconds = nil
		default:
			errs = append(errs, fmt.Errorf("unknown key %s (want %s, shadow or burst_seconds)", k, strings.Join(ceilingKeys, ", ")))
		}
	}
	for k, v := range a.Set {
		switch {
		case slices.Contains(ceilingKeys, k):
			s.SetCeiling(k, &v)
		case k == KeyShadow:
			if v != 1 {
				errs = append(errs, errors.New("shadow must be 1 (delete the key to enforce the tenant)"))
			}
			s.Shadow = true
		case k == KeyBurstSeconds:
			s.BurstSeconds = &v
		default:
			errs = append(errs, fmt.Errorf("unknown key %s (want %s, shadow or burst_seconds)", k, strings.Join(ceilingKeys, ", ")))
		}
	}
	return s, errors.Join(errs...)
}

// CreateTenant creates a tenant.
func (t *Tenants) CreateTenant(ctx context.Context, who Initiator, s TenantSpec) error {
	return t.put(ctx, who, audit.ActionTenantCreate, s.Name, func(*TenantSpec) (TenantSpec, error) { return s, nil })
}

// ReplaceTenant replaces a tenant's whole definition.
func (t *Tenants) ReplaceTenant(ctx context.Context, who Initiator, s TenantSpec) error {
	return t.put(ctx, who, audit.ActionTenantAlter, s.Name, func(*TenantSpec) (TenantSpec, error) { return s, nil })
}

// AlterTenant changes a tenant (TenantAlter).
func (t *Tenants) AlterTenant(ctx context.Context, who Initiator, name string, a TenantAlter) error {
	return t.put(ctx, who, audit.ActionTenantAlter, name, func(cur *TenantSpec) (TenantSpec, error) {
		if cur == nil {
			return TenantSpec{}, &opError{ErrNotFound, fmt.Sprintf("tenant %q does not exist", name)}
		}
		return applyAlter(a, *cur)
	})
}

// DeleteTenant deletes a tenant.
func (t *Tenants) DeleteTenant(ctx context.Context, who Initiator, name string) error {
	return t.put(ctx, who, audit.ActionTenantDelete, name, nil)
}

// put is every change: next computes the new definition from the stored
// one (nil: none), or the tenant is deleted (next nil).
func (t *Tenants) put(ctx context.Context, who Initiator, action, name string, next func(cur *TenantSpec) (TenantSpec, error)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, err := t.stored(name)
	if err != nil {
		return err
	}
	var want *TenantSpec
	var nerr error
	if next != nil {
		s, err := next(cur)
		want, nerr = &s, err
	}
	ev := tenantEvent(who, action, name, tenantChanges(cur, want))
	if !authorize(t.Authz, who, OpAlterConfigs) {
		t.Audit.Record(ctx, withOutcome(ev, audit.Denied, errClusterAuthorizationFailed, msgClusterAuthorizationFailed))
		return &opError{ErrNotAuthorized, who.Principal.String() + " may not change tenants"}
	}
	if oe := t.check(action, name, cur, want, nerr); oe != nil {
		code := errInvalidRequest
		if oe.kind == ErrNotFound {
			code = errResourceNotFound
		}
		t.Audit.Record(ctx, withOutcome(ev, audit.Rejected, code, oe.msg))
		return oe
	}
	return t.commit(ctx, ev, action, name, want)
}

// stored is the store's definition of the tenant, nil if it has none
// (or there is no store).
func (t *Tenants) stored(name string) (*TenantSpec, error) {
	if t.Store == nil {
		return nil, nil
	}
	st, ok, err := t.Store.Tenant(name)
	if err != nil {
		return nil, fmt.Errorf("the tenant was not changed: %w", err)
	}
	if !ok {
		return nil, nil
	}
	s := specOf(st)
	return &s, nil
}

// check refuses a change of the tenant name from cur to want (nil: none;
// nerr: what computing want failed with) that action may not make, or
// that would not be a valid tenant beside the others; nil when it may.
func (t *Tenants) check(action, name string, cur, want *TenantSpec, nerr error) *opError {
	if nerr != nil {
		var oe *opError
		if errors.As(nerr, &oe) {
			return &opError{oe.kind, oe.msg}
		}
		return &opError{ErrInvalid, nerr.Error()}
	}
	if t.Store == nil {
		return &opError{ErrInvalid, "tenants are not managed by this gateway (no data directory)"}
	}
	if in, ok := t.Get(name); ok && in.Fixed {
		return &opError{ErrConflict, fmt.Sprintf("tenant %q is declared in Tollgate's config file, which is authoritative for it; change it there", name)}
	}
	switch {
	case want == nil && cur == nil:
		return &opError{ErrNotFound, fmt.Sprintf("tenant %q does not exist", name)}
	case want != nil && action == audit.ActionTenantCreate && cur != nil:
		return &opError{ErrConflict, fmt.Sprintf("tenant %q exists already", name)}
	case want != nil && action != audit.ActionTenantCreate && cur == nil:
		return &opError{ErrNotFound, fmt.Sprintf("tenant %q does not exist", name)}
	case want != nil && want.Name != name:
		return &opError{ErrInvalid, fmt.Sprintf("the tenant's name is %q, not %q (a tenant cannot be renamed)", want.Name, name)}
	}
	if want == nil {
		return nil
	}
	if err := ValidateTenant(*want); err != nil {
		return &opError{ErrInvalid, err.Error()}
	}
	// With the others in force: no principal or prefix taken twice.
	others := slices.DeleteFunc(t.List(), func(in TenantInfo) bool { return in.Name == name })
	var specs []TenantSpec
	for _, in := range others {
		specs = append(specs, in.TenantSpec)
	}
	if _, errs := merge(append(specs, *want), nil); len(errs) > 0 {
		return &opError{ErrInvalid, errors.Join(errs...).Error()}
	}
	return nil
}

// commit writes the tenant name's new definition want (nil: deletes it)
// once ev is recorded as applied, and loads the tenants again.
func (t *Tenants) commit(ctx context.Context, ev audit.Event, action, name string, want *TenantSpec) error {
	var auditErr error
	hooked := false
	hook := func() error {
		hooked = true
		ev.Outcome = audit.Applied
		t.Audit.Prepare(&ev)
		auditErr = t.Audit.Record(ctx, ev)
		return auditErr
	}
	var err error
	if want == nil {
		_, err = t.Store.DeleteTenantFunc(name, func(store.Tenant) error { return hook() })
	} else {
		mode := store.ReplaceTenant
		if action == audit.ActionTenantCreate {
			mode = store.CreateTenant
		}
		_, err = t.Store.PutTenantFunc(storeTenant(*want), mode, func(*store.Tenant) error { return hook() })
	}
	if err != nil {
		t.followUp(ctx, ev, hooked, auditErr, err)
		return fmt.Errorf("the tenant was not changed: %w", err)
	}
	return t.Load()
}

func (t *Tenants) followUp(ctx context.Context, ev audit.Event, hooked bool, auditErr, err error) {
	followUp(ctx, t.Audit, ev, hooked, auditErr, err)
}

func authorize(a Authorizer, who Initiator, op Operation) bool {
	if a == nil {
		return Admins{}.Authorize(who, op)
	}
	return a.Authorize(who, op)
}

func tenantEvent(who Initiator, action, name string, changes []audit.Change) audit.Event {
	return resourceEvent(who, action, "tenant", name, changes)
}

// tenantChanges lists the fields that differ between old and new (nil:
// none), lists as JSON arrays, numbers as numbers.
func tenantChanges(old, new *TenantSpec) []audit.Change {
	fields := func(s *TenantSpec) map[string]*audit.Value {
		m := map[string]*audit.Value{}
		if s == nil {
			return m
		}
		list := func(k string, vs []string) {
			if len(vs) > 0 {
				b, _ := json.Marshal(vs)
				m[k] = audit.String(string(b))
			}
		}
		list("principals", s.Principals)
		list("principal_prefixes", s.PrincipalPrefixes)
		list("principal_rules", s.PrincipalRules)
		list("admins", s.Admins)
		for k, v := range s.Ceilings() {
			m[k] = audit.Number(v)
		}
		if s.Shadow {
			m[KeyShadow] = audit.Number(1)
		}
		if s.BurstSeconds != nil {
			m[KeyBurstSeconds] = audit.Number(*s.BurstSeconds)
		}
		return m
	}
	o, n := fields(old), fields(new)
	var keys []string
	for k := range o {
		keys = append(keys, k)
	}
	for k := range n {
		if _, ok := o[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []audit.Change
	for _, k := range keys {
		if o[k] != nil && n[k] != nil && o[k].String() == n[k].String() {
			continue
		}
		out = append(out, audit.Change{Key: k, Old: o[k], New: n[k]})
	}
	return out
}

// Describe renders a ceiling for messages: 1048576 rather than 1.048576e+06.
func ceilingString(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
