package app

import (
	"bytes"
	"crypto/sha256"
	"os"
	"time"
)

// Reload re-reads the config file and applies what can change live: the
// quotas. Everything else needs a restart; a changed restart-only setting
// is logged and ignored. An invalid file changes nothing.
func (a *App) Reload() error {
	if a.path == "" {
		return nil
	}
	cfg, err := Load(a.path)
	if err != nil {
		a.log.Error("config reload failed; keeping the running configuration", "file", a.path, "err", err)
		return err
	}
	if _, err := buildQuotas(cfg.Quotas); err != nil {
		a.log.Error("config reload failed; keeping the running configuration", "file", a.path, "err", err)
		return err
	}
	cfg.Listeners = a.cfg.Listeners // listeners change only with a restart
	if _, err := admissionSettings(&cfg, nil, nil); err != nil {
		a.log.Error("config reload failed; keeping the running configuration", "file", a.path, "err", err)
		return err
	}
	if cfg.Quota != a.cfg.Quota {
		a.log.Warn("quota.* settings changed; they take effect after a restart", "file", a.path)
	}
	a.mu.Lock()
	a.cfg.Quotas = cfg.Quotas
	a.cfg.BrokerConfigs = cfg.BrokerConfigs
	a.mu.Unlock()
	a.ctl.SetFixed(fileEntities(cfg.Quotas))
	if err := a.refreshQuotas(); err != nil {
		a.log.Error("config reload failed", "file", a.path, "err", err)
		return err
	}
	q := a.engine.Quotas()
	a.log.Info("quotas reloaded", "file", a.path, "entities", q.Len())
	return nil
}

// watch applies the config file whenever its contents change.
func (a *App) watch(every time.Duration) {
	defer close(a.done)
	if every <= 0 {
		every = time.Second
	}
	last := fileSum(a.path)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			sum := fileSum(a.path)
			if sum == nil || bytes.Equal(sum, last) {
				continue
			}
			last = sum
			a.Reload()
		}
	}
}

func fileSum(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := sha256.Sum256(b)
	return s[:]
}
