package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/httpapi"
	"github.com/tollgate/tollgate/internal/principal"
)

// HTTPConfig is the admin HTTP port: health, metrics, the JSON API and the
// dashboard. Who may use it, and how, is docs/security.md's "The admin HTTP
// port".
type HTTPConfig struct {
	// Address to listen on; "" disables the HTTP port.
	Address string `yaml:"address"`
	// TLS serves the port over HTTPS, with a listener's tls settings; with
	// client_auth requested or required, a verified client certificate
	// authenticates its mapped subject.
	TLS *auth.TLSConfig `yaml:"tls"`
	// SSLPrincipalMappingRules maps a client certificate's subject to its
	// principal, as a listener's ssl_principal_mapping_rules (default
	// DEFAULT).
	SSLPrincipalMappingRules string `yaml:"ssl_principal_mapping_rules"`
	// AllowedHosts are the names accepted in requests' Host header; IP
	// literals always are. Unset: [localhost].
	AllowedHosts []string `yaml:"allowed_hosts"`
	// OpenEndpoints answer without credentials. Unset: /metrics, /healthz,
	// /readyz; [] closes them all.
	OpenEndpoints []string `yaml:"open_endpoints"`
	// ReadHeaderTimeout bounds reading a request's headers, from the
	// connection's first byte (or the end of the previous request).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds answering a request, from the end of its headers.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a kept-alive connection idle this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// The admin port's defaults.
const (
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPReadTimeout       = 30 * time.Second
	DefaultHTTPWriteTimeout      = 60 * time.Second
	DefaultHTTPIdleTimeout       = 2 * time.Minute
	// HTTPMaxHeaderBytes bounds a request's header section (Go's default
	// is 1 MiB; the API needs a few hundred bytes).
	HTTPMaxHeaderBytes = 64 << 10
)

// Validate checks the http section offline.
func (h HTTPConfig) Validate() error {
	var errs []error
	if h.Address != "" {
		if _, _, err := net.SplitHostPort(h.Address); err != nil {
			errs = append(errs, fmt.Errorf("http.address %q: %w", h.Address, err))
		}
	}
	if h.TLS != nil {
		if err := h.TLS.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("http.%w", err))
		}
	}
	if h.SSLPrincipalMappingRules != "" {
		if _, err := auth.ParseMappingRules(h.SSLPrincipalMappingRules); err != nil {
			errs = append(errs, fmt.Errorf("http.ssl_principal_mapping_rules: %w", err))
		}
	}
	for _, n := range h.AllowedHosts {
		if err := validHostName(n); err != nil {
			errs = append(errs, fmt.Errorf("http.allowed_hosts: %q %w", n, err))
		}
	}
	for _, e := range h.OpenEndpoints {
		switch e {
		case httpapi.EndpointMetrics, httpapi.EndpointHealthz, httpapi.EndpointReadyz:
		default:
			errs = append(errs, fmt.Errorf("http.open_endpoints: %q: want %s, %s or %s",
				e, httpapi.EndpointMetrics, httpapi.EndpointHealthz, httpapi.EndpointReadyz))
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"read_header_timeout", h.ReadHeaderTimeout}, {"read_timeout", h.ReadTimeout},
		{"write_timeout", h.WriteTimeout}, {"idle_timeout", h.IdleTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("http.%s must not be negative", d.key))
		}
	}
	return errors.Join(errs...)
}

// validHostName accepts a DNS name (letters, digits, '-', '_', dots) with
// no port; Host headers are compared with it without case.
func validHostName(n string) error {
	if n == "" {
		return errors.New("is empty")
	}
	if _, err := netip.ParseAddr(strings.Trim(n, "[]")); err == nil {
		return errors.New("is an IP address: IP addresses are always accepted, list names only")
	}
	if _, _, err := net.SplitHostPort(n); err == nil {
		return errors.New("has a port: list the name alone (any port is accepted)")
	}
	if len(n) > 253 {
		return errors.New("is longer than a DNS name can be")
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("is not a host name (character %q)", c)
		}
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// newHTTPServer is the admin port's server with its configured bounds.
func newHTTPServer(c HTTPConfig, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: orDefault(c.ReadHeaderTimeout, DefaultHTTPReadHeaderTimeout),
		ReadTimeout:       orDefault(c.ReadTimeout, DefaultHTTPReadTimeout),
		WriteTimeout:      orDefault(c.WriteTimeout, DefaultHTTPWriteTimeout),
		IdleTimeout:       orDefault(c.IdleTimeout, DefaultHTTPIdleTimeout),
		MaxHeaderBytes:    HTTPMaxHeaderBytes,
		// TLS handshake failures and malformed requests are the callers'
		// doing: debug level, so that nobody can flood the log.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// listenHTTP opens the admin port (taking it over from a predecessor
// when there is one) before the components that report its address are
// built (a Tollgate cluster's exchange); serveHTTP serves it once the
// gateway runs.
func (a *App) listenHTTP(context.Context) error {
	c := a.cfg.HTTP
	if c.Address == "" {
		return nil
	}
	var st *auth.ServerTLS
	if c.TLS != nil {
		var err error
		if st, err = auth.NewServerTLS(*c.TLS); err != nil {
			return fmt.Errorf("http.%w", err)
		}
	}
	ln, err := a.opts.Inherited.Listener(accept.HTTPSocket, c.Address)
	if err != nil {
		a.log.Warn("not taking over the admin port; opening it afresh", "err", err)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", c.Address); err != nil {
			return fmt.Errorf("http: %w", err)
		}
	}
	a.httpTCP = ln
	if st != nil {
		ln = tls.NewListener(ln, st.Config())
	}
	a.httpLn = ln
	return nil
}

// serveHTTP serves the admin port listenHTTP opened.
func (a *App) serveHTTP(context.Context) error {
	if a.httpLn == nil {
		return nil
	}
	c := a.cfg.HTTP
	rules := c.SSLPrincipalMappingRules
	if rules == "" {
		rules = "DEFAULT"
	}
	mapper, err := auth.ParseMappingRules(rules)
	if err != nil {
		return fmt.Errorf("http.ssl_principal_mapping_rules: %w", err)
	}
	h := httpapi.Handler(httpapi.Sources{
		Engine:    a.engine,
		Admission: a.admit,
		Sessions:  a.gw.SessionsByListener,
		Audit: func(n int) []any {
			evs := a.audit.Recent(n)
			out := make([]any, len(evs))
			for i := range evs {
				out[i] = &evs[i]
			}
			return out
		},
		IPRate:    a.ipRate,
		Ready:     a.ready,
		Cluster:   a.clusterStatus,
		Registry:  a.metrics.Registry,
		APIKeys:   a.creds,
		Tenants:   a.tenants,
		Usage:     a.usageSource(),
		Suggest:   a.suggestSource(),
		Telemetry: a.telemetry,
		Access: httpapi.Access{
			Keys:          a.apiKeys,
			Authz:         a.admins, // the Kafka API's authorizer (control.go), live
			Certificates:  mapper,
			AllowedHosts:  c.AllowedHosts,
			OpenEndpoints: c.OpenEndpoints,
			Audit:         a.audit,
			AuthFailed: func(remote netip.AddrPort, mechanism string, err error) {
				a.metrics.AuthFailed(&principal.ConnInfo{Listener: httpapi.ListenerName, Remote: remote}, mechanism, err)
			},
		},
	})
	a.httpSrv = newHTTPServer(c, h, a.log)
	go a.httpSrv.Serve(a.httpLn)
	a.log.Info("admin HTTP port open", "url", a.HTTPURL())
	return nil
}
