package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// Logins that end at Tollgate: SASL terminated at the gateway (every
// client family and mechanism, kcat, SaslHandshake's range), TLS
// listeners (mTLS, SASL_SSL), quotas that follow the principal, and
// credentials managed live. The failures are in auth_failures_test.go, the
// pass-through listeners in auth_passthrough_test.go, the helpers in
// auth_helpers_test.go.

func TestSASLTerminateSmoke(t *testing.T) {
	t.Parallel()
	creds, keys := writeCredentials(t, map[string]string{"alice": "alice-secret"}, "team-a")
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
	})
	ctx := ctxT(t, 30*time.Second)
	for name, mech := range map[string]kgo.Opt{
		"SCRAM-SHA-256": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()),
		"SCRAM-SHA-512": kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		"PLAIN":         kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		"API key":       kgo.SASL(plain.Auth{User: "token", Pass: keys[0]}.AsMechanism()),
	} {
		cl := newClient(t, env, nil, mech, kgo.DefaultProduceTopic("sasl"), kgo.AllowAutoTopicCreation())
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(name)}).FirstErr(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if !env.Logs.WaitFor("principal=User:team-a", time.Second) || !env.Logs.WaitFor("principal=User:alice", time.Second) {
		t.Fatal("principals not bound")
	}
}

// SASL terminated at Tollgate (SASL_PLAINTEXT listener, credentials file):
// franz-go, sarama (SCRAM through xdg-go/scram, handshake v1) and
// kafka-go each produce and consume with PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512, and every login binds User:alice with its mechanism.
func TestAuthTerminateClients(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, authTerminateClients)
}

func authTerminateClients(t *testing.T, up *testkit.Upstream) {
	env, _ := startTerminateOn(t, up, map[string]string{"alice": "alice-secret"}, nil)
	ctx := ctxT(t, 60*time.Second)
	runAuthMatrixTopics(t, ctx, env.Bootstrap, "alice", "alice-secret", up.Topic(t, "auth-term"))
	for _, mech := range authMechanisms {
		waitLog(t, env, time.Second, `msg=authenticated `, "principal=User:alice", "mechanism="+mech)
	}
	if ls := logLines(env, "authentication failed"); len(ls) > 0 {
		t.Errorf("good logins logged failures:\n%s", strings.Join(ls, "\n"))
	}
	if ls := logLines(env, "request before authentication"); len(ls) > 0 {
		t.Errorf("a client library sent a request before authenticating:\n%s", strings.Join(ls, "\n"))
	}
}

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

// In terminate mode the gateway is the SASL server, so the SaslHandshake
// range in ApiVersions must be its own, whatever the upstream advertises:
// Apache Kafka's 0-1. librdkafka only attempts SASL when the range holds v0
// (its SaslHandshake feature is {17, 0, 0}; it then sends v1, the highest
// of 0..1 advertised) and otherwise fails every connection with "SASL
// Handshake not supported by broker". The embedded cluster (kfake)
// advertises 1-1, which the gateway forwards unchanged.
func TestSASLApiVersionsAdvertisesHandshakeRange(t *testing.T) {
	t.Parallel()
	env, _ := startTerminate(t, map[string]string{"alice": "alice-secret"}, nil)
	for _, v := range []int16{0, 3} {
		rc := dialRaw(t, env.Bootstrap)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "tollgate-e2e", "1.0"
		resp, err := rc.roundTrip(req)
		if err != nil {
			t.Fatalf("ApiVersions v%d before authentication: %v", v, err)
		}
		hs, au := "absent", "absent"
		for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
			switch k.ApiKey {
			case 17:
				hs = fmt.Sprintf("%d-%d", k.MinVersion, k.MaxVersion)
			case 36:
				au = fmt.Sprintf("%d-%d", k.MinVersion, k.MaxVersion)
			}
		}
		if hs != "0-1" {
			t.Errorf("ApiVersions v%d on a terminating SASL listener advertises SaslHandshake %s, want 0-1 (librdkafka needs v0 in the range to attempt SASL at all)", v, hs)
		}
		if !strings.HasPrefix(au, "0-") {
			t.Errorf("ApiVersions v%d advertises SaslAuthenticate %s, want 0-N", v, au)
		}
	}
}

// kcat (librdkafka) logs in to a terminating SASL_PLAINTEXT listener with
// PLAIN and with SCRAM-SHA-256: -L lists the three brokers at gateway
// addresses and the topic, -P produces and -C reads every record back, and
// the gateway logs each login as User:alice with the mechanism.
func TestSASLKcat(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		env, _ := startTerminateOn(t, up, map[string]string{"alice": "alice-secret"}, nil)
		ctx := ctxT(t, 60*time.Second)
		for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
			t.Run(mech, func(t *testing.T) { testKcatSASL(t, ctx, env, up, mech) })
		}
	})
}

