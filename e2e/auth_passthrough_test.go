package e2e

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

// startPassthrough runs a SASL pass-through listener in front of a
// SASL-enabled upstream: kfake with SASL on, or the real cluster's
// SASL_PLAINTEXT listener. admin (SCRAM-SHA-256, superuser) is Tollgate's
// own identity; alice may log in with every mechanism (the real cluster's
// users: kafka.Users).
func startPassthrough(t *testing.T, up *testkit.Upstream, edit ...func(*app.Config)) *testkit.Env {
	t.Helper()
	return startPassthroughKfake(t, up, nil, edit...)
}

// startPassthroughKfake is startPassthrough with more options for kfake
// (its ACLs, say), applied after the SASL users.
func startPassthroughKfake(t *testing.T, up *testkit.Upstream, extra []kfake.Opt, edit ...func(*app.Config)) *testkit.Env {
	t.Helper()
	opts := app.Options{DevClusterOpts: []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", kafka.Users["admin"]),
		kfake.User("PLAIN", "alice", kafka.Users["alice"]),
		kfake.User("SCRAM-SHA-256", "alice", kafka.Users["alice"]),
		kfake.User("SCRAM-SHA-512", "alice", kafka.Users["alice"]),
	}}
	opts.DevClusterOpts = append(opts.DevClusterOpts, extra...)
	return up.Start(t, opts, append([]func(*app.Config){func(c *app.Config) {
		if up.Real() {
			c.Upstream.Bootstrap = up.Kafka.Bootstrap(kafka.SASL)
		}
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.Listeners[0].SASL.Mode = "passthrough"
		c.Upstream.SASL = &app.UpstreamSASL{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: kafka.Users["admin"]}
		c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30), ConsumerByteRate: ptrF(1 << 30)}}
	}}, edit...)...)
}

// SASL passed through to the brokers: the same three clients with every
// mechanism log in to the SASL-enabled upstream through the gateway, which
// binds the user it read from the client's first message once upstream
// accepted it: the log says so and every quota bucket is alice's.
func TestSASLPassthroughClients(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		saslPassthroughClients(t, up)
	})
}

func saslPassthroughClients(t *testing.T, up *testkit.Upstream) {
	env := startPassthrough(t, up)
	ctx := ctxT(t, 60*time.Second)
	alice := kafka.Users["alice"]
	runAuthMatrixTopics(t, ctx, env.Bootstrap, "alice", alice, up.Topic(t, "auth"))
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
	for _, k := range []model.Key{model.ProducerByteRate, model.ConsumerByteRate} {
		users := usageUsers(env, k)
		if len(users) != 1 || users["alice"] == nil {
			t.Errorf("%s buckets by user: %v, want only alice's", k, users)
		}
	}

	// A wrong password is refused by the upstream (kfake closes the
	// connection after the client-final; Kafka answers
	// SASL_AUTHENTICATION_FAILED and closes), through the gateway, and
	// binds nothing.
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
		if up.Real() && r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("Kafka's refusal came through as error %d %q, want SASL_AUTHENTICATION_FAILED unchanged", r.ErrorCode, deref(r.ErrorMessage))
		}
		rc.expectClosed(t, "pass-through wrong password")
		t.Logf("wrong password through pass-through: error %d (%q), then closed", r.ErrorCode, deref(r.ErrorMessage))
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
	good := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "alice", alice), kgo.DefaultProduceTopic(up.Topic(t, "auth")+"-franz-go-plain"))...)
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("good client after a refused login: %v", err)
	}
}

