package app

import (
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
)

// TenantEntry is one tenant in the config file (control.TenantSpec, the
// shape the admin API and `tollgate tenants` use too).
type TenantEntry = control.TenantSpec

// openTenants builds the tenant manager over the store and gives the
// client quotas its delegation. The engine gets each set in force; the
// config file's tenants are applied at the first load (refreshQuotas).
func (a *App) openTenants() {
	a.tenants = &control.Tenants{
		Store: a.store,
		Audit: a.audit,
		Authz: a.admins, // the quota admins manage tenants, live
		OnChange: func(s *quota.TenantSet) {
			a.engine.SetTenants(s, a.now())
		},
	}
	a.tenants.SetFixedOnly(a.cfg.Tenants)
	a.ctl.Tenants = a.tenants
	a.creds.Tenants = a.tenants
}

// loadTenants re-reads the tenants (the store's may have been changed by
// another instance of a Tollgate cluster, or a handover's successor).
// Stored tenants the config file's leave no room for are logged; the rest
// is in force.
func (a *App) loadTenants() {
	if a.tenants == nil {
		return
	}
	if err := a.tenants.Load(); err != nil {
		a.log.Error("tenants: some are not in force", "err", err)
	}
}

// reloadTenants applies the config file's tenants after a reload and logs
// what changed mode (shadow or enforced), as for quotas.
func (a *App) reloadTenants(before, after []TenantEntry) {
	a.tenants.SetFixedOnly(after)
	a.loadTenants()
	mode := func(es []TenantEntry) map[string]bool {
		m := map[string]bool{}
		for _, e := range es {
			m[e.Name] = e.Shadow
		}
		return m
	}
	was, is := mode(before), mode(after)
	for name, shadow := range is {
		if old, ok := was[name]; !ok && shadow || ok && old != shadow {
			a.log.Info("tenant mode changed", "tenant", name, "mode", modeName(shadow), "file", a.path)
		}
	}
	a.log.Info("tenants reloaded", "file", a.path, "tenants", len(after))
}
