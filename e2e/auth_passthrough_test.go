package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/testkit"
)

// startPassthrough runs a SASL pass-through listener in front of a
// SASL-enabled embedded cluster: admin (SCRAM-SHA-256, superuser) is
// Tollgate's own identity; alice may log in with every mechanism.
func startPassthrough(t *testing.T, edit ...func(*app.Config)) *testkit.Env {
	t.Helper()
	opts := app.Options{DevClusterOpts: []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.User("PLAIN", "alice", "alice-secret"),
		kfake.User("SCRAM-SHA-256", "alice", "alice-secret"),
		kfake.User("SCRAM-SHA-512", "alice", "alice-secret"),
	}}
	return testkit.Start(t, opts, append([]func(*app.Config){func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.Listeners[0].SASL.Mode = "passthrough"
		c.Upstream.SASL = &app.UpstreamSASL{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: "admin"}
		c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30), ConsumerByteRate: ptrF(1 << 30)}}
	}}, edit...)...)
}

// SASL passed through to the brokers: the same three clients with every
// mechanism log in to the SASL-enabled upstream through the gateway, which
// binds the user it read from the client's first message once upstream
// accepted it: the log says so and every quota bucket is alice's.
func TestSASLPassthroughClients(t *testing.T) {
	t.Parallel()
	env := startPassthrough(t)
	ctx := ctxT(t, 60*time.Second)
	runAuthMatrix(t, ctx, env.Bootstrap, "alice", "alice-secret")
	for _, mech := range authMechanisms {
		waitLog(t, env, time.Second, "authenticated (pass-through)", "principal=User:alice", "mechanism="+mech)
	}
	if ls := logLines(env, "authenticated (pass-through)"); len(ls) > 0 {
		for _, l := range ls {
			if !strings.Contains(l, "principal=User:alice") {
				t.Errorf("pass-through bound another principal: %s", l)
			}
		}
	}
	for _, k := range []quota.Key{quota.ProducerByteRate, quota.ConsumerByteRate} {
		users := usageUsers(env, k)
		if len(users) != 1 || users["alice"] == nil {
			t.Errorf("%s buckets by user: %v, want only alice's", k, users)
		}
	}

	// A wrong password is refused by the upstream (kfake closes the
	// connection after the client-final), through the gateway, and binds
	// nothing.
	bound := len(logLines(env, "authenticated (pass-through)"))
	rc := dialRaw(t, env.Bootstrap)
	if hs := rc.handshake(t, 1, "SCRAM-SHA-512"); hs.ErrorCode != 0 {
		t.Fatalf("pass-through SaslHandshake SCRAM-SHA-512: error %d", hs.ErrorCode)
	}
	conv := scramConversation(t, "SCRAM-SHA-512", "alice", "wrong")
	first, _ := conv.Step("")
	sf := rc.authenticate(t, 1, []byte(first))
	if sf.ErrorCode != 0 {
		t.Fatalf("pass-through client-first: error %d", sf.ErrorCode)
	}
	final, err := conv.Step(string(sf.SASLAuthBytes))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := rc.roundTrip(saslAuthenticate(1, []byte(final))); err == nil {
		r := resp.(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode == 0 {
			t.Fatal("pass-through accepted a wrong SCRAM proof")
		}
		rc.expectClosed(t, "pass-through wrong password")
		t.Logf("wrong password through pass-through: error %d, then closed", r.ErrorCode)
	} else {
		t.Logf("wrong password through pass-through: connection closed (%v)", err)
	}
	if n := len(logLines(env, "authenticated (pass-through)")); n != bound {
		t.Errorf("a refused pass-through login was bound (%d bindings before, %d after)", bound, n)
	}
	if ls := logLines(env, "principal=User:alice", "mechanism=SCRAM-SHA-512", rc.c.LocalAddr().String()); len(ls) > 0 {
		t.Errorf("the refused connection was bound:\n%s", strings.Join(ls, "\n"))
	}
	// A good client is unaffected.
	good := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "alice", "alice-secret"), kgo.DefaultProduceTopic("auth-franz-go-plain"))...)
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("good client after a refused login: %v", err)
	}
}

