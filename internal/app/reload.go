package app

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// Reload re-reads the config file and applies what can change live: the
// quotas, tenants and broker configs, who may act (authorization.quota_admins and
// allow_anonymous_describe), the credentials file (credentials_file,
// re-read even when only its contents changed), the clients' telemetry
// subscription (telemetry.push_interval and telemetry.metrics) and the
// disk-full protection (storage). Everything else needs a
// restart; a changed restart-only setting is logged and ignored.
//
// A reload applies all of it or nothing: a file that does not parse or
// validate, or a credentials file that cannot be read, is logged as an
// error and changes nothing — the running configuration stays in force.
//
// What changes takes effect at once: a principal removed from quota_admins
// is refused from its next request on, on the Kafka listeners and the
// admin port alike; a user or API key removed from the credentials file
// cannot log in or authenticate a request any more, and the connections
// that logged in with it are closed (credential_revoked) — beyond Kafka,
// which keeps a session authenticated with a since-deleted SCRAM
// credential until it closes. The same holds for a SCRAM user deleted or
// an API key revoked through the API (closeWithdrawn).
func (a *App) Reload() error {
	if a.path == "" {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	fail := func(err error) error {
		a.log.Error("config reload failed; keeping the running configuration", "file", a.path, "err", err)
		return err
	}
	cfg, err := Load(a.path)
	if err != nil {
		return fail(err)
	}
	if _, err := buildQuotas(cfg.Quotas); err != nil {
		return fail(err)
	}
	cfg.Listeners = a.cfg.Listeners // listeners change only with a restart
	if _, err := admissionSettings(&cfg, nil, nil); err != nil {
		return fail(err)
	}
	creds := auth.NewMemoryStore()
	if cfg.CredentialsFile != "" {
		if creds, err = auth.LoadCredentialFile(cfg.CredentialsFile); err != nil {
			return fail(fmt.Errorf("credentials_file: %w", err))
		}
	}
	if cfg.Quota != a.cfg.Quota {
		a.log.Warn("quota.* settings changed; they take effect after a restart", "file", a.path)
	}
	if telemetryRestartOnly(a.cfg.Telemetry, cfg.Telemetry) {
		a.log.Warn("telemetry.enabled, max_bytes, max_client_instances or max_series changed; they take effect after a restart", "file", a.path)
	}

	// Everything is valid: apply.
	a.mu.Lock()
	old := a.cfg.Authorization
	oldQuotas, oldTenants := a.cfg.Quotas, a.cfg.Tenants
	a.cfg.Quotas = cfg.Quotas
	a.cfg.Tenants = cfg.Tenants
	a.cfg.BrokerConfigs = cfg.BrokerConfigs
	a.cfg.Authorization = cfg.Authorization
	a.cfg.CredentialsFile = cfg.CredentialsFile
	a.cfg.Telemetry.PushInterval, a.cfg.Telemetry.Metrics = cfg.Telemetry.PushInterval, cfg.Telemetry.Metrics
	a.cfg.Storage = cfg.Storage
	a.mu.Unlock()
	if a.storage != nil {
		// The next check, within storage.check_interval, applies it.
		a.storage.guard.SetConfig(cfg.Storage)
	}
	if a.telemetry != nil {
		// Clients get the new subscription at their next request.
		a.telemetry.SetSubscription(cfg.Telemetry.Subscription())
	}
	a.admins.Set(cfg.Authorization.admins())
	users, keys := len(creds.Users()), len(creds.APIKeys())
	a.fileCreds.Replace(creds) // creds is empty from here on
	a.closeWithdrawn()
	if !slices.Equal(old.QuotaAdmins, cfg.Authorization.QuotaAdmins) || old.AllowAnonymousDescribe != cfg.Authorization.AllowAnonymousDescribe {
		a.log.Info("authorization reloaded", "file", a.path, "quota_admins", cfg.Authorization.QuotaAdmins,
			"allow_anonymous_describe", cfg.Authorization.AllowAnonymousDescribe)
	}
	a.log.Info("credentials reloaded", "credentials_file", cfg.CredentialsFile, "users", users, "api_keys", keys)
	a.ctl.SetFixed(fileEntities(cfg.Quotas))
	a.reloadTenants(oldTenants, cfg.Tenants)
	if err := a.refreshQuotas(); err != nil {
		a.log.Error("config reload failed", "file", a.path, "err", err)
		return err
	}
	q := a.engine.Quotas()
	a.log.Info("quotas reloaded", "file", a.path, "entities", q.Len())
	a.logModeChanges(oldQuotas, cfg.Quotas)
	return nil
}

// telemetryRestartOnly reports whether a telemetry setting that needs a
// restart changed (push_interval and metrics apply live).
func telemetryRestartOnly(old, cur telemetry.Config) bool {
	return old.On() != cur.On() || old.Options().MaxBytes != cur.Options().MaxBytes ||
		old.Options().MaxClientInstances != cur.Options().MaxClientInstances || old.Options().MaxSeries != cur.Options().MaxSeries
}

// watch applies the config file whenever its contents, or those of the
// credentials file it names, change.
func (a *App) watch(every time.Duration) {
	defer close(a.done)
	if every <= 0 {
		every = time.Second
	}
	last := a.watchedSum()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			sum := a.watchedSum()
			if sum == nil || bytes.Equal(sum, last) {
				continue
			}
			last = sum
			a.Reload()
		}
	}
}

// watchedSum is a digest of the config file and the credentials file in
// force; nil while the config file cannot be read (being replaced). A
// credentials file that cannot be read counts as a change: Reload then
// says why it cannot apply it.
func (a *App) watchedSum() []byte {
	cf := fileSum(a.path)
	if cf == nil {
		return nil
	}
	a.mu.Lock()
	credPath := a.cfg.CredentialsFile
	a.mu.Unlock()
	h := sha256.New()
	h.Write(cf)
	if credPath != "" {
		if s := fileSum(credPath); s != nil {
			h.Write(s)
		} else {
			h.Write([]byte("unreadable"))
		}
	}
	return h.Sum(nil)
}

func fileSum(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := sha256.Sum256(b)
	return s[:]
}
