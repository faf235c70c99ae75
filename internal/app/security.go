package app

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/twmb/franz-go/pkg/kerr"
)

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
	return auth.NewLookup(users, keys), nil
}

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
// audit log.
type observer struct{ a *App }

func (o *observer) Opened(c *principal.ConnInfo) { o.a.metrics.Opened(c) }

func (o *observer) Closed(c *principal.ConnInfo, r proxy.Reason, err error) {
	o.a.metrics.Closed(c, r, err)
}

func (o *observer) Refused(listener, reason string) { o.a.metrics.Refused(listener, reason) }

func (o *observer) UpstreamOpened(c *principal.ConnInfo) { o.a.metrics.UpstreamOpened(c) }

// AuthFailed counts and audits a failed login, with its source address.
func (o *observer) AuthFailed(c *principal.ConnInfo, mechanism string, err error) {
	o.a.metrics.AuthFailed(c, mechanism, err)
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
