package e2e

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

const tlsMappingRules = "RULE:^CN=([a-zA-Z0-9.]*?),OU=(.*)$/$1/L,DEFAULT"

// TLS listeners with certificates the test issues: an SSL listener that
// requires a client certificate (mTLS) and maps its subject to the
// principal, and a SASL_SSL listener terminating SCRAM over TLS.
func TestTLSMutualAndSASLSSL(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, tlsMutualAndSASLSSL)
}

func tlsMutualAndSASLSSL(t *testing.T, up *testkit.Upstream) {
	tAlice, tBob, tAfter := up.Topic(t, "auth-tls-alice"), up.Topic(t, "auth-tls-bob"), up.Topic(t, "auth-tls-alice-after")
	tSASLSSL := up.Topic(t, "auth-saslssl")
	ca := testpki.NewCA(t, "Tollgate Test CA")
	server := ca.Server(t, "tollgate")
	alice := ca.Client(t, pkix.Name{CommonName: "Alice.Client", OrganizationalUnit: []string{"Engineering"}, Organization: []string{"Tollgate"}})
	bob := ca.Client(t, pkix.Name{CommonName: "Bob", Organization: []string{"Tollgate"}})
	rogue := testpki.NewCA(t, "Rogue CA").Client(t, pkix.Name{CommonName: "Mallory", OrganizationalUnit: []string{"Engineering"}})
	creds, _ := writeCredentials(t, map[string]string{"alice": "alice-secret"})

	// The subjects as Kafka sees them (RFC 2253, last RDN first); the rule
	// is written against this order.
	for _, c := range []struct {
		cert *testpki.Leaf
		dn   string
	}{{alice, "CN=Alice.Client,OU=Engineering,O=Tollgate"}, {bob, "CN=Bob,O=Tollgate"}} {
		if dn, err := auth.DistinguishedName(c.cert.Cert); err != nil || dn != c.dn {
			t.Fatalf("DistinguishedName = %q, %v; want %q", dn, err, c.dn)
		}
	}

	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners = []proxy.ListenerConfig{
			{
				Name: "SSL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SSL",
				TLS:                      auth.TLSConfig{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.CertFile, ClientAuth: "required"},
				SSLPrincipalMappingRules: tlsMappingRules,
			},
			{
				Name: "SASL_SSL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_SSL",
				TLS: auth.TLSConfig{CertFile: server.CertFile, KeyFile: server.KeyFile},
			},
		}
		c.CredentialsFile = creds
		c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30), ConsumerByteRate: ptrF(1 << 30)}}
	})
	boots := env.App.Gateway().BootstrapAddrs()
	sslBoot, saslSSLBoot := boots["SSL"], boots["SASL_SSL"]
	ctx := ctxT(t, 60*time.Second)

	t.Run("mTLS principal", func(t *testing.T) {
		start := time.Now()
		tc := ca.ClientConfig(alice.TLS)
		createAuthTopics(t, ctx, franzOpts(sslBoot, tc, "", "", ""), tAlice, tBob)
		franzProduceConsume(t, ctx, sslBoot, tc, "", "", "", tAlice, 20)
		// A subject the rule does not match falls through to DEFAULT: the
		// whole DN.
		franzProduceConsume(t, ctx, sslBoot, ca.ClientConfig(bob.TLS), "", "", "", tBob, 20)
		for _, k := range []model.Key{model.ProducerByteRate, model.ConsumerByteRate} {
			users := usageUsers(env, k)
			if users["alice.client"] == nil || users["CN=Bob,O=Tollgate"] == nil || len(users) != 2 {
				t.Errorf("%s buckets by user: %v, want alice.client (the mapped, lower-cased CN) and CN=Bob,O=Tollgate (DEFAULT)", k, users)
			}
		}
		t.Logf("mTLS produce and consume as two mapped principals: %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("refused certificates", func(t *testing.T) {
		// Go's client withholds a certificate whose issuer the server did
		// not list as acceptable; send the rogue one regardless.
		rogueTLS := ca.ClientConfig()
		rogueTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rogue.TLS, nil }
		for _, c := range []struct {
			name string
			tc   *tls.Config
		}{{"no client certificate", ca.ClientConfig()}, {"certificate from an unknown CA", rogueTLS}} {
			closedBefore := len(logLines(env, "reason=tls_handshake_failed"))
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sslBoot, c.tc)
			if err == nil {
				// TLS 1.3: the client's handshake ends before the server
				// has checked the client's certificate; the refusal
				// arrives as an alert on the first read.
				req := kmsg.NewPtrApiVersionsRequest()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
				if err == nil {
					_, err = io.ReadFull(conn, make([]byte, 4))
				}
				conn.Close()
			}
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("%s: the SSL listener served the connection (err %v)", c.name, err)
			}
			t.Logf("%s: client sees %v", c.name, err)
			deadline := time.Now().Add(3 * time.Second)
			for len(logLines(env, "reason=tls_handshake_failed")) == closedBefore {
				if time.Now().After(deadline) {
					t.Fatalf("%s: no connection closed with reason=tls_handshake_failed", c.name)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if users := usageUsers(env, model.ProducerByteRate); users["mallory"] != nil || users["ANONYMOUS"] != nil {
			t.Errorf("a refused connection got a bucket: %v", users)
		}
		// The good client still works.
		createAuthTopics(t, ctx, franzOpts(sslBoot, ca.ClientConfig(alice.TLS), "", "", ""), tAfter)
		franzProduceConsume(t, ctx, sslBoot, ca.ClientConfig(alice.TLS), "", "", "", tAfter, 5)
	})

	t.Run("SASL_SSL SCRAM over TLS", func(t *testing.T) {
		tc := ca.ClientConfig()
		createAuthTopics(t, ctx, franzOpts(saslSSLBoot, tc, "SCRAM-SHA-512", "alice", "alice-secret"),
			tSASLSSL+"-franz-go", tSASLSSL+"-sarama", tSASLSSL+"-kafka-go")
		for _, c := range authClients {
			start := time.Now()
			c.run(t, ctx, saslSSLBoot, tc, "SCRAM-SHA-512", "alice", "alice-secret", tSASLSSL+"-"+c.name, 20)
			t.Logf("%s over SASL_SSL with SCRAM-SHA-512: %v", c.name, time.Since(start).Round(time.Millisecond))
		}
		waitLog(t, env, time.Second, "msg=authenticated ", "listener=SASL_SSL", "principal=User:alice", "mechanism=SCRAM-SHA-512")
		if users := usageUsers(env, model.ProducerByteRate); users["alice"] == nil {
			t.Errorf("producer buckets by user: %v, want alice's", users)
		}
		// Plaintext to a TLS port is refused too.
		rc := dialRaw(t, saslSSLBoot)
		if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err == nil {
			t.Error("the SASL_SSL listener answered a plaintext request")
		}
	})
	if ls := logLines(env, "authentication failed"); len(ls) > 0 {
		t.Errorf("unexpected SASL failures:\n%s", strings.Join(ls, "\n"))
	}
}