func testKcatSASL(t *testing.T, ctx context.Context, env *testkit.Env, up *testkit.Upstream, mech string) {
	const n = 25
	topic := up.Topic(t, "auth-kcat-"+strings.ToLower(mech))
	freshTopics(t, up, topic)
	createAuthTopics(t, ctx, franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"), topic)
	env.WaitTopic(t, topic, 1) // kcat -L asks a broker that may not know it yet
	sasl := []string{"-b", env.Bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
	failedBefore := len(logLines(env, "authentication failed", "mechanism="+mech))
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, stderr, d, err := kcatTry(ctx, 20*time.Second, stdin, append(sasl, args...)...)
		if err == nil {
			return out
		}
		why := ""
		if strings.Contains(stderr, "SASL Handshake not supported by broker") {
			why = "\nlibrdkafka did not attempt SASL: the gateway's ApiVersions lacks SaslHandshake v0 (see TestSASLApiVersionsAdvertisesHandshakeRange)"
		}
		if ls := logLines(env, "authentication failed", "mechanism="+mech); len(ls) > failedBefore {
			why += "\nthe gateway refused the login:\n" + strings.Join(ls[failedBefore:], "\n")
			if strings.Contains(strings.Join(ls, ""), "invalid client nonce in the final client message") {
				why += "\nlibrdkafka before 2.6.1 repeats its client nonce in the SCRAM client-final message (confluentinc/librdkafka#4895); " +
					"Kafka 3.8.1-3.9 accept that (nonce endsWith the server's), Kafka 4.x and the gateway compare exactly"
			}
		}
		t.Fatalf("kcat %s: %v after %v\nstdout:\n%s\nstderr:\n%s%s", strings.Join(args, " "), err, d.Round(time.Millisecond), out, stderr, why)
		return ""
	}

	start := time.Now()
	out := run("", "-L", "-J", "-t", topic, "-m", "5")
	kcatListing(t, env, out, topic, 1)
	t.Logf("kcat -L with %s: %v", mech, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	var in strings.Builder
	var want []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("kcat-%s-%d", mech, i)
		want = append(want, v)
		in.WriteString(v + "\n")
	}
	run(in.String(), "-P", "-t", topic, "-X", "acks=all", "-X", "linger.ms=5")
	out = run("", "-C", "-t", topic, "-o", "beginning", "-e", "-c", fmt.Sprint(n), "-f", "%s\n")
	checkValues(t, "kcat -C", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), want)
	t.Logf("kcat -P and -C of %d records with %s: %v", n, mech, time.Since(start).Round(time.Millisecond))

	waitLog(t, env, time.Second, "msg=authenticated ", "principal=User:alice", "mechanism="+mech)
	if ls := logLines(env, "authentication failed", "mechanism="+mech); len(ls) > failedBefore {
		t.Errorf("kcat logins failed:\n%s", strings.Join(ls[failedBefore:], "\n"))
	}
	if ls := logLines(env, "request before authentication"); len(ls) > 0 {
		t.Errorf("kcat sent a request before authenticating:\n%s", strings.Join(ls, "\n"))
	}
}

// Quotas follow the authenticated principal, not the client-id: under a
// default_user producer quota, alice and bob producing with the SAME
// client-id get a bucket each, and two API keys of one identity (PLAIN,
// user "token") share that identity's single bucket. Each bucket's rate
// holds exactly the bytes of the connections it should: while the run is
// shorter than the quota window the rate is bytes ÷ [10 s, 11 s), so a
// bucket shared by mistake or split by mistake is off by 2×.
func TestAuthQuotaFollowsPrincipal(t *testing.T) {
	// Not parallel: measures byte rates in real time and bounds the run's wall
	// time.
	testkit.EachUpstream(t, authQuotaFollowsPrincipal)
}

func authQuotaFollowsPrincipal(t *testing.T, up *testkit.Upstream) {
	env, keys := startTerminateOn(t, up, map[string]string{"alice": "alice-secret", "bob": "bob-secret"}, []string{"team-a", "team-a"},
		func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30)}}
		})
	ctx := ctxT(t, 30*time.Second)
	const clientID = "shared-app"
	topic := up.Topic(t, "auth-quota")
	freshTopics(t, up, topic)
	createAuthTopics(t, ctx, franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"), topic)
	start := time.Now()

	produce := func(mech, user, pass string, n int) int64 {
		t.Helper()
		c := &counted{}
		cl := franzClient(t, append(franzOpts(env.Bootstrap, nil, mech, user, pass),
			kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic), kgo.WithHooks(c),
			kgo.ProducerBatchCompression(kgo.NoCompression()))...)
		val := make([]byte, 4<<10)
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Value: val}
		}
		// One call: a real broker's acks=all round trips, one per record,
		// would take the run past the window on a loaded machine.
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s as %s: %v", mech, user, err)
		}
		cl.Close()
		return c.prod.Load()
	}
	bytes := map[string]int64{
		"alice": produce("SCRAM-SHA-256", "alice", "alice-secret", 20),
		"bob":   produce("SCRAM-SHA-512", "bob", "bob-secret", 20),
	}
	k0 := produce("PLAIN", "token", keys[0], 10)
	k1 := produce("PLAIN", "token", keys[1], 10)
	bytes["team-a"] = k0 + k1

	usage := env.App.Engine().Usage(time.Now())
	var users []string
	for _, u := range usage {
		if u.Key != model.ProducerByteRate {
			continue
		}
		users = append(users, u.User)
		want, ok := bytes[u.User]
		if !ok {
			t.Errorf("unexpected producer bucket %+v", u)
			continue
		}
		if u.ClientID != "" || !u.Entity.User.IsSet() || u.Entity.Client.IsSet() {
			t.Errorf("bucket of %s: client tag %q, entity %+v; want the user-level default quota's bucket (client tag empty)", u.User, u.ClientID, u.Entity)
		}
		implied := u.Rate * 10.5
		t.Logf("bucket user=%s client=%q: rate %.0f B/s ≈ %.0f bytes; its connections produced %d", u.User, u.ClientID, u.Rate, implied, want)
		if math.Abs(implied-float64(want)) > 0.06*float64(want) {
			t.Errorf("bucket of %s holds ≈%.0f bytes, its connections produced %d", u.User, implied, want)
		}
	}
	slices.Sort(users)
	if !slices.Equal(users, []string{"alice", "bob", "team-a"}) {
		t.Errorf("producer buckets by user: %v, want exactly [alice bob team-a] (one per principal; none for the client-id or for user token)", users)
	}
	if k0 == 0 || k1 == 0 {
		t.Fatalf("an API key produced nothing: %d, %d", k0, k1)
	}
	if d := time.Since(start); d > 9*time.Second {
		t.Fatalf("the run took %v: past the 10 s minimum window the byte check does not hold", d)
	}
	// Both API keys logged in as the identity.
	if ls := logLines(env, "msg=authenticated ", "principal=User:team-a", "mechanism=PLAIN"); len(ls) < 2 {
		t.Errorf("%d logins as User:team-a, want one per API key at least", len(ls))
	}
}