// Terminate mode in front of a SASL-enabled cluster: clients log in to the
// gateway with its own credentials (alice is not even a cluster user), and
// every upstream connection of theirs logs in as the service identity.
func TestSASLTerminateToSASLUpstream(t *testing.T) {
	t.Parallel()
	creds, _ := writeCredentials(t, map[string]string{"carol": "carol-secret"})
	env := testkit.Start(t, app.Options{DevClusterOpts: []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
	}}, func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
		c.Upstream.SASL = &app.UpstreamSASL{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: "admin"}
		c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30)}}
	})
	ctx := ctxT(t, 30*time.Second)
	var topics []string
	for _, c := range authClients {
		topics = append(topics, "auth-terminate-upstream-"+c.name)
	}
	createAuthTopics(t, ctx, franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "carol", "carol-secret"), topics...)
	for i, c := range authClients {
		start := time.Now()
		c.run(t, ctx, env.Bootstrap, nil, "SCRAM-SHA-512", "carol", "carol-secret", topics[i], 10)
		t.Logf("%s through terminate mode to a SASL upstream: %v", c.name, time.Since(start).Round(time.Millisecond))
	}
	waitLog(t, env, time.Second, "msg=authenticated ", "principal=User:carol", "mechanism=SCRAM-SHA-512")
	if users := usageUsers(env, quota.ProducerByteRate); len(users) != 1 || users["carol"] == nil {
		t.Errorf("producer buckets by user: %v, want carol's (the gateway principal, not the service identity)", users)
	}
}

// What the pass-through listener refuses itself, before the upstream
// sees anything: a mechanism it does not enable (33, listing its own), a
// request before authentication, and SaslHandshake v0.
func TestSASLPassthroughRefusals(t *testing.T) {
	t.Parallel()
	enabled := []string{"SCRAM-SHA-512", "SCRAM-SHA-256"}
	env := startPassthrough(t, func(c *app.Config) { c.Listeners[0].SASL.Mechanisms = enabled })

	rc := dialRaw(t, env.Bootstrap)
	hs := rc.handshake(t, 1, "PLAIN")
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hs.SupportedMechanisms, enabled) {
		t.Errorf("pass-through SaslHandshake PLAIN: error %d, mechanisms %v; want 33 and %v", hs.ErrorCode, hs.SupportedMechanisms, enabled)
	}
	if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err == nil {
		t.Error("pass-through: the connection stayed open after UNSUPPORTED_SASL_MECHANISM (Kafka closes it)")
	}

	checkMetadataBeforeAuth(t, env, dialRaw(t, env.Bootstrap), "pass-through")

	rc = dialRaw(t, env.Bootstrap)
	v0 := kmsg.NewPtrSASLHandshakeRequest()
	v0.Version, v0.Mechanism = 0, "SCRAM-SHA-512"
	if resp, err := rc.roundTrip(v0); err == nil {
		t.Errorf("pass-through answered SaslHandshake v0: %+v", resp)
	}
	// The gateway must refuse v0 itself, as in terminate mode: after a v0
	// handshake come raw SASL tokens without a request header, which it
	// cannot frame or read the user from; an upstream that serves v0
	// (Apache Kafka's range is 0-1) must not be asked.
	waitLog(t, env, 2*time.Second, "reason=unsupported_version", "remote="+rc.c.LocalAddr().String())
	if ls := logLines(env, "authenticated (pass-through)"); len(ls) > 0 {
		t.Errorf("refused connections were bound:\n%s", strings.Join(ls, "\n"))
	}

	// A good client still logs in.
	createAuthTopics(t, ctxT(t, 10*time.Second), franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "alice", "alice-secret"), "auth-passthrough-refusals")
	waitLog(t, env, time.Second, "authenticated (pass-through)", "principal=User:alice", "mechanism=SCRAM-SHA-512")
}
