package app

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
)

// securityOptions turns the config's upstream TLS/SASL and credentials
// into gateway options.
func (a *App) securityOptions() ([]proxy.Option, error) {
	var opts []proxy.Option
	if t := a.cfg.Upstream.TLS; t != nil {
		c, err := t.ClientConfig()
		if err != nil {
			return nil, err
		}
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

// credentials is where terminated SASL logins are checked: the
// credentials file, when configured.
func (a *App) credentials() (auth.CredentialLookup, error) {
	if a.cfg.CredentialsFile == "" {
		return nil, nil
	}
	ms, err := auth.LoadCredentialFile(a.cfg.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("credentials_file: %w", err)
	}
	return auth.NewLookup(ms, ms), nil
}

// observer feeds connection events to the metrics and failed logins to the
// audit log.
type observer struct{ a *App }

func (o *observer) Opened(c *principal.ConnInfo) { o.a.metrics.Opened(c) }

func (o *observer) Closed(c *principal.ConnInfo, r proxy.Reason, err error) {
	o.a.metrics.Closed(c, r, err)
}

func (o *observer) Refused(listener, reason string) { o.a.metrics.Refused(listener, reason) }

// AuthFailed counts and audits a failed login, with its source address.
func (o *observer) AuthFailed(c *principal.ConnInfo, mechanism string, err error) {
	o.a.metrics.AuthFailed(c, mechanism, err)
	ev := audit.Event{
		Action:       audit.ActionAuthenticate,
		Outcome:      audit.Denied,
		ErrorCode:    58,
		ErrorMessage: auth.ClientMessage(err),
		Initiator:    audit.Initiator{Source: c.Remote.String(), Listener: c.Listener},
		Changes:      []audit.Change{{Key: "mechanism", New: audit.String(mechanism)}},
	}
	o.a.audit.Record(context.Background(), ev)
}
