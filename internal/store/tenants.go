package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// bucketTenants holds the tenants managed through the admin API (see the
// layout in store.go): tenant name → JSON of Tenant. A tenant is one leaf,
// so in a Tollgate cluster two changes to one tenant at once keep the later
// one whole (the topic's order decides), never a mix of the two.
var bucketTenants = []byte("tenants")

// Tenant is a stored tenant: who belongs and its ceilings, as the control
// plane validated it. The store does not interpret it.
type Tenant struct {
	Name              string   `json:"name"`
	Principals        []string `json:"principals,omitempty"`
	PrincipalPrefixes []string `json:"principal_prefixes,omitempty"`
	PrincipalRules    []string `json:"principal_rules,omitempty"`
	// Ceilings by quota key (producer_byte_rate, consumer_byte_rate,
	// controller_mutation_rate).
	Ceilings     map[string]float64 `json:"ceilings,omitempty"`
	Shadow       bool               `json:"shadow,omitempty"`
	BurstSeconds *float64           `json:"burst_seconds,omitempty"`
	Admins       []string           `json:"admins,omitempty"`
}

// maxTenantName bounds a name so that it is always a valid bbolt key.
const maxTenantName = 249

func validTenantName(name string) error {
	if name == "" || len(name) > maxTenantName {
		return fmt.Errorf("store: invalid tenant name of %d bytes", len(name))
	}
	return nil
}

func decodeTenant(v []byte) (Tenant, error) {
	var t Tenant
	if err := json.Unmarshal(v, &t); err != nil {
		return Tenant{}, fmt.Errorf("store: corrupt tenant record: %w", err)
	}
	return t, nil
}

// Tenants returns every stored tenant, by name.
func (s *Store) Tenants() ([]Tenant, error) {
	var out []Tenant
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTenants).ForEach(func(_, v []byte) error {
			t, err := decodeTenant(v)
			if err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Tenant) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// Tenant returns the tenant named name.
func (s *Store) Tenant(name string) (Tenant, bool, error) {
	var t Tenant
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		if validTenantName(name) != nil {
			return nil
		}
		v := tx.Bucket(bucketTenants).Get([]byte(name))
		if v == nil {
			return nil
		}
		var err error
		t, err = decodeTenant(v)
		ok = err == nil
		return err
	})
	return t, ok, err
}

// TenantWrite says what PutTenantFunc may do.
type TenantWrite uint8

// TenantWrite values.
const (
	// CreateTenant fails with ErrExists when the tenant exists.
	CreateTenant TenantWrite = iota + 1
	// ReplaceTenant fails with ErrNotFound when it does not.
	ReplaceTenant
)

// PutTenantFunc creates or replaces a tenant (as mode says) and returns
// the tenant it replaced (nil: none). before, if not nil, is called with
// that old tenant inside the write transaction before the commit, as in
// AlterClientQuotasFunc; its error commits nothing and is returned
// unchanged. Writing what is stored already changes nothing.
func (s *Store) PutTenantFunc(t Tenant, mode TenantWrite, before func(old *Tenant) error) (*Tenant, error) {
	if err := validTenantName(t.Name); err != nil {
		return nil, err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	var old *Tenant
	err = s.write(func(tx *bolt.Tx) ([]leaf, bool, error) {
		b := tx.Bucket(bucketTenants)
		key := []byte(t.Name)
		cur := b.Get(key)
		switch {
		case cur != nil && mode == CreateTenant:
			return nil, false, fmt.Errorf("%w: tenant %q", ErrExists, t.Name)
		case cur == nil && mode == ReplaceTenant:
			return nil, false, fmt.Errorf("%w: tenant %q", ErrNotFound, t.Name)
		}
		changed := true
		if cur != nil {
			o, err := decodeTenant(cur)
			if err != nil {
				return nil, false, err
			}
			old = &o
			changed = string(cur) != string(data)
		}
		if changed {
			if err := b.Put(key, data); err != nil {
				return nil, false, err
			}
		}
		if before != nil {
			if err := before(old); err != nil {
				return nil, false, err
			}
		}
		return []leaf{{top: bucketTenants, key: key}}, changed, nil
	})
	if err != nil {
		return nil, err
	}
	return old, nil
}

// DeleteTenantFunc deletes the tenant named name and returns it; an
// unknown name is ErrNotFound. before is called with it inside the write
// transaction, as in PutTenantFunc.
func (s *Store) DeleteTenantFunc(name string, before func(old Tenant) error) (Tenant, error) {
	var old Tenant
	err := s.write(func(tx *bolt.Tx) ([]leaf, bool, error) {
		if validTenantName(name) != nil {
			return nil, false, fmt.Errorf("%w: tenant %q", ErrNotFound, name)
		}
		b := tx.Bucket(bucketTenants)
		key := []byte(name)
		v := b.Get(key)
		if v == nil {
			return nil, false, fmt.Errorf("%w: tenant %q", ErrNotFound, name)
		}
		var err error
		if old, err = decodeTenant(v); err != nil {
			return nil, false, err
		}
		if err := b.Delete(key); err != nil {
			return nil, false, err
		}
		if before != nil {
			if err := before(old); err != nil {
				return nil, false, err
			}
		}
		return []leaf{{top: bucketTenants, key: key}}, true, nil
	})
	if err != nil {
		return Tenant{}, err
	}
	return old, nil
}
