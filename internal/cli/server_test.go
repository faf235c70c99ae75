package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateLikeKafka makes the embedded cluster reject invalid quota values
// as Kafka's ClientQuotaControlManager does (kfake stores anything):
// INVALID_REQUEST with Kafka's message. It is meant for one-entity
// requests: a request with an invalid entry is not applied at all.
func validateLikeKafka(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.AlterClientQuotas), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.AlterClientQuotasRequest)
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		bad := false
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			for _, c := range e.Entity {
				ce := kmsg.NewAlterClientQuotasResponseEntryEntity()
				ce.Type, ce.Name = c.Type, c.Name
				re.Entity = append(re.Entity, ce)
			}
			if msg := kafkaQuotaError(e); msg != "" {
				bad = true
				re.ErrorCode = kerr.InvalidRequest.Code
				re.ErrorMessage = &msg
			}
			resp.Entries = append(resp.Entries, re)
		}
		if !bad {
			return nil, nil, false // kfake applies it
		}
		return resp, nil, true
	})
}

func kafkaQuotaError(e kmsg.AlterClientQuotasRequestEntry) string {
	for _, o := range e.Ops {
		if o.Remove {
			continue
		}
		integral := o.Key == "producer_byte_rate" || o.Key == "consumer_byte_rate"
		switch {
		case o.Value <= 0:
			return "Quota " + o.Key + " must be greater than 0"
		case integral && o.Value > math.MaxInt64:
			return "Proposed value for " + o.Key + " is too large for a LONG."
		case integral && math.Abs(math.Mod(o.Value, 1)) > 1e-6:
			return o.Key + " cannot be a fractional value."
		}
	}
	return ""
}

// certs is a CA and a certificate it signed, written as PEM files.
type certs struct {
	caFile, certFile, keyFile, bundleFile string
	serverTLS                             *tls.Config
}

// makeCerts creates a CA, a server certificate for hosts, and a client
// certificate, in dir.
func makeCerts(t *testing.T, dir string, hosts ...string) *certs {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tollgate test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(cn string, usage x509.ExtKeyUsage, serial int64) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	pemOf := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		b, _ := x509.MarshalPKCS8PrivateKey(k)
		return pemOf("PRIVATE KEY", b)
	}
	srvDER, srvKey := leaf("broker", x509.ExtKeyUsageServerAuth, 2)
	cliDER, cliKey := leaf("client", x509.ExtKeyUsageClientAuth, 3)
	c := &certs{
		caFile:     filepath.Join(dir, "ca.pem"),
		certFile:   filepath.Join(dir, "client.pem"),
		keyFile:    filepath.Join(dir, "client.key"),
		bundleFile: filepath.Join(dir, "client-bundle.pem"),
	}
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(c.caFile, pemOf("CERTIFICATE", caDER))
	write(c.certFile, pemOf("CERTIFICATE", cliDER))
	write(c.keyFile, keyPEM(cliKey))
	write(c.bundleFile, append(keyPEM(cliKey), pemOf("CERTIFICATE", cliDER)...))
	srvCert, err := tls.X509KeyPair(pemOf("CERTIFICATE", srvDER), keyPEM(srvKey))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c.serverTLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool}
	return c
}
