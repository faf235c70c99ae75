// Package clientconf reads Kafka client properties files (--command-config:
// security.protocol, sasl.mechanism, sasl.jaas.config, ssl.* as PEM,
// client.id, request.timeout.ms) into franz-go options, for every
// client-side command (configs, quotas, perf). It must not import proxy or app.
package clientconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is what a Kafka client properties file (--command-config)
// says about how to connect. Only what an admin client needs is understood;
// other properties are ignored, as Kafka's clients ignore unknown ones.
type Config struct {
	Bootstrap []string
	ClientID  string
	Timeout   time.Duration // request.timeout.ms; 0 is the default

	Protocol  string // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	Mechanism string // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	User      string
	Password  string
	TLS       *tls.Config
}

// New interprets --bootstrap-server and the properties of
// --command-config (nil when none was given).
func New(bootstrap string, props map[string]string, defaultClientID string) (*Config, error) {
	c := &Config{ClientID: defaultClientID, Protocol: "PLAINTEXT"}
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Bootstrap = append(c.Bootstrap, s)
		}
	}
	if len(c.Bootstrap) == 0 {
		return nil, errors.New("no bootstrap server given")
	}
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	if v := get("client.id"); v != "" {
		c.ClientID = v
	}
	if v := get("request.timeout.ms"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("request.timeout.ms: invalid value %q", v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if v := get("security.protocol"); v != "" {
		c.Protocol = strings.ToUpper(v)
	}
	switch c.Protocol {
	case "PLAINTEXT":
	case "SSL", "SASL_SSL", "SASL_PLAINTEXT":
	default:
		return nil, fmt.Errorf("security.protocol: invalid value %q: must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", props["security.protocol"])
	}
	if strings.HasPrefix(c.Protocol, "SASL_") {
		if err := c.loadSASL(get); err != nil {
			return nil, err
		}
	}
	if strings.HasSuffix(c.Protocol, "SSL") {
		t, err := loadTLS(props)
		if err != nil {
			return nil, err
		}
		c.TLS = t
	}
	return c, nil
}

func (c *Config) loadSASL(get func(string) string) error {
	c.Mechanism = strings.ToUpper(get("sasl.mechanism"))
	switch c.Mechanism {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	case "":
		return fmt.Errorf("sasl.mechanism is not set: Kafka's default is GSSAPI, which tollgate does not support; set sasl.mechanism to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	default:
		return fmt.Errorf("sasl.mechanism %s is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.Mechanism)
	}
	jaas := get("sasl.jaas.config")
	if jaas == "" {
		return fmt.Errorf("sasl.jaas.config must be set for security.protocol=%s (JAAS files given with java.security.auth.login.config are not read)", c.Protocol)
	}
	opts, err := parseJAAS(jaas)
	if err != nil {
		return fmt.Errorf("sasl.jaas.config: %w", err)
	}
	var ok bool
	if c.User, ok = opts["username"]; !ok {
		return errors.New(`sasl.jaas.config: no username="..." option`)
	}
	if c.Password, ok = opts["password"]; !ok {
		return errors.New(`sasl.jaas.config: no password="..." option`)
	}
	return nil
}

// parseJAAS reads the options of a one-module JAAS line such as
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="secret";
//
// Values may be quoted (with \" and \\ escapes) or bare.
func parseJAAS(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(s, ";")
	fields, err := jaasTokens(s)
	if err != nil {
		return nil, err
	}
	if len(fields) < 2 {
		return nil, errors.New("expected: LoginModuleClass required|requisite|sufficient|optional key=\"value\" ...;")
	}
	switch strings.ToLower(fields[1]) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("invalid control flag %q after the login module class", fields[1])
	}
	opts := map[string]string{}
	for _, f := range fields[2:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid option %q: expected key=\"value\"", f)
		}
		opts[k] = v
	}
	return opts, nil
}

