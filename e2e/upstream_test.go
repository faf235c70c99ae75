package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// The gateway and its upstream: the gateway's own connections to the
// brokers (TLS), and what of the upstream a client sees through it (a
// group member's host is the client's address, not the gateway's; broker
// configs name no upstream address).

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

// The coordinator records a member's client host as the peer of its
// connection — the gateway. DescribeGroups through the gateway shows the
// real client address instead: a consumer connecting from 127.0.0.2 is
// listed at 127.0.0.2, in the upstream's own format (kfake: host:port of
// the client's connection to the gateway), while the gateway itself dials
// the cluster from 127.0.0.1.
func TestDescribeGroupsShowsClientHost(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, describeGroupsShowsClientHost)
}

func describeGroupsShowsClientHost(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic, group := up.Topic(t, "hosts"), up.GroupID(t, "hosts-group")
	prod := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		local []string // the consumer's side of each connection
	)
	from2 := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("far-consumer"),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := from2.DialContext(ctx, network, host)
			if err == nil {
				mu.Lock()
				local = append(local, c.LocalAddr().String())
				mu.Unlock()
			}
			return c, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for n := 0; n == 0; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed nothing: %v", err)
		}
		n += fs.NumRecords()
	}
	dg, err := kadm.NewClient(prod).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	g := dg[group]
	if g.Err != nil || len(g.Members) != 1 {
		t.Fatalf("describe group: %+v", g)
	}
	host := g.Members[0].ClientHost
	mu.Lock()
	defer mu.Unlock()
	if up.Real() {
		// Kafka's own format: "/" and the address, no port.
		if host != "/127.0.0.2" {
			t.Errorf("member listed at %q, want Kafka's /127.0.0.2 (the consumer's address, not the gateway's)", host)
		}
		return
	}
	if !strings.HasPrefix(host, "127.0.0.2:") {
		t.Fatalf("member listed at %q, want the consumer's address 127.0.0.2:port (connections from %v)", host, local)
	}
	found := false
	for _, l := range local {
		found = found || l == host
	}
	if !found {
		t.Errorf("member listed at %q, not one of the consumer's connections %v", host, local)
	}
}

// DescribeConfigs on a broker would hand out upstream addresses in config
// values (spec: kafka-proxying §2.3): advertised.listeners and listeners
// become the gateway's own address for that broker on the listener asked,
// and controller addresses are hidden as sensitive, synonyms included.
func TestDescribeBrokerConfigsHideUpstreamAddresses(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	direct, err := kgo.NewClient(kgo.SeedBrokers(env.App.DevCluster().Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	adv, voters := "PLAINTEXT://10.9.9.9:9092", "1@10.9.9.8:9093"
	set, err := kadm.NewClient(direct).AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Name: "advertised.listeners", Value: &adv}, {Name: "controller.quorum.voters", Value: &voters},
	}, 0)
	if err != nil || set[0].Err != nil {
		t.Fatalf("setting the upstream's dynamic configs: %v %+v", err, set)
	}
	adm := kadm.NewClient(newClient(t, env, nil))
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, b := range md.Brokers {
		if b.NodeID == 0 {
			want = "PLAINTEXT://" + net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	rs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, rs)
	}
	seen := 0
	for _, c := range rs[0].Configs {
		switch c.Key {
		case "advertised.listeners":
			seen++
			if c.MaybeValue() != want {
				t.Errorf("advertised.listeners = %q, want the gateway's %q", c.MaybeValue(), want)
			}
		case "controller.quorum.voters":
			seen++
			if c.Value != nil || !c.Sensitive {
				t.Errorf("controller.quorum.voters = %v (sensitive %v), want hidden", c.MaybeValue(), c.Sensitive)
			}
		}
		for _, s := range c.Synonyms {
			if s.Value != nil && strings.Contains(*s.Value, "10.9.9.") {
				t.Errorf("%s synonym %s leaks %q", c.Key, s.Key, *s.Value)
			}
		}
		if strings.Contains(c.MaybeValue(), "10.9.9.") {
			t.Errorf("%s leaks %q", c.Key, c.MaybeValue())
		}
	}
	if seen != 2 {
		t.Fatalf("saw %d of the 2 configs set upstream", seen)
	}
}

// A broker's own configs through the gateway, on both upstreams, as they
// are (nothing set by the test): no config value and no synonym names any
// address of the upstream — the real brokers' listeners, advertised
// listeners and controller quorum voters are full of them — and
// advertised.listeners, where the broker has one, names the gateway.
func TestDescribeBrokerConfigsHideAddressesAsTheyAre(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env := up.Start(t, app.Options{})
		ctx := ctxT(t, 30*time.Second)
		secret := map[string]bool{}
		for _, a := range env.UpstreamAddrs() {
			secret[a] = true
		}
		if up.Real() {
			for _, n := range up.Kafka.Nodes() {
				for _, a := range []string{n.Plaintext, n.SASL, n.SSL, n.Controller} {
					secret[a] = true
				}
			}
		}
		adm := kadm.NewClient(newClient(t, env, nil))
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if up.Real() {
			// Asked straight, the broker does name its addresses: the
			// check below is not empty.
			named := 0
			direct, err := kadm.NewClient(directClient(t, up.Kafka)).DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
			if err != nil || len(direct) != 1 {
				t.Fatalf("describe straight to the broker: %v", err)
			}
			for _, c := range direct[0].Configs {
				for a := range secret {
					if strings.Contains(c.MaybeValue(), a) {
						named++
					}
				}
			}
			if named < 3 {
				t.Fatalf("straight to the broker, %d config values name its addresses; want listeners, advertised.listeners and the voters", named)
			}
		}
		for _, b := range md.Brokers {
			rs, err := adm.DescribeBrokerConfigs(ctx, b.NodeID)
			if err != nil || len(rs) != 1 || rs[0].Err != nil {
				t.Fatalf("describe broker %d: %v %+v", b.NodeID, err, rs)
			}
			gw := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			leaks := func(key, v string) {
				for a := range secret {
					if strings.Contains(v, a) {
						t.Errorf("broker %d's %s = %q names the upstream's %s", b.NodeID, key, v, a)
					}
				}
			}
			for _, c := range rs[0].Configs {
				leaks(c.Key, c.MaybeValue())
				for _, s := range c.Synonyms {
					if s.Value != nil {
						leaks(c.Key+" (synonym "+s.Key+")", *s.Value)
					}
				}
				if c.Key == "advertised.listeners" && c.Value != nil && !strings.Contains(*c.Value, gw) {
					t.Errorf("broker %d's advertised.listeners = %q, want the gateway's %s", b.NodeID, *c.Value, gw)
				}
			}
		}
	})
}
