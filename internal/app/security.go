package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AuthenticationConfig bounds password guessing on the listeners that
// terminate SASL (beyond Kafka, which has no such limit).
type AuthenticationConfig struct {
	// FailedLoginsPerIP is how many failed logins a source address (IPv6:
	// its /64) may have per FailedLoginWindow, as a token bucket; beyond,
	// its logins are refused before any credential is checked until the
	// bucket refills (default 20; negative: no limit).
	FailedLoginsPerIP int `yaml:"failed_logins_per_ip"`
	// FailedLoginWindow is the window of FailedLoginsPerIP (default 1m).
	FailedLoginWindow time.Duration `yaml:"failed_login_window"`
}

// Failed-login limit defaults.
const (
	DefaultFailedLoginsPerIP = 20
	DefaultFailedLoginWindow = time.Minute
)

// Validate checks the authentication section offline.
func (c AuthenticationConfig) Validate() error {
	if c.FailedLoginWindow < 0 {
		return errors.New("authentication.failed_login_window must not be negative")
	}
	return nil
}

func (c AuthenticationConfig) limit() auth.LoginLimit {
	l := auth.LoginLimit{Failures: c.FailedLoginsPerIP, Window: c.FailedLoginWindow}
	if l.Failures == 0 {
		l.Failures = DefaultFailedLoginsPerIP
	}
	if l.Window == 0 {
		l.Window = DefaultFailedLoginWindow
	}
	return l
}

// securityOptions turns the config's upstream TLS/SASL and credentials
// into gateway options.
func (a *App) securityOptions() ([]proxy.Option, error) {
	var opts []proxy.Option
	if c, err := a.upstreamTLS(); err != nil {
		return nil, err
	} else if c != nil {
		opts = append(opts, proxy.WithUpstreamTLS(c))
	}
	if s := a.cfg.Upstream.SASL; s != nil {
		m, err := s.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, proxy.WithUpstreamSASL(m))
	}
	if lookup, err := a.credentials(); err != nil {
		return nil, err
	} else if lookup != nil {
		opts = append(opts, proxy.WithCredentials(lookup))
	}
	return opts, nil
}

// upstreamTLS is the client TLS configuration of every upstream
// connection (upstream.tls; nil without), built once: the gateway's
// sessions and metadata client and the audit topic sink share it.
func (a *App) upstreamTLS() (*tls.Config, error) {
	t := a.cfg.Upstream.TLS
	if t == nil || a.upTLS != nil {
		return a.upTLS, nil
	}
	c, err := t.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("upstream.tls: %w", err)
	}
	a.upTLS = c
	return c, nil
}

// credentials is where terminated SASL logins are checked: the store
// (credentials managed through the Kafka API and API keys), then the
// credentials file (a.fileCreds, whose contents a reload replaces: a user
// or key removed from the file stops working at the next login or
// request).
func (a *App) credentials() (auth.CredentialLookup, error) {
	if a.cfg.CredentialsFile != "" {
		ms, err := auth.LoadCredentialFile(a.cfg.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("credentials_file: %w", err)
		}
		a.fileCreds.Replace(ms)
	}
	users := layered{a.creds, a.fileCreds}
	keys := layeredKeys{a.creds, a.fileCreds}
	a.apiKeys = keys // the admin port checks Bearer keys against the same source
	// Unknown users see a salt derived from a secret kept in data_dir, so
	// that it is the same after a restart, as a real user's is.
	secret, err := auth.LoadOrCreateSecret(filepath.Join(a.cfg.dataDir(), DecoySecretFile))
	if err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	decoys, err := auth.NewDecoys(secret, users)
	if err != nil {
		return nil, err
	}
	return auth.NewLookupDecoys(users, keys, decoys), nil
}

// DecoySecretFile, in data_dir, holds the secret unknown users' SCRAM
// salts are derived from (32 random bytes, mode 0600, made at first
// start).
const DecoySecretFile = "decoy.key"

// layered tries SCRAM stores in order.
type layered []auth.ScramStore

func (l layered) Scram(user, mechanism string) (auth.ScramCredential, bool) {
	for _, s := range l {
		if c, ok := s.Scram(user, mechanism); ok {
			return c, true
		}
	}
	return auth.ScramCredential{}, false
}

// ScramShapes counts the credentials of every layer (auth.ShapeCounter).
func (l layered) ScramShapes(add func(string, auth.ScramShape, int)) {
	for _, s := range l {
		if sc, ok := s.(auth.ShapeCounter); ok {
			sc.ScramShapes(add)
		}
	}
}

// layeredKeys tries API key sources in order.
type layeredKeys []auth.APIKeys

