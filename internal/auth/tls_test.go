package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

func TestTLSConfigValidate(t *testing.T) {
	ok := TLSConfig{CertFile: "c", KeyFile: "k"}
	for _, tt := range []struct {
		name string
		cfg  TLSConfig
		err  string
	}{
		{"minimal", ok, ""},
		{"tls1.3", TLSConfig{CertFile: "c", KeyFile: "k", MinVersion: "TLS1.3"}, ""},
		{"kafka spelling", TLSConfig{CertFile: "c", KeyFile: "k", MinVersion: "TLSv1.2"}, ""},
		{"required", TLSConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: "required"}, ""},
		{"requested", TLSConfig{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: "requested"}, ""},
		{"no cert", TLSConfig{KeyFile: "k"}, "cert_file and key_file"},
		{"no key", TLSConfig{CertFile: "c"}, "cert_file and key_file"},
		{"required without CA", TLSConfig{CertFile: "c", KeyFile: "k", ClientAuth: "required"}, "needs client_ca_file"},
		{"bad client auth", TLSConfig{CertFile: "c", KeyFile: "k", ClientAuth: "maybe"}, "client_auth"},
		{"tls1.1", TLSConfig{CertFile: "c", KeyFile: "k", MinVersion: "TLS1.1"}, "min_version"},
	} {
		err := tt.cfg.Validate()
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
		}
	}
	for _, tt := range []struct {
		cfg UpstreamTLSConfig
		ok  bool
	}{
		{UpstreamTLSConfig{}, true},
		{UpstreamTLSConfig{CertFile: "c", KeyFile: "k", MinVersion: "TLS1.3"}, true},
		{UpstreamTLSConfig{CertFile: "c"}, false},
		{UpstreamTLSConfig{MinVersion: "SSL3"}, false},
	} {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: %v", tt.cfg, err)
		}
	}
}

// handshake runs a TLS handshake over a pipe and returns both sides'
// connection states.
func handshake(t *testing.T, server, client *tls.Config) (srv, cli tls.ConnectionState, err error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	_ = b.SetDeadline(time.Now().Add(10 * time.Second))
	s := tls.Server(a, server)
	errc := make(chan error, 1)
	go func() {
		err := s.Handshake()
		if err != nil {
			a.Close()
		}
		errc <- err
	}()
	c := tls.Client(b, client)
	cerr := c.Handshake()
	if cerr != nil {
		b.Close()
	} else {
		// In TLS 1.3 the client is done before the server has checked
		// its certificate; read so that a rejecting server's alert is
		// consumed instead of blocking the pipe.
		cli = c.ConnectionState()
		go func() { _, _ = c.Read(make([]byte, 1)) }()
	}
	serr := <-errc
	if cerr != nil || serr != nil {
		return tls.ConnectionState{}, tls.ConnectionState{}, errors.Join(cerr, serr)
	}
	return s.ConnectionState(), cli, nil
}

type tlsFiles struct {
	dir, cert, key, ca string
	ca1                *testpki.CA
}

// localhostCert is a server certificate for localhost and 127.0.0.1 with
// the given serial (the reload tests tell certificates apart by it).
func localhostCert(t *testing.T, ca *testpki.CA, serial int64) *testpki.Leaf {
	tmpl := testpki.ServerTemplate("localhost")
	tmpl.SerialNumber = big.NewInt(serial)
	return ca.Issue(t, tmpl)
}

func newTLSFiles(t *testing.T) *tlsFiles {
	ca := testpki.NewCA(t, "Tollgate Test CA")
	dir := t.TempDir()
	srv := localhostCert(t, ca, 100)
	return &tlsFiles{
		dir:  dir,
		cert: testpki.WriteFile(t, dir, "server.pem", srv.CertPEM),
		key:  testpki.WriteFile(t, dir, "server.key", srv.KeyPEM),
		ca:   ca.CertFile,
		ca1:  ca,
	}
}