// SCRAM credentials set with Kafka's own API (AlterUserScramCredentials,
// answered by Tollgate) and API keys created on the admin port are usable
// for logins at once; a revoked key is not.
//
// On the real cluster too: the logins end at Tollgate (terminate mode), the
// upstream sees Tollgate's own connections, and the produce that proves a
// login goes to the real brokers.
func TestCredentialsManagedLive(t *testing.T) {
	// Not parallel: each login must succeed within 4 s of wall time.
	testkit.EachUpstream(t, credentialsManagedLive)
}

func credentialsManagedLive(t *testing.T, up *testkit.Upstream) {
	// The quota admin's API key for the admin port, from a credentials file.
	credFile, adminKeys := writeCredentials(t, nil, "admin")
	topic := up.Topic(t, "creds")
	freshTopics(t, up, topic)
	env := startControlOn(t, up, func(c *app.Config) {
		c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"})
		c.CredentialsFile = credFile
	})
	ctx := ctxT(t, 30*time.Second)
	defer http.DefaultClient.CloseIdleConnections()
	saslBoot := env.App.Gateway().BootstrapAddrs()["SASL"]
	login := func(opt kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslBoot), opt, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.RecordDeliveryTimeout(3*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		lctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		return cl.ProduceSync(lctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	carol := scram.Auth{User: "carol", Pass: "carol-secret"}
	if err := login(kgo.SASL(carol.AsSha512Mechanism())); err == nil {
		t.Fatal("carol logged in before she had a credential")
	}
	adm := adminAs(t, env, "127.0.0.2")
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	if err := login(kgo.SASL(carol.AsSha512Mechanism())); err != nil {
		t.Fatalf("carol with her new SCRAM-SHA-512 credential: %v", err)
	}
	if err := login(kgo.SASL(plain.Auth{User: "carol", Pass: "carol-secret"}.AsMechanism())); err != nil {
		t.Fatalf("carol with PLAIN, checked against the SCRAM credential: %v", err)
	}
	desc, err := adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || len(desc["carol"].CredInfos) != 1 || desc["carol"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("DescribeUserSCRAMs: %v %+v", err, desc)
	}

	// An API key from the admin port, then revoked.
	body, _ := json.Marshal(map[string]string{"identity": "team-b"})
	creq, _ := http.NewRequest("POST", "http://"+env.App.HTTPAddr()+"/api/v1/apikeys", bytes.NewReader(body))
	creq.Header.Set("Content-Type", "application/json")
	creq.Header.Set("Authorization", "Bearer "+adminKeys[0])
	resp, err := http.DefaultClient.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID, Key string }
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != 201 || created.Key == "" {
		t.Fatalf("create API key: %d %+v", resp.StatusCode, created)
	}
	token := kgo.SASL(plain.Auth{User: "token", Pass: created.Key}.AsMechanism())
	if err := login(token); err != nil {
		t.Fatalf("login with the new API key: %v", err)
	}
	if !env.Logs.WaitFor("principal=User:team-b", time.Second) {
		t.Error("the API key did not authenticate as its identity")
	}
	req, _ := http.NewRequest("DELETE", "http://"+env.App.HTTPAddr()+"/api/v1/apikeys/"+created.ID, nil)
	req.Header.Set("Authorization", "Bearer "+adminKeys[0])
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != 200 {
		t.Fatalf("revoke: %d", dresp.StatusCode)
	}
	if err := login(token); err == nil {
		t.Fatal("a revoked API key still logs in")
	}
}
