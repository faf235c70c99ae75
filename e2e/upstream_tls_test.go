package e2e

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// Upstream connections use TLS on their own (CA, and a client certificate
// for brokers that require mTLS), independently of the client side, which
// here stays PLAINTEXT.
func TestUpstreamTLS(t *testing.T) {
	t.Parallel()
	pki := testpki.NewCA(t, "upstream-ca")
	server := pki.Server(t, "broker")
	client := pki.Client(t, pkix.Name{CommonName: "tollgate"})
	brokerTLS := pki.ServerConfig(server)
	brokerTLS.ClientAuth = tls.RequireAndVerifyClientCert
	brokerTLS.MinVersion = tls.VersionTLS12
	env := testkit.Start(t, app.Options{DevClusterOpts: []kfake.Opt{kfake.TLS(brokerTLS)}}, func(c *app.Config) {
		c.Upstream.TLS = &auth.UpstreamTLSConfig{CAFile: pki.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic("over-tls"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce through a PLAINTEXT listener to a TLS (mTLS) upstream: %v", err)
	}
	cons := newClient(t, env, nil, kgo.ConsumeTopics("over-tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if fs.NumRecords() != 1 || fs.Err() != nil {
		t.Fatalf("consume over upstream TLS: %d records, %v", fs.NumRecords(), fs.Err())
	}
}
