package quota

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Tenants nest over Kafka's levels (docs/quotas.md, "Tenants"): a tenant is
// a named set of principals with ceilings that all of them share. Every
// record of a tenant's principal goes into its own bucket, exactly as
// without tenants, and into the tenant's; the throttle is the larger of the
// two, so the tightest level wins.
//
// The tenant's share of a key is held by its ceiling's token bucket and
// shared out by one rule (tenantstate.go): while the tenant is under its
// ceiling anyone may use the idle capacity, up to their own quota
// (work-conserving); once it is over, each principal active in the last
// (N−1)·W is held to ceiling ÷ active principals. So no principal can be
// starved below min(its own quota, ceiling ÷ active) by the others, and
// what one does not use, the others may take.

// TenantKeys are the keys a tenant may have a ceiling for: the byte rates,
// the mutation rate and the producer ids rate. request_percentage has none (a principal's share
// of broker time is its own quota's business).
var TenantKeys = []model.Key{model.ProducerByteRate, model.ConsumerByteRate, model.ControllerMutationRate, model.ProducerIDsRate}

// tenantKey reports whether k may carry a tenant ceiling.
func tenantKey(k model.Key) bool {
	return k == model.ProducerByteRate || k == model.ConsumerByteRate || k.Counted()
}

// Tenant is one tenant: who belongs and its ceilings.
type Tenant struct {
	Name string
	// Principals are principal names (the user a quota knows: "alice"
	// for User:alice) that belong to the tenant.
	Principals []string
	// Prefixes: every principal whose name starts with one belongs,
	// unless it is listed by another tenant.
	Prefixes []string
	// Match, when not nil, says whether a principal that no tenant lists
	// and no prefix matches belongs (principal mapping rules, compiled by
	// the caller: this package does not parse them). It is called rarely
	// (once per principal and tenant configuration) and must be pure.
	Match func(principal string) bool
	// Ceilings are the tenant's shared quotas, per key of TenantKeys;
	// an absent key has none.
	Ceilings map[model.Key]float64
	// Options apply to the tenant as a whole: Shadow makes every ceiling
	// shadow (computed, shown, not applied); Burst is the ceiling's
	// start-up burst in seconds of ceiling (absent: Kafka's, as for a
	// client bucket).
	Options model.Options
}

// MaxTenantName bounds a tenant's name (it is a store key and a label).
const MaxTenantName = 249

// TenantSet is a validated set of tenants and the resolution of a
// principal to its tenant. It is immutable once built and safe for
// concurrent use.
type TenantSet struct {
	tenants []Tenant // by name
	byName  map[string]int
	exact   map[string]int // principal → tenant index
	prefix  map[string]int // prefix → tenant index
	plens   []int          // distinct prefix lengths, longest first
	ruled   []int          // tenants with Match, by name
}

