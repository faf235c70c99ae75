package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// A server and a client certificate work in a real mutual-TLS handshake
// through the configs the package builds, and a certificate of another CA
// is refused.
func TestHandshake(t *testing.T) {
	t.Parallel()
	ca := NewCA(t, "test CA")
	srv := ca.Server(t, "server")
	cli := ca.Client(t, pkix.Name{CommonName: "alice"})
	if err := handshake(t, ca, srv, ca.ClientConfig(cli.TLS)); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	rogue := NewCA(t, "rogue CA").Client(t, pkix.Name{CommonName: "mallory"})
	if err := handshake(t, ca, srv, ca.ClientConfig(rogue.TLS)); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
	if err := handshake(t, ca, srv, NewCA(t, "other").ClientConfig(cli.TLS)); err == nil {
		t.Fatal("a server certificate of another CA was trusted")
	}
}

func handshake(t *testing.T, ca *CA, srv *Leaf, client *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sc := ca.ServerConfig(srv)
	sc.ClientAuth = tls.RequireAndVerifyClientCert
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		s := tls.Server(c, sc)
		err = s.Handshake()
		if err == nil {
			// TLS 1.3: the client's certificate is checked after the
			// client's handshake ends; a read brings the verdict.
			_, err = s.Write([]byte{1})
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	serr := <-done
	if err == nil {
		err = serr
	}
	return err
}

// Files hold what is in memory; SANs are the hosts given; a serial given
// is kept, others are distinct.
func TestLeaf(t *testing.T) {
	t.Parallel()
	ca := NewCA(t, "test CA")
	l := ca.Server(t, "broker", "broker.example", "10.0.0.1")
	if len(l.Cert.IPAddresses) != 1 || !l.Cert.IPAddresses[0].Equal(net.ParseIP("10.0.0.1")) ||
		len(l.Cert.DNSNames) != 1 || l.Cert.DNSNames[0] != "broker.example" {
		t.Fatalf("SANs %v %v", l.Cert.IPAddresses, l.Cert.DNSNames)
	}
	for path, want := range map[string][]byte{ca.CertFile: ca.CertPEM, l.CertFile: l.CertPEM, l.KeyFile: l.KeyPEM} {
		if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
			t.Errorf("%s: %v, content differs: %v", path, err, string(got) != string(want))
		}
	}
	if _, err := l.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool, DNSName: "broker.example"}); err != nil {
		t.Fatal(err)
	}
	fixed := ca.Issue(t, &x509.Certificate{SerialNumber: big.NewInt(100), Subject: pkix.Name{CommonName: "x"}})
	other := ca.Issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "y"}})
	if fixed.Cert.SerialNumber.Int64() != 100 || other.Cert.SerialNumber.Cmp(l.Cert.SerialNumber) == 0 {
		t.Fatalf("serials %v %v %v", fixed.Cert.SerialNumber, other.Cert.SerialNumber, l.Cert.SerialNumber)
	}
}