// OAUTHBEARER passed through to Kafka's own validator (the real cluster's
// unsecured one; kfake has no OAUTHBEARER): the gateway binds the token's
// sub once Kafka accepted it, and a token Kafka refuses binds nothing and
// comes back with Kafka's error unchanged.
func TestSASLPassthroughOAuthBearer(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		if !up.Real() {
			// Not a skip: kfake implements no OAUTHBEARER, so its row
			// checks that the gateway refuses the mechanism it was not
			// given (the listener enables what the upstream speaks).
			env := startPassthrough(t, up)
			rc := dialRaw(t, env.Bootstrap)
			if hs := rc.handshake(t, 1, "OAUTHBEARER"); hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
				t.Errorf("OAUTHBEARER on a listener without it: error %d, want UNSUPPORTED_SASL_MECHANISM", hs.ErrorCode)
			}
			return
		}
		env := startPassthrough(t, up, func(c *app.Config) {
			c.Listeners[0].SASL.Mechanisms = []string{"SCRAM-SHA-512", "OAUTHBEARER"}
		})
		ctx := ctxT(t, 60*time.Second)
		topic := up.Topic(t, "oauth")
		cl := franzClient(t, kgo.SeedBrokers(env.Bootstrap), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.SASL(oauth.Auth{Token: kafka.UnsecuredToken("alice")}.AsMechanism()))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("bearer")}).FirstErr(); err != nil {
			t.Fatalf("produce with an OAUTHBEARER login through the gateway: %v", err)
		}
		waitLog(t, env, 2*time.Second, "authenticated (pass-through)", "principal=User:alice", "mechanism=OAUTHBEARER")
		if users := usageUsers(env, model.ProducerByteRate); len(users) != 1 || users["alice"] == nil {
			t.Errorf("producer buckets by user: %v, want alice's (the token's sub)", users)
		}

		// A token Kafka's validator refuses (expired). (alice's client may
		// still be logging in on more connections: only mallory's
		// bindings count.)
		rc := dialRaw(t, env.Bootstrap)
		if hs := rc.handshake(t, 1, "OAUTHBEARER"); hs.ErrorCode != 0 {
			t.Fatalf("SaslHandshake OAUTHBEARER: error %d", hs.ErrorCode)
		}
		msg := "n,,\x01auth=Bearer " + expiredUnsecuredToken("mallory") + "\x01\x01"
		r := rc.authenticate(t, 1, []byte(msg))
		// Kafka answers an invalid token with error 0 and a JSON error
		// in the auth bytes, then expects the client's %x01 (RFC 7628);
		// after it, SASL_AUTHENTICATION_FAILED.
		if r.ErrorCode == 0 {
			if !strings.Contains(string(r.SASLAuthBytes), "status") {
				t.Fatalf("Kafka accepted an expired token: %q", r.SASLAuthBytes)
			}
			resp, err := rc.roundTrip(saslAuthenticate(1, []byte{0x01}))
			if err == nil {
				r = resp.(*kmsg.SASLAuthenticateResponse)
			}
		}
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Errorf("expired token: error %d %q, want SASL_AUTHENTICATION_FAILED", r.ErrorCode, deref(r.ErrorMessage))
		}
		if ls := logLines(env, "authenticated (pass-through)", "principal=User:mallory"); len(ls) != 0 {
			t.Errorf("a refused OAUTHBEARER login was bound:\n%s", strings.Join(ls, "\n"))
		}
	})
}

// expiredUnsecuredToken is an unsecured JWT for sub that expired an hour
// ago.
func expiredUnsecuredToken(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, now-7200, now-3600)) + "."
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Terminate mode in front of a SASL-enabled cluster: clients log in to the
// gateway with its own credentials (alice is not even a cluster user), and
// every upstream connection of theirs logs in as the service identity.
func TestSASLTerminateToSASLUpstream(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, saslTerminateToSASLUpstream)
}

func saslTerminateToSASLUpstream(t *testing.T, up *testkit.Upstream) {
	creds, _ := writeCredentials(t, map[string]string{"carol": "carol-secret"})
	env := up.Start(t, app.Options{DevClusterOpts: []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", kafka.Users["admin"]),
	}}, func(c *app.Config) {
		if up.Real() {
			c.Upstream.Bootstrap = up.Kafka.Bootstrap(kafka.SASL)
		}
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
		c.Upstream.SASL = &app.UpstreamSASL{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: kafka.Users["admin"]}
		c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30)}}
	})
	ctx := ctxT(t, 30*time.Second)
	var topics []string
	for _, c := range authClients {
		topics = append(topics, up.Topic(t, "auth-terminate-upstream")+"-"+c.name)
	}
	createAuthTopics(t, ctx, franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "carol", "carol-secret"), topics...)
	for i, c := range authClients {
		start := time.Now()
		c.run(t, ctx, env.Bootstrap, nil, "SCRAM-SHA-512", "carol", "carol-secret", topics[i], 10)
		t.Logf("%s through terminate mode to a SASL upstream: %v", c.name, time.Since(start).Round(time.Millisecond))
	}
	waitLog(t, env, time.Second, "msg=authenticated ", "principal=User:carol", "mechanism=SCRAM-SHA-512")
	if users := usageUsers(env, model.ProducerByteRate); len(users) != 1 || users["carol"] == nil {
		t.Errorf("producer buckets by user: %v, want carol's (the gateway principal, not the service identity)", users)
	}
}

