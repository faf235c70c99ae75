package doctor

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// CertWarning is how close to its expiry a certificate gets a warning.
const CertWarning = 14 * 24 * time.Hour

// tlsFiles: one result per TLS configuration (or one saying there is none).
func (r *runner) tlsFiles() []Result {
	if len(r.t.TLS) == 0 {
		return []Result{{Check: "tls", Detail: "no TLS configured"}}
	}
	out := make([]Result, len(r.t.TLS))
	for i, f := range r.t.TLS {
		out[i] = r.tlsCheck(f)
	}
	return out
}

// tlsCheck: the certificate and key load and match, every certificate is
// valid now and for CertWarning more, the leaf covers the advertised hosts,
// and the CA bundle holds certificates.
func (r *runner) tlsCheck(f TLSFiles) Result {
	res := Result{Check: "tls " + f.Name}
	now := r.t.Now()
	var notes, fixes []string
	status := OK
	raise := func(s Status, note, fix string) {
		status = max(status, s)
		notes = append(notes, note)
		if !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	const renew = "renew the certificate and replace the files (Tollgate reloads them without a restart)"
	judge := func(what string, c *x509.Certificate) {
		switch left := c.NotAfter.Sub(now); {
		case now.Before(c.NotBefore):
			raise(Fail, fmt.Sprintf("%s is not valid before %s", what, c.NotBefore.UTC().Format(time.RFC3339)), "check this host's clock, or use a certificate valid now")
		case left <= 0:
			raise(Fail, fmt.Sprintf("%s expired %s", what, c.NotAfter.UTC().Format(time.RFC3339)), renew)
		case left < CertWarning:
			raise(Warn, fmt.Sprintf("%s expires in %s (%s)", what, days(left), c.NotAfter.UTC().Format(time.RFC3339)), renew)
		}
	}
	if f.CertFile != "" || f.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			res.Status, res.Detail = Fail, err.Error()
			res.Fix = "point cert_file at a PEM certificate chain and key_file at its PEM private key, readable by the service's user"
			return res
		}
		for i, der := range pair.Certificate {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				raise(Fail, fmt.Sprintf("%s: certificate %d: %v", f.CertFile, i, err), "replace the certificate file")
				continue
			}
			what := "certificate " + subject(c)
			if i > 0 {
				what = "intermediate " + subject(c)
			}
			judge(what, c)
			if i == 0 {
				for _, h := range f.Hosts {
					if err := c.VerifyHostname(h); err != nil {
						raise(Warn, fmt.Sprintf("%s does not cover %s, the host clients are given", what, h), "add the advertised host to the certificate's subject alternative names, or advertise a name it covers")
					}
				}
				notes = append(notes, fmt.Sprintf("%s valid until %s", what, c.NotAfter.UTC().Format(time.DateOnly)))
			}
		}
	}
	if f.CAFile != "" {
		cas, err := readCerts(f.CAFile)
		switch {
		case err != nil:
			raise(Fail, err.Error(), "point the CA file at a PEM bundle of certificates")
		default:
			valid := 0
			for _, c := range cas {
				if now.Before(c.NotAfter) {
					valid++
				}
				judge("CA "+subject(c), c)
			}
			if valid == 0 {
				status = Fail
			}
			notes = append(notes, fmt.Sprintf("%s: %d CA certificates", f.CAFile, len(cas)))
		}
	}
	res.Status = status
	res.Detail = strings.Join(notes, "; ")
	res.Fix = strings.Join(fixes, "; ")
	return res
}

func readCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificates", path)
	}
	return out, nil
}

func subject(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return "CN=" + c.Subject.CommonName
	}
	return c.Subject.String()
}

func days(d time.Duration) string {
	day := 24 * time.Hour
	if d < day {
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%d days %d hours", int(d/day), int(d%day/time.Hour))
}
