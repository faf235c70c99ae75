package perf

// A small reader for Kafka client properties files (--command-config), so
// that perf does not depend on internal/cli. internal/cli has an equivalent
// parser for `tollgate configs`; the two read the same keys and should be
// merged into one package.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// knownProps are the keys clientProps understands; others are reported and
// ignored.
var knownProps = map[string]bool{
	"security.protocol":                     true,
	"sasl.mechanism":                        true,
	"sasl.jaas.config":                      true,
	"ssl.truststore.location":               true,
	"ssl.truststore.type":                   true,
	"ssl.truststore.certificates":           true,
	"ssl.keystore.location":                 true,
	"ssl.keystore.type":                     true,
	"ssl.keystore.certificate.chain":        true,
	"ssl.keystore.key":                      true,
	"ssl.key.password":                      true,
	"ssl.endpoint.identification.algorithm": true,
	"client.id":                             true,
}

// readProps reads a java.util.Properties file.
func readProps(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := parseProperties(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// parseProperties parses the java.util.Properties text format: lines
// starting with '#' or '!' are comments; a key ends at the first unescaped
// '=', ':' or whitespace; a line ending in an odd number of backslashes
// continues on the next line (its leading whitespace dropped); \t \n \r \f
// and \uXXXX are escapes, any other escaped character stands for itself.
func parseProperties(text string) (map[string]string, error) {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(text, "\n")
	out := map[string]string{}
	for i := 0; i < len(lines); i++ {
		first := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for endsContinued(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsContinued(line) { // continuation on the last line
			line = line[:len(line)-1]
		}
		rawKey, rawVal := splitKeyValue(line)
		k, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", first, err)
		}
		v, err := unescape(rawVal)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", first, err)
		}
		out[k] = v
	}
	return out, nil
}

func endsContinued(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitKeyValue(line string) (string, string) {
	end := len(line)
scan:
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '=', ':', ' ', '\t', '\f':
			end = i
			break scan
		}
	}
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return line[:end], rest
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", errors.New(`malformed \uxxxx encoding`)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", errors.New(`malformed \uxxxx encoding`)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// jaasOptions returns the options of a sasl.jaas.config value:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
func jaasOptions(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return nil, errors.New("want `<LoginModule> <flag> key=\"value\" ...;`")
	}
	switch strings.ToLower(fields[1]) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("login module flag %q: want required, requisite, sufficient or optional", fields[1])
	}
	// Skip the module name and the flag, then read key=value pairs; values
	// may be quoted with backslash escapes.
	rest := strings.TrimSpace(s)
	for range 2 {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if i := strings.IndexAny(rest, " \t\r\n"); i >= 0 {
			rest = rest[i:]
		} else {
			rest = ""
		}
	}
	opts := map[string]string{}
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			return opts, nil
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("expected key=value at %q", rest)
		}
		key := strings.TrimSpace(rest[:eq])
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			if i == len(rest) {
				return nil, fmt.Errorf("unterminated quote in the value of %s", key)
			}
			val, rest = b.String(), rest[i+1:]
		} else {
			end := strings.IndexAny(rest, " \t\r\n")
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		opts[key] = val
	}
}

// clientSettings is what a properties file configures.
type clientSettings struct {
	opts     []kgo.Opt
	clientID string   // client.id, "" when unset
	protocol string   // security.protocol, upper case, PLAINTEXT when unset
	ignored  []string // keys perf does not use
}

// clientProps turns Kafka client properties into kgo options.
func clientProps(props map[string]string) (clientSettings, error) {
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	var cs clientSettings
	for k := range props {
		if !knownProps[k] {
			cs.ignored = append(cs.ignored, k)
		}
	}
	cs.clientID = get("client.id")

	proto := strings.ToUpper(get("security.protocol"))
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch proto {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return cs, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if useSASL {
		mech := strings.ToUpper(get("sasl.mechanism"))
		if mech == "" {
			return cs, errors.New("sasl.mechanism is not set (Kafka's default, GSSAPI, is not supported): use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		jaas := get("sasl.jaas.config")
		if jaas == "" {
			return cs, fmt.Errorf("sasl.jaas.config is required with security.protocol=%s", proto)
		}
		o, err := jaasOptions(jaas)
		if err != nil {
			return cs, fmt.Errorf("sasl.jaas.config: %w", err)
		}
		user, ok := o["username"]
		if !ok {
			return cs, errors.New(`sasl.jaas.config: no username="..." option`)
		}
		pass, ok := o["password"]
		if !ok {
			return cs, errors.New(`sasl.jaas.config: no password="..." option`)
		}
		switch mech {
		case "PLAIN":
			cs.opts = append(cs.opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "SCRAM-SHA-256":
			cs.opts = append(cs.opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			cs.opts = append(cs.opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return cs, fmt.Errorf("sasl.mechanism %s is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
		}
	}
	if useTLS {
		cfg, err := tlsConfig(get, props)
		if err != nil {
			return cs, err
		}
		cs.opts = append(cs.opts, kgo.DialTLSConfig(cfg))
	}
	cs.protocol = proto
	return cs, nil
}

// tlsConfig reads the ssl.* properties, PEM only.
func tlsConfig(get func(string) string, props map[string]string) (*tls.Config, error) {
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t := get(k); t != "" && !strings.EqualFold(t, "PEM") {
			return nil, fmt.Errorf("%s=%s is not supported: only PEM", k, t)
		}
	}
	if get("ssl.key.password") != "" {
		return nil, errors.New("ssl.key.password is not supported: use an unencrypted PEM private key")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}

	var caPEM []byte
	if loc := get("ssl.truststore.location"); loc != "" {
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		caPEM = b
	} else if inline := get("ssl.truststore.certificates"); inline != "" {
		caPEM = []byte(inline)
	}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("ssl.truststore: no PEM certificate found (JKS and PKCS12 are not supported)")
		}
		cfg.RootCAs = pool
	}

	var certPEM, keyPEM []byte
	if loc := get("ssl.keystore.location"); loc != "" {
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		certPEM, keyPEM = b, b // Kafka's PEM keystore holds the key and the chain
	} else if chain := get("ssl.keystore.certificate.chain"); chain != "" {
		certPEM, keyPEM = []byte(chain), []byte(get("ssl.keystore.key"))
	}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(pemBlocks(certPEM, "CERTIFICATE"), pemBlocks(keyPEM, "PRIVATE KEY"))
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}

	// An empty ssl.endpoint.identification.algorithm turns off host name
	// verification; the chain is still verified.
	if alg, set := props["ssl.endpoint.identification.algorithm"]; set && strings.TrimSpace(alg) == "" {
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
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

// pemBlocks keeps the PEM blocks whose type ends with suffix, so that one
// file can hold both the key and the chain.
func pemBlocks(data []byte, suffix string) []byte {
	var out []byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if strings.HasSuffix(b.Type, suffix) {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
}