// What the pass-through listener refuses itself, before the upstream
// sees anything: a mechanism it does not enable (33, listing its own), a
// request before authentication, and SaslHandshake v0.
func TestSASLPassthroughRefusals(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) { saslPassthroughRefusals(t, up) })
}

func saslPassthroughRefusals(t *testing.T, up *testkit.Upstream) {
	enabled := []string{"SCRAM-SHA-512", "SCRAM-SHA-256"}
	env := startPassthrough(t, up, func(c *app.Config) { c.Listeners[0].SASL.Mechanisms = enabled })

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
	createAuthTopics(t, ctxT(t, 20*time.Second), franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "alice", kafka.Users["alice"]), up.Topic(t, "auth-passthrough-refusals"))
	waitLog(t, env, time.Second, "authenticated (pass-through)", "principal=User:alice", "mechanism=SCRAM-SHA-512")
}

// The broker's ACLs through a pass-through listener: alice logs in to the
// broker through the gateway, and an ACL on the broker that denies her
// writing one topic comes back to her client as the broker's
// TOPIC_AUTHORIZATION_FAILED, unchanged, while a topic she may write takes
// her records. (The real cluster's StandardAuthorizer allows everyone on a
// resource with no ACL; kfake's denies, so its row also allows alice the
// rest with a seeded ACL.)
func TestACLErrorsPassedThrough(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) {
		open, denied := up.Topic(t, "acl-open"), up.Topic(t, "acl-denied")
		var extra []kfake.Opt
		if !up.Real() {
			allow := func(res kmsg.ACLResourceType, name string) kfake.ACL {
				return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
			}
			extra = []kfake.Opt{kfake.EnableACLs(), kfake.User("SCRAM-SHA-512", "alice", kafka.Users["alice"],
				allow(kmsg.ACLResourceTypeTopic, open), allow(kmsg.ACLResourceTypeTopic, denied),
				allow(kmsg.ACLResourceTypeCluster, "kafka-cluster"))}
		}
		env := startPassthroughKfake(t, up, extra)
		ctx := ctxT(t, 60*time.Second)

		// As the broker's super user, straight to the broker.
		adminOpts := []kgo.Opt{kgo.SeedBrokers(env.UpstreamAddrs()...), kgo.SASL(franzMechanism("SCRAM-SHA-256", "admin", kafka.Users["admin"]))}
		if up.Real() {
			adminOpts = up.Kafka.AdminOpts()
		}
		adm := kadm.NewClient(franzClient(t, adminOpts...))
		if _, err := adm.CreateTopics(ctx, 1, -1, nil, open, denied); err != nil {
			t.Fatal(err)
		}
		acl := kadm.NewACLs().Topics(denied).ResourcePatternType(kadm.ACLPatternLiteral).
			Deny("User:alice").DenyHosts("*").Operations(kadm.OpWrite)
		res, err := adm.CreateACLs(ctx, acl)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL: %v", r.Err)
			}
		}

		alice := franzOpts(env.Bootstrap, nil, "SCRAM-SHA-512", "alice", kafka.Users["alice"])
		cl := franzClient(t, append(alice, kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(20*time.Second))...)
		// The ACL reaches every broker's authorizer from the metadata log.
		deadline := time.Now().Add(20 * time.Second)
		for {
			err = cl.ProduceSync(ctx, &kgo.Record{Topic: denied, Value: []byte("no")}).FirstErr()
			if errors.Is(err, kerr.TopicAuthorizationFailed) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice writing %s, which an ACL denies her: %v, want TOPIC_AUTHORIZATION_FAILED", denied, err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: open, Value: []byte("yes")}).FirstErr(); err != nil {
			t.Fatalf("alice writing %s: %v", open, err)
		}
	})
}