// jaasTokens splits on whitespace outside double quotes and removes the
// quotes (keeping what they enclose, with \" and \\ unescaped).
func jaasTokens(s string) ([]string, error) {
	var (
		out     []string
		cur     strings.Builder
		inQuote bool
		started bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQuote = !inQuote
			started = true
		case !inQuote && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteByte(c)
			started = true
		}
	}
	if inQuote {
		return nil, errors.New("unterminated quoted value")
	}
	if started {
		out = append(out, cur.String())
	}
	return out, nil
}

// loadTLS builds the TLS configuration from the ssl.* properties, PEM only:
// ssl.truststore.location (or inline ssl.truststore.certificates) is the CA
// bundle, otherwise the system roots are used; ssl.keystore.location (or
// inline ssl.keystore.certificate.chain and ssl.keystore.key) is the client
// certificate chain, with its private key either in the same file or in
// ssl.key.location; an empty ssl.endpoint.identification.algorithm keeps
// verifying the chain but not the host name, as in Kafka.
func loadTLS(props map[string]string) (*tls.Config, error) {
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t := strings.ToUpper(get(k)); t != "" && t != "PEM" {
			return nil, fmt.Errorf("%s %s is not supported: tollgate reads PEM files only (convert with keytool/openssl and set %s=PEM)", k, t, k)
		}
	}
	if get("ssl.key.password") != "" {
		return nil, errors.New("ssl.key.password is not supported: give an unencrypted PEM private key")
	}

	var caPEM []byte
	switch loc, inline := get("ssl.truststore.location"), get("ssl.truststore.certificates"); {
	case loc != "":
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		caPEM = b
	case inline != "":
		caPEM = []byte(inline)
	}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("ssl.truststore: no PEM certificate found (JKS and PKCS12 truststores are not supported; set ssl.truststore.type=PEM)")
		}
		cfg.RootCAs = pool
	}

	var certPEM, keyPEM []byte
	switch loc, inline := get("ssl.keystore.location"), get("ssl.keystore.certificate.chain"); {
	case loc != "":
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		certPEM = b
	case inline != "":
		certPEM = []byte(inline)
	}
	switch loc, inline := get("ssl.key.location"), get("ssl.keystore.key"); {
	case loc != "":
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.key.location: %w", err)
		}
		keyPEM = b
	case inline != "":
		keyPEM = []byte(inline)
	default:
		keyPEM = certPEM // a PEM keystore holds the key and the chain
	}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(onlyBlocks(certPEM, "CERTIFICATE"), keyPEM)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}

	if alg, set := props["ssl.endpoint.identification.algorithm"]; set && strings.TrimSpace(alg) == "" {
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true // the chain is verified below, the host name is not
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// onlyBlocks keeps the PEM blocks of one type (a PEM keystore mixes the key
// and the chain; tls.X509KeyPair wants them apart).
func onlyBlocks(b []byte, typ string) []byte {
	var out []byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type == typ {
			out = append(out, pem.EncodeToMemory(blk)...)
		}
	}
}

// Opts are the franz-go options for a client of this configuration.
func (c *Config) Opts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap...),
		kgo.ClientID(c.ClientID),
	}
	if c.Timeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(c.Timeout))
	}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS))
	}
	switch c.Mechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: c.User, Pass: c.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.User, Pass: c.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.User, Pass: c.Password}.AsSha512Mechanism()))
	}
	return opts
}

// known are the properties New understands.
var known = map[string]bool{
	"security.protocol": true, "sasl.mechanism": true, "sasl.jaas.config": true,
	"ssl.truststore.location": true, "ssl.truststore.type": true, "ssl.truststore.certificates": true,
	"ssl.keystore.location": true, "ssl.keystore.type": true, "ssl.keystore.certificate.chain": true,
	"ssl.keystore.key": true, "ssl.key.location": true, "ssl.key.password": true,
	"ssl.endpoint.identification.algorithm": true, "client.id": true, "request.timeout.ms": true,
}

// Unknown lists, sorted, the properties New does not use (Kafka's
// clients ignore unknown properties too; a command may say so).
func Unknown(props map[string]string) []string {
	var out []string
	for k := range props {
		if !known[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