// rewrite replaces the server certificate and key and moves their mtimes
// forward so the change is seen whatever the file system's granularity.
func (f *tlsFiles) rewrite(t *testing.T, serial int64, when time.Time) {
	srv := localhostCert(t, f.ca1, serial)
	testpki.WriteFile(t, f.dir, "server.pem", srv.CertPEM)
	testpki.WriteFile(t, f.dir, "server.key", srv.KeyPEM)
	for _, p := range []string{f.cert, f.key} {
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
}

func servedSerial(t *testing.T, s *ServerTLS) int64 {
	t.Helper()
	c, err := s.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.SerialNumber.Int64()
}

func TestServerTLSReload(t *testing.T) {
	f := newTLSFiles(t)
	s, err := NewServerTLS(TLSConfig{CertFile: f.cert, KeyFile: f.key, ReloadInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.r.now = func() time.Time { return now }
	if got := servedSerial(t, s); got != 100 {
		t.Fatalf("serial %d", got)
	}

	// Changed files are not looked at before the interval has passed.
	f.rewrite(t, 101, now.Add(time.Minute))
	if got := servedSerial(t, s); got != 100 {
		t.Fatalf("reloaded before the interval: %d", got)
	}
	now = now.Add(time.Hour)
	if got := servedSerial(t, s); got != 101 {
		t.Fatalf("after the interval: serial %d, want 101", got)
	}

	// A real handshake sees the new certificate too.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.ca1.CertPEM)
	_, cli, err := handshake(t, s.Config(), &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cli.PeerCertificates[0].SerialNumber.Int64(); got != 101 {
		t.Fatalf("handshake served serial %d", got)
	}

	// Explicit Reload, no waiting.
	f.rewrite(t, 102, now.Add(2*time.Minute))
	if err := s.Reload(); err != nil || servedSerial(t, s) != 102 {
		t.Fatalf("Reload: %v, serial %d", err, servedSerial(t, s))
	}

	// A broken file keeps the old certificate and reports the error.
	testpki.WriteFile(t, f.dir, "server.key", []byte("not a key"))
	_ = os.Chtimes(f.key, now.Add(3*time.Minute), now.Add(3*time.Minute))
	now = now.Add(2 * time.Hour)
	if got := servedSerial(t, s); got != 102 {
		t.Fatalf("broken key: serial %d", got)
	}
	if s.LastReloadError() == nil {
		t.Fatal("no reload error reported")
	}
	if err := s.Reload(); err == nil {
		t.Fatal("Reload of a broken key succeeded")
	}
	// Fixed: picked up at the next check.
	f.rewrite(t, 103, now.Add(time.Minute))
	now = now.Add(2 * time.Hour)
	if got := servedSerial(t, s); got != 103 || s.LastReloadError() != nil {
		t.Fatalf("after fix: serial %d, err %v", got, s.LastReloadError())
	}
}

func TestServerTLSNoAutoReload(t *testing.T) {
	f := newTLSFiles(t)
	s, err := NewServerTLS(TLSConfig{CertFile: f.cert, KeyFile: f.key, ReloadInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.rewrite(t, 101, time.Now().Add(time.Hour))
	if got := servedSerial(t, s); got != 100 {
		t.Fatalf("reloaded with a negative interval: %d", got)
	}
	if err := s.Reload(); err != nil || servedSerial(t, s) != 101 {
		t.Fatalf("Reload: %v", err)
	}
}

func TestServerTLSLoadErrors(t *testing.T) {
	f := newTLSFiles(t)
	for _, cfg := range []TLSConfig{
		{CertFile: f.cert + ".missing", KeyFile: f.key},
		{CertFile: f.cert, KeyFile: f.cert},
		{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.key, ClientAuth: "required"}, // no certificates in it
		{CertFile: f.cert, KeyFile: f.key, ClientAuth: "required"},                      // invalid config
	} {
		if _, err := NewServerTLS(cfg); err == nil {
			t.Errorf("NewServerTLS(%+v) succeeded", cfg)
		}
	}
}

// mTLS end to end: the upstream client config presents a client
// certificate; the server requires and verifies it; the mapper turns it
// into a principal. Min version TLS1.3 is enforced.
func TestMutualTLS(t *testing.T) {
	f := newTLSFiles(t)
	client := f.ca1.Client(t, pkix.Name{CommonName: "svc-a", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}})
	cc, ck := client.CertFile, client.KeyFile
	srv, err := NewServerTLS(TLSConfig{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca, ClientAuth: "required", MinVersion: "TLS1.3"})
	if err != nil {
		t.Fatal(err)
	}
	withCert, err := UpstreamTLSConfig{CAFile: f.ca, CertFile: cc, KeyFile: ck, ServerName: "localhost"}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	st, cli, err := handshake(t, srv.Config(), withCert)
	if err != nil {
		t.Fatal(err)
	}
	if cli.Version != tls.VersionTLS13 {
		t.Fatalf("version %x", cli.Version)
	}
	m, _ := ParseMappingRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT")
	if p, err := m.PrincipalFromTLS(st); err != nil || p.Name != "svc-a" {
		t.Fatalf("principal %v, %v", p, err)
	}

	// No client certificate: refused when required.
	noCert, _ := UpstreamTLSConfig{CAFile: f.ca, ServerName: "localhost"}.ClientConfig()
	if _, _, err := handshake(t, srv.Config(), noCert); err == nil {
		t.Fatal("handshake without a client certificate succeeded")
	}
	// ... accepted when requested, as ANONYMOUS.
	req, err := NewServerTLS(TLSConfig{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca, ClientAuth: "requested"})
	if err != nil {
		t.Fatal(err)
	}
	st, _, err = handshake(t, req.Config(), noCert)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := m.PrincipalFromTLS(st); p.Name != "ANONYMOUS" {
		t.Fatalf("principal %v", p)
	}
	// A client limited to TLS 1.2 is refused by a TLS1.3 listener.
	old := noCert.Clone()
	old.MaxVersion = tls.VersionTLS12
	if _, _, err := handshake(t, srv.Config(), old); err == nil {
		t.Fatal("TLS 1.2 accepted by a TLS1.3 listener")
	}
	// An untrusted server is refused by the upstream config.
	otherCA := testpki.NewCA(t, "Other CA").CertFile
	untrusting, _ := UpstreamTLSConfig{CAFile: otherCA, ServerName: "localhost"}.ClientConfig()
	if _, _, err := handshake(t, req.Config(), untrusting); err == nil {
		t.Fatal("untrusted server accepted")
	}
	if _, err := (UpstreamTLSConfig{CAFile: f.key}).ClientConfig(); err == nil {
		t.Fatal("CA file without certificates accepted")
	}
	if _, err := (UpstreamTLSConfig{CertFile: cc, KeyFile: f.key}).ClientConfig(); err == nil {
		t.Fatal("mismatched client key accepted")
	}
}
