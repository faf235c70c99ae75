// Package testpki makes throwaway certificate authorities and the
// certificates they sign, for tests: in memory, as PEM, as files in the
// test's temporary directory and as tls.Config values.
//
// It imports only the standard library, so that tests of any package
// (internal/auth's own, which internal/testkit cannot serve without an
// import cycle) can use it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// serial numbers every certificate made here, so that no two certificates
// of a test binary share one (tests run in parallel).
var serial atomic.Int64

// CA is a self-signed certificate authority.
type CA struct {
	Cert     *x509.Certificate
	CertPEM  []byte
	CertFile string // CertPEM, written in Dir
	Pool     *x509.CertPool
	// Dir is the temporary directory (removed when the test ends) that
	// holds CertFile and the files of every certificate the CA issues.
	Dir string
	key *ecdsa.PrivateKey
}

// Leaf is a certificate a CA signed, with its key.
type Leaf struct {
	Cert              *x509.Certificate
	TLS               tls.Certificate
	CertPEM, KeyPEM   []byte // the key as PKCS #8 "PRIVATE KEY"
	CertFile, KeyFile string // CertPEM and KeyPEM, written in the CA's Dir
}

// NewCA makes a CA named name (its subject's common name), valid from an
// hour ago for a day, its files in a temporary directory of the test's.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCAIn(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// NewCAIn is NewCA for what outlives one test (the real Kafka cluster a
// test binary shares): its files go to dir, which the caller removes.
func NewCAIn(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: cert, CertPEM: pemOf("CERTIFICATE", der), Pool: x509.NewCertPool(), Dir: dir, key: key}
	ca.Pool.AddCert(cert)
	if ca.CertFile, err = writeFile(ca.Dir, "ca.pem", ca.CertPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs tmpl, which sets the subject (Subject or RawSubject) and the
// SANs it needs. What it leaves unset is filled in: a serial number of its
// own, validity from an hour ago for a day, digital-signature key usage,
// and both server and client extended key usage.
func (ca *CA) Issue(t testing.TB, tmpl *x509.Certificate) *Leaf {
	t.Helper()
	l, err := ca.IssueErr(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// IssueErr is Issue for a CA made with NewCAIn: it returns its error.
func (ca *CA) IssueErr(tmpl *x509.Certificate) (*Leaf, error) {
	c := *tmpl
	now := time.Now()
	if c.SerialNumber == nil {
		c.SerialNumber = big.NewInt(serial.Add(1))
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = now.Add(-time.Hour)
	}
	if c.NotAfter.IsZero() {
		c.NotAfter = now.Add(24 * time.Hour)
	}
	if c.KeyUsage == 0 {
		c.KeyUsage = x509.KeyUsageDigitalSignature
	}
	if c.ExtKeyUsage == nil {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, &c, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	l := &Leaf{CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("PRIVATE KEY", kder)}
	if l.Cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		return nil, err
	}
	// Named by serial: a CA's serials are its own, so the names are too.
	base := "leaf-" + c.SerialNumber.String()
	if l.CertFile, err = writeFile(ca.Dir, base+".pem", l.CertPEM); err != nil {
		return nil, err
	}
	if l.KeyFile, err = writeFile(ca.Dir, base+".key", l.KeyPEM); err != nil {
		return nil, err
	}
	return l, nil
}

// ServerTemplate is the template Server signs: common name cn, server
// extended key usage, and SANs hosts (IP addresses or DNS names), or
// 127.0.0.1 and localhost when none are given.
func ServerTemplate(cn string, hosts ...string) *x509.Certificate {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl
}

// Server issues a server certificate for hosts (see ServerTemplate).
func (ca *CA) Server(t testing.TB, cn string, hosts ...string) *Leaf {
	t.Helper()
	return ca.Issue(t, ServerTemplate(cn, hosts...))
}

// Client issues a client certificate for subject, with no SANs.
func (ca *CA) Client(t testing.TB, subject pkix.Name) *Leaf {
	t.Helper()
	return ca.Issue(t, &x509.Certificate{Subject: subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// ClientConfig trusts the CA and presents certs (none: no client
// certificate), TLS 1.2 at least.
func (ca *CA) ClientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, Certificates: certs, MinVersion: tls.VersionTLS12}
}

// ServerConfig serves leaf and verifies client certificates against the CA
// when the caller sets ClientAuth.
func (ca *CA) ServerConfig(leaf *Leaf) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, ClientCAs: ca.Pool}
}

// WriteFile writes data to dir/name (private to the user) and returns the
// path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p, err := writeFile(dir, name, data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(dir, name string, data []byte) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, data, 0o600)
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
