package app

import (
	"cmp"
	"strings"

	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/devcluster"
	"github.com/tollgate/tollgate/internal/diskguard"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/usage"
)

// Config is the whole tollgate.yaml. Every key is documented in
// docs/config.md; a test keeps the two in step.
type Config struct {
	// Listeners clients connect to.
	Listeners []proxy.ListenerConfig `yaml:"listeners"`
	// Upstream is the real cluster. Empty bootstrap: the embedded
	// development cluster.
	Upstream UpstreamConfig `yaml:"upstream"`
	// DevCluster configures the embedded cluster.
	DevCluster devcluster.Config `yaml:"dev_cluster"`
	// HTTP is the admin port: health, metrics, the JSON API and the
	// dashboard (http.go).
	HTTP HTTPConfig `yaml:"http"`
	// Log configures logging.
	Log LogConfig `yaml:"log"`
	// Socket holds Kafka's socket settings.
	Socket SocketConfig `yaml:"socket"`
	// ShutdownTimeout bounds how long SIGTERM waits for in-flight requests.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// HandoverTimeout bounds how long a handover waits for the new
	// process to serve (handover.go).
	HandoverTimeout time.Duration `yaml:"handover_timeout"`
	// Quota holds the quota.* settings (restart to change).
	Quota QuotaSettings `yaml:"quota"`
	// Quotas are client quotas declared in the file; applied live when the
	// file changes or on SIGHUP.
	Quotas []QuotaEntry `yaml:"quotas"`
	// Tenants are tenants declared in the file (tenants.go); applied live
	// like Quotas, authoritative for their names.
	Tenants []TenantEntry `yaml:"tenants"`
	// BrokerConfigs are Kafka broker-level settings Tollgate owns, by
	// Kafka's names (max.connections, listener.name.<l>.max.connections,
	// max.connection.creation.rate, ...); applied live.
	BrokerConfigs map[string]string `yaml:"broker_configs"`
	// DataDir holds the durable store (tollgate.db) and, by default, the
	// audit log.
	DataDir string `yaml:"data_dir"`
	// Audit says where audit events go.
	Audit AuditConfig `yaml:"audit"`
	// Authorization says who may use the control plane.
	Authorization AuthorizationConfig `yaml:"authorization"`
	// Authentication bounds password guessing (security.go).
	Authentication AuthenticationConfig `yaml:"authentication"`
	// CredentialsFile holds SCRAM credentials and API keys for terminated
	// SASL logins (salted and hashed, never plaintext), in addition to
	// those kept in the store.
	CredentialsFile string `yaml:"credentials_file"`
	// Usage is the usage ledger (docs/usage.md).
	Usage usage.Config `yaml:"usage"`
	// Cluster makes instances one Tollgate cluster (cluster.go,
	// docs/cluster.md).
	Cluster ClusterConfig `yaml:"cluster"`
	// Telemetry is the clients' own metrics, KIP-714 (docs/telemetry.md).
	Telemetry telemetry.Config `yaml:"telemetry"`
	// Storage is the disk-full protection (docs/quotas.md).
	Storage diskguard.Config `yaml:"storage"`
}

// UpstreamConfig is the cluster Tollgate fronts.
type UpstreamConfig struct {
	Bootstrap   []string      `yaml:"bootstrap"`
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// RequestTimeout is how long a broker may take to answer a forwarded
	// request beyond what the request lets it wait (a Fetch's max wait, a
	// Produce's timeout); a broker that stalls longer closes the client's
	// connection, as the client's request.timeout.ms would (default 30s).
	RequestTimeout  time.Duration `yaml:"request_timeout"`
	MetadataRefresh time.Duration `yaml:"metadata_refresh"`
	// TLS makes every upstream connection use TLS.
	TLS *auth.UpstreamTLSConfig `yaml:"tls"`
	// SASL is Tollgate's own service identity towards the brokers: used
	// by its metadata client, and by every client connection of a
	// listener that terminates SASL (or has none).
	SASL *UpstreamSASL `yaml:"sasl"`
}

// UpstreamSASL is a SASL login towards the upstream brokers.
type UpstreamSASL struct {
	Mechanism string `yaml:"mechanism"` // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	Username  string `yaml:"username"`
	Password  string `yaml:"password"`
}

func (u *UpstreamSASL) mechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(u.Mechanism) {
	case "PLAIN":
		return plain.Auth{User: u.Username, Pass: u.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: u.Username, Pass: u.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: u.Username, Pass: u.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("upstream.sasl.mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", u.Mechanism)
}

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string `yaml:"format"` // text or json
	Level  string `yaml:"level"`  // debug, info, warn, error
}

// SocketConfig carries Kafka's socket.* settings.
type SocketConfig struct {
	RequestMaxBytes int32 `yaml:"request_max_bytes"`
	// QueuedMaxRequestBytes is Kafka's queued.max.request.bytes: the most
	// bytes of request frames all connections hold together; when it is
	// spent, connections are not read until memory returns (default
	// 256 MiB; negative: no bound; at least request_max_bytes + 4).
	QueuedMaxRequestBytes int64 `yaml:"queued_max_request_bytes"`
	// ResponseMaxBytes bounds an upstream response the gateway reads
	// whole (every response but a Fetch, which is streamed); a larger one
	// closes its connection (default 104857600).
	ResponseMaxBytes int32 `yaml:"response_max_bytes"`
	// SASLMaxReceiveSize is Kafka's sasl.server.max.receive.size: before a
	// SASL login completes, a larger frame closes the connection (default
	// 524288).
	SASLMaxReceiveSize int32 `yaml:"sasl_max_receive_size"`
	// ConnectionsMaxIdle is Kafka's connections.max.idle.ms: a client
	// connection that sends no request for this long is closed (default
	// 10m; negative: never).
	ConnectionsMaxIdle time.Duration `yaml:"connections_max_idle"`
	// HandshakeTimeout bounds the TLS handshake, the PROXY header and the
	// SASL login, from the moment a connection is accepted (default 10s).
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// MaxInFlight bounds pipelined requests per connection.
	MaxInFlight int `yaml:"max_in_flight"`
	// AcceptorProcess (default true; Linux) accepts on plain TCP listeners
	// in a helper process at the lowest CPU priority, which also closes the
	// sockets admission refuses: a connection storm's kernel work then
	// yields to the sessions being served. Admission decisions stay in the
	// gateway. Takes effect in `tollgate serve`.
	AcceptorProcess *bool `yaml:"acceptor_process"`
}

