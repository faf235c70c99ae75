package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often certificate files are checked for
// changes when TLSConfig.ReloadInterval is zero.
const DefaultReloadInterval = 5 * time.Second

// TLSConfig is a TLS listener's configuration.
type TLSConfig struct {
	// CertFile and KeyFile are the PEM certificate chain and private key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile is the PEM bundle client certificates are verified
	// against (Kafka's truststore); required unless ClientAuth is none.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is Kafka's ssl.client.auth: none (default), requested
	// (verify a certificate if the client sends one) or required.
	ClientAuth string `yaml:"client_auth"`
	// MinVersion is TLS1.2 (default) or TLS1.3.
	MinVersion string `yaml:"min_version"`
	// ReloadInterval is how often, at most, the files' modification times
	// are checked during handshakes (0: DefaultReloadInterval; negative:
	// never, only ServerTLS.Reload).
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Validate checks the configuration without reading the files.
func (c TLSConfig) Validate() error {
	if c.CertFile == "" || c.KeyFile == "" {
		return errors.New("tls: cert_file and key_file are required")
	}
	ca, err := parseClientAuth(c.ClientAuth)
	if err != nil {
		return err
	}
	if ca != tls.NoClientCert && c.ClientCAFile == "" {
		return fmt.Errorf("tls: client_auth %s needs client_ca_file", c.ClientAuth)
	}
	_, err = parseTLSVersion(c.MinVersion)
	return err
}

func parseClientAuth(s string) (tls.ClientAuthType, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("tls: client_auth %q: want none, requested or required", s)
}

func parseTLSVersion(s string) (uint16, error) {
	switch strings.ToUpper(strings.ReplaceAll(s, "v", "")) {
	case "", "TLS1.2", "1.2":
		return tls.VersionTLS12, nil
	case "TLS1.3", "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("tls: min_version %q: want TLS1.2 or TLS1.3", s)
}

// ServerTLS serves a listener's TLS configuration and reloads the
// certificate, key and client CA when their files change (checked at most
// every ReloadInterval, during handshakes) or when Reload is called. A
// failed reload keeps the previous certificate.
type ServerTLS struct {
	base *tls.Config
	r    *reloader[*tls.Config]
}

// NewServerTLS validates c and loads the files.
func NewServerTLS(c TLSConfig) (*ServerTLS, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	clientAuth, _ := parseClientAuth(c.ClientAuth)
	minVersion, _ := parseTLSVersion(c.MinVersion)
	paths := []string{c.CertFile, c.KeyFile}
	if c.ClientCAFile != "" {
		paths = append(paths, c.ClientCAFile)
	}
	s := &ServerTLS{}
	s.r = newReloader(paths, c.ReloadInterval, func() (*tls.Config, error) {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: loading %s and %s: %w", c.CertFile, c.KeyFile, err)
		}
		cfg := &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   clientAuth,
			MinVersion:   minVersion,
		}
		if c.ClientCAFile != "" {
			if cfg.ClientCAs, err = loadCertPool(c.ClientCAFile); err != nil {
				return nil, err
			}
		}
		return cfg, nil
	})
	if err := s.r.reload(); err != nil {
		return nil, err
	}
	s.base = &tls.Config{
		MinVersion:         minVersion,
		GetCertificate:     s.GetCertificate,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.r.get(), nil },
	}
	return s, nil
}

// Config is the tls.Config for the listener (tls.NewListener /
// tls.Server). Each handshake uses the current certificate and client CA.
func (s *ServerTLS) Config() *tls.Config { return s.base }

// GetCertificate returns the certificate currently served, checking the
// files for changes first when the interval has passed.
func (s *ServerTLS) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.r.get().Certificates[0], nil
}

// Reload reloads the files now, whether or not they changed. On error the
// previous configuration stays in use.
func (s *ServerTLS) Reload() error { return s.r.reload() }

