package kafka

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/testkit/proc"
)

// TestClusterListeners starts a cluster and speaks to it on every
// listener and SASL mechanism; it records the start time.
func TestClusterListeners(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three JVMs")
	}
	c, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	var rss int64
	for _, n := range c.Nodes() {
		kb, err := proc.RSSKiB(n.PID())
		if err != nil {
			t.Fatal(err)
		}
		rss += kb
	}
	t.Logf("Kafka %s: 3 nodes serving after %v, %d MiB resident", c.Version, c.Started.Round(time.Millisecond), rss/1024)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tlsCfg := &tls.Config{RootCAs: c.CA.Pool}
	cases := []struct {
		name string
		opts []kgo.Opt
	}{
		{"PLAINTEXT", []kgo.Opt{kgo.SeedBrokers(c.Bootstrap(Plaintext)...)}},
		{"SSL", []kgo.Opt{kgo.SeedBrokers(c.Bootstrap(SSL)...), kgo.DialTLSConfig(tlsCfg)}},
		{"SASL PLAIN", []kgo.Opt{kgo.SeedBrokers(c.Bootstrap(SASL)...), kgo.SASL(plain.Auth{User: "alice", Pass: Users["alice"]}.AsMechanism())}},
		{"SASL SCRAM-SHA-256", []kgo.Opt{kgo.SeedBrokers(c.Bootstrap(SASL)...), kgo.SASL(scram.Auth{User: "bob", Pass: Users["bob"]}.AsSha256Mechanism())}},
		{"SASL SCRAM-SHA-512", []kgo.Opt{kgo.SeedBrokers(c.Bootstrap(SASL)...), kgo.SASL(scram.Auth{User: "bob", Pass: Users["bob"]}.AsSha512Mechanism())}},
		{"SASL OAUTHBEARER", []kgo.Opt{kgo.SeedBrokers(c.Bootstrap(SASL)...), kgo.SASL(oauth.Auth{Token: unsecuredToken("alice")}.AsMechanism())}},
	}
	adm := kadm.NewClient(mustClient(t, c.AdminOpts()...))
	if _, err := adm.CreateTopic(ctx, 3, -1, nil, "listeners"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		cl := mustClient(t, append(tc.opts, kgo.DefaultProduceTopic("listeners"))...)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(tc.name)}).FirstErr(); err != nil {
			t.Errorf("%s: produce: %v", tc.name, err)
		}
	}
	md, err := adm.Metadata(ctx, "listeners")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["listeners"].Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has replicas %v, want 3", p.Partition, p.Replicas)
		}
	}
}

func mustClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