// NewTenantSet validates ts and returns the set. It refuses an empty or
// too long name, a name given twice, an empty principal or prefix, a
// principal listed by two tenants or twice, a prefix given twice (by one
// tenant or two), a ceiling for a key that takes none or not > 0 (or not
// finite), and options Quotas.SetOptions would refuse.
func NewTenantSet(ts []Tenant) (*TenantSet, error) {
	s := &TenantSet{byName: map[string]int{}, exact: map[string]int{}, prefix: map[string]int{}}
	sorted := slices.Clone(ts)
	slices.SortFunc(sorted, func(a, b Tenant) int { return cmp.Compare(a.Name, b.Name) })
	var errs []error
	for i, t := range sorted {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("tenant %q: %s", t.Name, fmt.Sprintf(format, a...)))
		}
		switch {
		case t.Name == "":
			errs = append(errs, errors.New("a tenant needs a name"))
			continue
		case len(t.Name) > MaxTenantName:
			bad("the name is %d bytes long, more than %d", len(t.Name), MaxTenantName)
		}
		if _, dup := s.byName[t.Name]; dup {
			bad("defined twice")
			continue
		}
		s.byName[t.Name] = i
		// claim gives the tenant each of ps in m: none may be empty, nor
		// another's already (taken says so of it and the other tenant).
		claim := func(m map[string]int, ps []string, empty, taken string) {
			for _, p := range ps {
				if p == "" {
					bad("%s", empty)
				} else if j, dup := m[p]; dup {
					bad(taken, p, sorted[j].Name)
				} else {
					m[p] = i
				}
			}
		}
		claim(s.exact, t.Principals, "an empty principal", "principal %q is also listed by tenant %q: a principal belongs to one tenant")
		claim(s.prefix, t.Prefixes, "an empty principal prefix (it would take every principal)", "principal prefix %q is also given by tenant %q")
		if t.Match != nil {
			s.ruled = append(s.ruled, i)
		}
		for k, v := range t.Ceilings {
			switch {
			case !tenantKey(k):
				bad("%v takes no tenant ceiling (only producer_byte_rate, consumer_byte_rate and controller_mutation_rate do)", k)
			case !(v > 0) || math.IsInf(v, 1):
				bad("the %v ceiling must be greater than 0 and finite", k)
			}
		}
		if o := t.Options; o.HasBurst && !(o.Burst >= 0 && o.Burst <= model.MaxBurstSeconds) {
			bad("burst_seconds %v is not from 0 to %d", o.Burst, model.MaxBurstSeconds)
		}
		c := t
		c.Principals, c.Prefixes = slices.Clone(t.Principals), slices.Clone(t.Prefixes)
		c.Ceilings = make(map[model.Key]float64, len(t.Ceilings))
		for k, v := range t.Ceilings {
			c.Ceilings[k] = v
		}
		if !c.Options.HasBurst {
			c.Options.Burst = 0
		}
		s.tenants = append(s.tenants, c)
	}
	for p := range s.prefix {
		if !slices.Contains(s.plens, len(p)) {
			s.plens = append(s.plens, len(p))
		}
	}
	slices.SortFunc(s.plens, func(a, b int) int { return cmp.Compare(b, a) })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Len returns the number of tenants.
func (s *TenantSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tenants)
}

// Tenants returns the tenants, ordered by name. The slices and maps are
// the set's: do not modify them.
func (s *TenantSet) Tenants() []Tenant {
	if s == nil {
		return nil
	}
	return s.tenants
}

// Get returns the tenant named name.
func (s *TenantSet) Get(name string) (Tenant, bool) {
	if s == nil {
		return Tenant{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Tenant{}, false
	}
	return s.tenants[i], true
}

// Of returns the name of the tenant principal belongs to: the tenant that
// lists it; else the one with the longest prefix it starts with; else the
// first tenant, by name, whose Match accepts it.
func (s *TenantSet) Of(principal string) (string, bool) {
	if i, ok := s.index(principal); ok {
		return s.tenants[i].Name, true
	}
	return "", false
}

func (s *TenantSet) index(principal string) (int, bool) {
	if s == nil || principal == "" {
		return 0, false
	}
	if i, ok := s.exact[principal]; ok {
		return i, true
	}
	for _, l := range s.plens {
		if l > len(principal) {
			continue
		}
		if i, ok := s.prefix[principal[:l]]; ok {
			return i, true
		}
	}
	for _, i := range s.ruled {
		if s.tenants[i].Match(principal) {
			return i, true
		}
	}
	return 0, false
}

// HasPrefix reports whether any tenant gives principal prefix p: for
// listings that explain a resolution.
func (s *TenantSet) HasPrefix(p string) bool {
	if s == nil {
		return false
	}
	_, ok := s.prefix[p]
	return ok
}

// String renders a tenant for logs.
func (t Tenant) String() string {
	var parts []string
	for _, k := range TenantKeys {
		if v, ok := t.Ceilings[k]; ok {
			parts = append(parts, fmt.Sprintf("%v=%v", k, v))
		}
	}
	return fmt.Sprintf("tenant %q (%s)", t.Name, strings.Join(parts, ","))
}