// LastReloadError is the error of the most recent reload attempt, nil if it
// succeeded.
func (s *ServerTLS) LastReloadError() error { return s.r.lastError() }

// UpstreamTLSConfig is how Tollgate connects to the brokers over TLS.
type UpstreamTLSConfig struct {
	// CAFile verifies the brokers; empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are an optional client certificate (mTLS to the
	// brokers); reloaded when they change.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name verified in the brokers' certificates; empty:
	// the caller sets each broker's host (Config.Clone, then ServerName).
	ServerName string `yaml:"server_name"`
	// MinVersion is TLS1.2 (default) or TLS1.3.
	MinVersion string `yaml:"min_version"`
	// InsecureSkipVerify disables broker verification (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// ReloadInterval as in TLSConfig, for the client certificate.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Validate checks the configuration without reading the files.
func (c UpstreamTLSConfig) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("upstream tls: cert_file and key_file go together")
	}
	_, err := parseTLSVersion(c.MinVersion)
	return err
}

// ClientConfig builds the client tls.Config for upstream connections.
func (c UpstreamTLSConfig) ClientConfig() (*tls.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	minVersion, _ := parseTLSVersion(c.MinVersion)
	cfg := &tls.Config{
		MinVersion:         minVersion,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // explicit opt-in
	}
	if c.CAFile != "" {
		pool, err := loadCertPool(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		r := newReloader([]string{c.CertFile, c.KeyFile}, c.ReloadInterval, func() (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("upstream tls: loading %s and %s: %w", c.CertFile, c.KeyFile, err)
			}
			return &cert, nil
		})
		if err := r.reload(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.get(), nil }
	}
	return cfg, nil
}

func loadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: %s: no PEM certificates", path)
	}
	return pool, nil
}

// fileStamp identifies a version of a file.
type fileStamp struct {
	mod  time.Time
	size int64
}

func (a fileStamp) same(b fileStamp) bool { return a.mod.Equal(b.mod) && a.size == b.size }

func stampFiles(paths []string) ([]fileStamp, error) {
	out := make([]fileStamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return out, nil
}

// reloader holds a value loaded from files and reloads it when their
// modification times or sizes change.
type reloader[T any] struct {
	paths    []string
	interval time.Duration
	load     func() (T, error)
	now      func() time.Time
	cur      atomic.Pointer[loadedValue[T]]

	mu        sync.Mutex // serialises checks and reloads
	lastCheck time.Time
	err       error
}

type loadedValue[T any] struct {
	v      T
	stamps []fileStamp
}

func newReloader[T any](paths []string, interval time.Duration, load func() (T, error)) *reloader[T] {
	if interval == 0 {
		interval = DefaultReloadInterval
	}
	return &reloader[T]{paths: paths, interval: interval, load: load, now: time.Now}
}

// get returns the current value, first checking the files if the interval
// has passed (without waiting if another goroutine is checking).
func (r *reloader[T]) get() T {
	if r.interval >= 0 && r.mu.TryLock() {
		if now := r.now(); now.Sub(r.lastCheck) >= r.interval {
			r.lastCheck = now
			stamps, err := stampFiles(r.paths)
			if err != nil {
				r.err = err
			} else if !slices.EqualFunc(stamps, r.cur.Load().stamps, fileStamp.same) {
				r.err = r.reloadLocked()
			}
		}
		r.mu.Unlock()
	}
	return r.cur.Load().v
}

func (r *reloader[T]) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastCheck = r.now()
	r.err = r.reloadLocked()
	return r.err
}

// reloadLocked stats before reading, so a change during the read is seen
// again at the next check.
func (r *reloader[T]) reloadLocked() error {
	stamps, err := stampFiles(r.paths)
	if err != nil {
		return err
	}
	v, err := r.load()
	if err != nil {
		return err
	}
	r.cur.Store(&loadedValue[T]{v: v, stamps: stamps})
	return nil
}

func (r *reloader[T]) lastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