func (l layeredKeys) ByID(id string) (auth.APIKey, bool) {
	for _, s := range l {
		if k, ok := s.ByID(id); ok {
			return k, true
		}
	}
	return auth.APIKey{}, false
}

// observer feeds connection events to the metrics and failed logins to the
// audit log and the failed-login limit.
type observer struct{ a *App }

// LoginAllowed refuses a login from an address over its failed-login
// limit.
func (o *observer) LoginAllowed(c *principal.ConnInfo, _ string) error {
	return o.a.logins.Allow(c.Remote.Addr(), o.a.now())
}

func (o *observer) Opened(c *principal.ConnInfo) { o.a.metrics.Opened(c) }

func (o *observer) Closed(c *principal.ConnInfo, r proxy.Reason, err error) {
	o.a.metrics.Closed(c, r, err)
}

func (o *observer) Refused(listener, reason string) { o.a.metrics.Refused(listener, reason) }

func (o *observer) UpstreamOpened(c *principal.ConnInfo) { o.a.metrics.UpstreamOpened(c) }

// AuthFailed counts and audits a failed login, with its source address
// (the audit log aggregates them per address), and charges it to the
// address's failed-login limit — unless the limit refused it, which is
// counted apart and charges nothing (no credential was checked).
func (o *observer) AuthFailed(c *principal.ConnInfo, mechanism string, err error) {
	o.a.metrics.AuthFailed(c, mechanism, err)
	if errors.Is(err, auth.ErrTooManyFailedLogins) {
		o.a.loginRefused()
	} else {
		o.a.logins.Failed(c.Remote.Addr(), o.a.now())
	}
	ev := audit.Event{
		Action:       audit.ActionAuthenticate,
		Outcome:      audit.Denied,
		ErrorCode:    kerr.SaslAuthenticationFailed.Code,
		ErrorMessage: auth.ClientMessage(err),
		Initiator:    audit.Initiator{Source: c.Remote.String(), Listener: c.Listener},
		Changes:      []audit.Change{{Key: "mechanism", New: audit.String(mechanism)}},
	}
	o.a.audit.Record(context.Background(), ev)
}

// closeWithdrawn closes the connections whose terminated SASL login used a
// credential that no longer exists — a SCRAM user deleted through the
// Kafka API or removed from credentials_file, an API key revoked or
// removed: a withdrawn credential stops working at once, not only at the
// next login.
func (a *App) closeWithdrawn() {
	if a.gw == nil {
		return
	}
	n := a.gw.CloseSessions(func(c *principal.ConnInfo) bool {
		return c.Credential != "" && !a.credentialExists(c.Credential)
	}, proxy.ReasonRevoked)
	if n > 0 {
		a.log.Info("closed the connections of withdrawn credentials", "connections", n)
	}
}

// credentialExists reports whether a login's credential ("user:<name>",
// "apikey:<id>") is still in the store or the credentials file.
func (a *App) credentialExists(cred string) bool {
	kind, name, _ := strings.Cut(cred, ":")
	switch kind {
	case "user":
		users := layered{a.creds, a.fileCreds}
		for _, m := range auth.Mechanisms() {
			if m == auth.MechanismPlain {
				continue
			}
			if _, ok := users.Scram(name, m); ok {
				return true
			}
		}
		return false
	case "apikey":
		k, ok := layeredKeys{a.creds, a.fileCreds}.ByID(name)
		return ok && !k.Revoked
	}
	return true
}

// upstreamClientOpts are the franz-go options every client Tollgate itself
// runs against the upstream uses (the audit and usage topics, a Tollgate
// cluster's topics): the seeds, the dialer of Options.UpstreamDial or one
// with upstream.dial_timeout, and upstream.tls and upstream.sasl — the
// same listener security as the gateway's own metadata client.
func (a *App) upstreamClientOpts(upstream []string, clientID string) ([]kgo.Opt, error) {
	tc, err := a.upstreamTLS()
	if err != nil {
		return nil, err
	}
	dial := a.opts.UpstreamDial
	if dial == nil {
		d := &net.Dialer{Timeout: a.cfg.Upstream.DialTimeout}
		if d.Timeout == 0 {
			d.Timeout = 10 * time.Second
		}
		dial = d.DialContext
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(upstream...),
		kgo.ClientID(clientID),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := dial(ctx, network, host)
			if err != nil || tc == nil {
				return c, err
			}
			cfg := tc.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName, _, _ = net.SplitHostPort(host)
			}
			return tls.Client(c, cfg), nil
		}),
	}
	if s := a.cfg.Upstream.SASL; s != nil {
		m, err := s.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}