// UseAcceptorProcess reports socket.acceptor_process (default true).
func (c SocketConfig) UseAcceptorProcess() bool {
	return c.AcceptorProcess == nil || *c.AcceptorProcess
}

// Default returns the configuration used when no file is given, for
// local development: one PLAINTEXT listener on 127.0.0.1:9092 with brokers
// on 9100+N, the admin port on 127.0.0.1:9644, the embedded cluster, and
// ANONYMOUS as quota admin so that the tools (and the admin port) work
// without credentials.
func Default() Config {
	return Config{
		Listeners: []proxy.ListenerConfig{{
			Name: "PLAINTEXT", Bootstrap: "127.0.0.1:9092", BrokerPortBase: 9100,
		}},
		HTTP:          HTTPConfig{Address: "127.0.0.1:9644"},
		Authorization: AuthorizationConfig{QuotaAdmins: []string{"ANONYMOUS"}, AllowAnonymousDescribe: true},
	}
}

func (c *Config) setDefaults() {
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Socket.RequestMaxBytes == 0 {
		c.Socket.RequestMaxBytes = 104857600
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.HandoverTimeout == 0 {
		c.HandoverTimeout = DefaultHandoverTimeout
	}
}

// Validate checks the whole configuration offline.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.validateListeners()...)
	if err := c.DevCluster.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.HTTP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Audit.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Authentication.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateLogAndSocket()...)
	if c.Upstream.SASL != nil {
		if _, err := c.Upstream.SASL.mechanism(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Upstream.TLS != nil {
		if err := c.Upstream.TLS.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("shutdown_timeout must not be negative"))
	}
	if c.HandoverTimeout < 0 {
		errs = append(errs, errors.New("handover_timeout must not be negative"))
	}
	if _, err := buildQuotas(c.Quotas); err != nil {
		errs = append(errs, err)
	}
	if err := control.ValidateTenants(c.Tenants); err != nil {
		errs = append(errs, err)
	}
	if err := c.Storage.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Telemetry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Usage.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := admissionSettings(c, nil, nil); err != nil {
		errs = append(errs, err)
	}
	if ec, err := c.Quota.engineConfig(); err != nil {
		errs = append(errs, err)
	} else if _, err := quota.NewEngine(ec); err != nil {
		errs = append(errs, fmt.Errorf("quota: %w", err))
	}
	return errors.Join(errs...)
}

// validateListeners checks the listeners: at least one, each valid, no
// name twice.
func (c *Config) validateListeners() []error {
	var errs []error
	if len(c.Listeners) == 0 {
		errs = append(errs, errors.New("listeners: at least one listener is required"))
	}
	seen := map[string]bool{}
	for i := range c.Listeners {
		if err := c.Listeners[i].Validate(); err != nil {
			errs = append(errs, err)
		}
		if n := c.Listeners[i].Name; seen[n] {
			errs = append(errs, fmt.Errorf("listener %s is defined twice", n))
		} else {
			seen[n] = true
		}
	}
	return errs
}

// validateLogAndSocket checks the log and socket sections.
func (c *Config) validateLogAndSocket() []error {
	var errs []error
	switch c.Log.Format {
	case "", "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format %q: want text or json", c.Log.Format))
	}
	if c.Log.Level != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(c.Log.Level)); err != nil {
			errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Log.Level))
		}
	}
	if q, m := c.Socket.QueuedMaxRequestBytes, cmp.Or(c.Socket.RequestMaxBytes, 104857600); q > 0 && q < int64(m)+4 {
		errs = append(errs, fmt.Errorf("socket.queued_max_request_bytes %d is smaller than a frame of socket.request_max_bytes (%d + 4): such a frame could never be read", q, m))
	}
	if c.Socket.RequestMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("socket.request_max_bytes %d must be positive", c.Socket.RequestMaxBytes))
	}
	if c.Socket.ResponseMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("socket.response_max_bytes %d must be positive", c.Socket.ResponseMaxBytes))
	}
	if c.Socket.SASLMaxReceiveSize < 0 {
		errs = append(errs, fmt.Errorf("socket.sasl_max_receive_size %d must be positive", c.Socket.SASLMaxReceiveSize))
	}
	if c.Socket.HandshakeTimeout < 0 {
		errs = append(errs, errors.New("socket.handshake_timeout must not be negative"))
	}
	if c.Socket.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("socket.max_in_flight %d must be positive", c.Socket.MaxInFlight))
	}
	return errs
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// Load reads and validates a YAML config file. Unknown keys are errors
// that name the file and line.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse reads a YAML config; name is used in error messages.
func Parse(name string, r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, err
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := yamlLine.ReplaceAllString(err.Error(), name+":$1: ")
		return Config{}, errors.New(msg)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	c.setDefaults()
	return c, nil
}
