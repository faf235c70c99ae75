package e2e

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// Upstream connections use TLS on their own (CA, and a client certificate
// for brokers that require mTLS), independently of the client side, which
// here stays PLAINTEXT.
//
// kfake: a TLS listener of its own that requires a client certificate. The
// real cluster: its SSL listener, which verifies no client certificate
// (ssl.client.auth=none), so the gateway is given the cluster's CA only;
// the listener speaks nothing but TLS, so a produce and a fetch through it
// are the proof.
func TestUpstreamTLS(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, upstreamTLS)
}

func upstreamTLS(t *testing.T, up *testkit.Upstream) {
	var env *testkit.Env
	if up.Real() {
		env = up.Start(t, app.Options{}, func(c *app.Config) {
			c.Upstream.Bootstrap = up.Kafka.Bootstrap(kafka.SSL)
			c.Upstream.TLS = &auth.UpstreamTLSConfig{CAFile: up.Kafka.CA.CertFile}
		})
	} else {
		pki := testpki.NewCA(t, "upstream-ca")
		server := pki.Server(t, "broker")
		client := pki.Client(t, pkix.Name{CommonName: "tollgate"})
		brokerTLS := pki.ServerConfig(server)
		brokerTLS.ClientAuth = tls.RequireAndVerifyClientCert
		brokerTLS.MinVersion = tls.VersionTLS12
		env = up.Start(t, app.Options{DevClusterOpts: []kfake.Opt{kfake.TLS(brokerTLS)}}, func(c *app.Config) {
			c.Upstream.TLS = &auth.UpstreamTLSConfig{CAFile: pki.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile}
		})
	}
	ctx := ctxT(t, 30*time.Second)
	topic := up.Topic(t, "over-tls")
	freshTopics(t, up, topic)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce through a PLAINTEXT listener to a TLS upstream: %v", err)
	}
	cons := newClient(t, env, nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if fs.NumRecords() != 1 || fs.Err() != nil {
		t.Fatalf("consume over upstream TLS: %d records, %v", fs.NumRecords(), fs.Err())
	}
	if up.Real() {
		// The upstream brokers the gateway found are the SSL listeners'.
		ssl := map[string]bool{}
		for _, a := range up.Kafka.Bootstrap(kafka.SSL) {
			ssl[a] = true
		}
		if lines := logLines(env, "upstream broker found"); len(lines) != 3 {
			t.Errorf("upstream brokers found: %q, want 3", lines)
		} else {
			for _, l := range lines {
				i := strings.Index(l, "addr=")
				if i < 0 || !ssl[strings.Fields(l[i+len("addr="):])[0]] {
					t.Errorf("the gateway found %q, not an SSL listener of the cluster (%v)", l, up.Kafka.Bootstrap(kafka.SSL))
				}
			}
		}
	}
}
