package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
)

// IPQuotas is connection_creation_rate per ip entity: the key is the
// entity's name (an address or, beyond Kafka, a CIDR range; parse it with
// admission.ParseIPEntity) and "" is the default ip entity.
type IPQuotas map[string]float64

// ClientQuotas answers DescribeClientQuotas and AlterClientQuotas from the
// store, audits every alteration and tells the data path about changes.
type ClientQuotas struct {
	Store *store.Store
	// Audit records one event per AlterClientQuotas entry; nil records
	// nothing. With a required sink, an entry whose event cannot be
	// written is refused.
	Audit *audit.Logger
	// Authz decides who may describe and alter; nil is Admins{} (nobody
	// alters, authenticated principals describe).
	Authz Authorizer
	// Tenants, when set, delegates: a tenant's admins alter and describe
	// their tenant's principals' quotas, and a tenant's principals
	// describe only their tenant's (delegate.go).
	Tenants *Tenants
	// OnChange, if set, is called after an Alter that committed a change,
	// before its response is returned, with the quotas now in the store.
	// Calls are serialised and the last one always reflects every commit
	// before it.
	OnChange func(model.Quotas, IPQuotas)

	changeMu sync.Mutex
	fixed    atomic.Pointer[[]store.EntityQuotas]
}

// SetFixed sets quotas declared outside the Kafka API (Tollgate's config
// file). They are authoritative for the (entity, key) pairs they name:
// Describe reports them over the store's values, Alter refuses to change
// them, and Quotas includes them.
func (c *ClientQuotas) SetFixed(f []store.EntityQuotas) { c.fixed.Store(&f) }

func (c *ClientQuotas) fixedQuotas() []store.EntityQuotas {
	if p := c.fixed.Load(); p != nil {
		return *p
	}
	return nil
}

// fixedKey returns the fixed value of key on entity e, if any.
func (c *ClientQuotas) fixedKey(e store.Entity, key string) bool {
	for _, f := range c.fixedQuotas() {
		if f.Entity.Equal(e) {
			_, ok := f.Values[key]
			return ok
		}
	}
	return false
}

// merged is the store's quotas with the fixed ones laid over them.
func (c *ClientQuotas) merged() ([]store.EntityQuotas, error) {
	all, err := c.Store.ClientQuotas()
	if err != nil {
		return nil, err
	}
	return Overlay(all, c.fixedQuotas()), nil
}

// Overlay returns base with over's values laid on top, entity by entity.
func Overlay(base, over []store.EntityQuotas) []store.EntityQuotas {
	out := make([]store.EntityQuotas, 0, len(base)+len(over))
	for _, b := range base {
		vals := make(map[string]float64, len(b.Values))
		for k, v := range b.Values {
			vals[k] = v
		}
		out = append(out, store.EntityQuotas{Entity: b.Entity, Values: vals})
	}
	for _, o := range over {
		i := slices.IndexFunc(out, func(e store.EntityQuotas) bool { return e.Entity.Equal(o.Entity) })
		if i < 0 {
			out = append(out, store.EntityQuotas{Entity: o.Entity, Values: map[string]float64{}})
			i = len(out) - 1
		}
		for k, v := range o.Values {
			out[i].Values[k] = v
		}
	}
	slices.SortFunc(out, func(a, b store.EntityQuotas) int { return bytes.Compare(a.Entity.Key(), b.Entity.Key()) })
	return out
}

func (c *ClientQuotas) authorize(who Initiator, op Operation) bool {
	if c.Authz == nil {
		return Admins{}.Authorize(who, op)
	}
	return c.Authz.Authorize(who, op)
}

// Quotas builds the quota engine's input from the store: the user and
// client-id entities as a model.Quotas, and the ip entities'
// connection_creation_rate. Keys the engine does not know are skipped (as
// Kafka's brokers skip them with a warning). An error lists the values
// model.Quotas refused; the rest is still returned.
func (c *ClientQuotas) Quotas() (model.Quotas, IPQuotas, error) {
	all, err := c.merged()
	if err != nil {
		return model.Quotas{}, IPQuotas{}, err
	}
	return BuildFrom(all)
}

// Build is ClientQuotas.Quotas for any store (without fixed quotas).
func Build(s *store.Store) (model.Quotas, IPQuotas, error) {
	all, err := s.ClientQuotas()
	if err != nil {
		return model.Quotas{}, IPQuotas{}, err
	}
	return BuildFrom(all)
}

// BuildFrom turns entities into the quota engine's input.
func BuildFrom(all []store.EntityQuotas) (model.Quotas, IPQuotas, error) {
	var q model.Quotas
	ips := IPQuotas{}
	var errs []error
	for _, eq := range all {
		if ip, ok := eq.Entity.Get(store.TypeIP); ok {
			if v, ok := eq.Values[keyConnectionCreationRate]; ok {
				name := ip.Name
				if ip.Default {
					name = ""
				}
				ips[name] = v
			}
			continue
		}
		e, err := model.EntityOf(eq.Entity.Parts())
		if err != nil {
			errs = append(errs, fmt.Errorf("%v: %w", eq.Entity, err))
			continue
		}
		if o := model.OptionsOf(eq.Values); o != (model.Options{}) {
			if err := q.SetOptions(e, o); err != nil {
				errs = append(errs, fmt.Errorf("%v options: %w", eq.Entity, err))
			}
		}
		for k, v := range eq.Values {
			key, ok := model.ParseKey(k)
			if !ok {
				continue
			}
			if err := q.Set(e, key, v); err != nil {
				errs = append(errs, fmt.Errorf("%v %s=%v: %w", eq.Entity, k, v, err))
			}
		}
	}
	return q, ips, errors.Join(errs...)
}

// changed hands the store's quotas to OnChange.
func (c *ClientQuotas) changed() {
	if c.OnChange == nil {
		return
	}
	c.changeMu.Lock()
	defer c.changeMu.Unlock()
	q, ips, err := c.Quotas()
	if err != nil && q.Len() == 0 && len(ips) == 0 {
		return
	}
	c.OnChange(q, ips)
}

// record writes an audit event. Failures of events that only report a
// refusal are not fatal: the response is an error already.
func (c *ClientQuotas) record(ctx context.Context, e audit.Event) error {
	return c.Audit.Record(ctx, e)
}
