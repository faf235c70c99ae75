package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The attacks table. Tollgate is its tenants' trust boundary: every input
// that crosses it has a row here — what the attacker sends, over real
// sockets, what they get (a refusal, never a grant), and the proof that
// nothing was granted, leaked or left growing. Each row names the point of
// the issue "A hostile tenant gets nothing" it closes.
var attacks = []struct {
	name  string
	point string
	run   func(t *testing.T)
}{
	{"pass-through OAUTHBEARER: a forged token the broker challenged is no login", "1", attackForgedOAuthToken},
	{"pass-through OAUTHBEARER: the token the broker finally accepted is the one bound", "1", attackOAuthSecondToken},
	{"pass-through SCRAM: only the server-final message completes a login", "1", attackScramPassthrough},
	{"pass-through: a login whose principal cannot be read is refused, never ANONYMOUS", "2", attackUnreadableIdentity},
	// Point 3, the admin HTTP port: TestAttacksAdminHTTP (attacks_http_test.go), one row per attack.
	// Point 4, memory per connection: internal/proxy/limits_test.go's TestLocalAnswersHoldInFlightSlots,
	// TestFrameBeforeLoginCapped and TestResponseCapped (a synctest bubble shows the reader stop exactly).
	{"a frame larger than 512 KiB before the SASL login closes the connection at its size", "4", attackPreLoginFrame},
	// Point 5: TestIdleConnectionClosed and TestHandshakeTimeout (internal/proxy), to the nanosecond.
	{"a PROXY header from a peer that is not a trusted proxy is refused", "6", attackUntrustedProxy},
	{"audit: a flood of failed logins and denied alterations is a few events, and holds up no change", "7", attackAuditFlood},
	{"audit: the file rotates by size without losing or splitting an event", "7", attackAuditRotation},
	{"audit: the topic sink reaches an upstream that requires TLS and SASL", "7", attackAuditTopicSecured},
	// Point 8, state keyed by client-chosen strings: internal/quota's bounded-state tests (caps, CLOCK
	// eviction that spares throttled buckets, idle expiry) and bench/cardinality (a million client-ids).
	{"DescribeUserScramCredentials: a tenant cannot list who can log in", "9", attackListUsers},
	{"reload: a removed admin, user or API key stops working at once; a reload that cannot apply changes nothing", "10", attackRevokedLive},
	{"a SCRAM user deleted or an API key revoked through the API loses its open connections", "10", attackWithdrawnThroughAPI},
	{"SCRAM: an unknown user is shown a salt like the real users', the same after a restart", "11", attackUserEnumeration},
	{"SASL: an address that failed too many logins is refused, others are not", "11", attackPasswordGuessing},
	{"pass-through SASL: the broker's refusals count against the address's failed-login limit too", "11", attackPassthroughPasswordGuessing},
	{"a share-group consumer (ShareFetch) is held to consumer_byte_rate", "12", attackShareFetchQuota},
	{"a share-group consumer (ShareFetch) is held to a per-topic consumer_byte_rate", "12", attackShareFetchTopicQuota},
	{"controller_mutation_rate: topics deleted by id are charged their partitions, as by name", "12", attackDeleteTopicsByID},
	// Tollgate's own topics on the upstream (audit.topic, usage.topic; attacks_reserved_test.go).
	{"Tollgate's topics: a tenant's produce to the audit topic is refused, by name, by id, streamed", "own-topics", onEachUpstream(attackProduceOwnTopic)},
	{"Tollgate's topics: a tenant cannot fetch the audit topic (consumer, Fetch by name and id, ShareFetch, offsets)", "own-topics", onEachUpstream(attackFetchOwnTopic)},
	{"Tollgate's topics: listing topics shows none of them; naming one is refused", "own-topics", onEachUpstream(attackListOwnTopics)},
	{"Tollgate's topics: not deleted, recreated, grown, reconfigured, truncated or committed to, even by the quota admin", "own-topics", onEachUpstream(attackMutateOwnTopics)},
	{"Tollgate cluster: a tenant's forged quota record never reaches the shared configuration topic, nor is the topic or the exchange readable", "own-topics", onEachUpstream(attackClusterConfigTopic)},
	// The clients' telemetry, KIP-714 (attacks_telemetry_test.go; issue 17 point 2).
	{"telemetry: a flood of instances and client-ids, bombs and another tenant's instance id: Kafka's answers, the caps held, the victim undisturbed", "telemetry", attackTelemetryFlood},
	// The last ways around (issue 23).
	{"a client that pipelines requests and reads no answer is closed (write_timeout); nothing stays, others are served", "23.3", onEachUpstream(attackStalledReader)},
	{"request_percentage: what Tollgate answers itself (DescribeClientQuotas) is charged and throttled", "23.1", attackLocalAnswersCharged},
	{"topics by id fail closed: a recreated own topic's new id, an unknown id, an own topic added to a fetch session", "23.5", onEachUpstream(attackOwnTopicIDs)},
	{"Tollgate cluster: forged records and reports (an admin's API key, copies, 40 instances) are refused and counted", "23.2", onEachUpstream(attackForgedClusterRecords)},
	{"20 connections each send 99 % of a 100 MiB frame: the gateway holds no more than socket.queued_max_request_bytes; others produce and consume", "23.4", onEachUpstream(attackRequestMemory)},
	// Point 13, an acceptor helper alive but not accepting: TestAcceptorProcessStalledGatewayAccepts
	// (acceptor_test.go; serial, it stops this test binary's child with SIGSTOP).
}

// onEachUpstream runs an attack once per upstream (testkit.EachUpstream).
func onEachUpstream(f func(*testing.T, *testkit.Upstream)) func(*testing.T) {
	return func(t *testing.T) { testkit.EachUpstream(t, f) }
}

func TestAttacks(t *testing.T) {
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			t.Logf("issue point %s", a.point)
			a.run(t)
		})
	}
}

// startStandIn runs a SASL pass-through listener in front of the
// SASLBroker stand-in (testkit/saslbroker.go: Kafka's
// SaslServerAuthenticator with its PLAIN, SCRAM and OAUTHBEARER servers),
// which kfake cannot play. svc is Tollgate's own identity; alice a tenant;
// admin the quota admin. Valid OAUTHBEARER tokens are aliceToken and
// adminToken.
func startStandIn(t *testing.T, edit ...func(*app.Config)) (*testkit.Env, *testkit.SASLBroker) {
	t.Helper()
	br := testkit.StartSASLBroker(t,
		map[string]string{"svc": "svc-secret", "alice": "alice-secret", "admin": "admin-secret"},
		map[string]string{aliceToken: "alice", adminToken: "admin"})
	env := testkit.Start(t, app.Options{}, append([]func(*app.Config){func(c *app.Config) {
		c.Upstream.Bootstrap = []string{br.Addr()}
		c.Upstream.SASL = &app.UpstreamSASL{Mechanism: "PLAIN", Username: "svc", Password: "svc-secret"}
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.Listeners[0].SASL.Mode = "passthrough"
		c.Listeners[0].SASL.Mechanisms = []string{"OAUTHBEARER", "SCRAM-SHA-256", "PLAIN"}
		c.Listeners[0].SASL.FailedAuthenticationDelay = time.Millisecond
		c.Authorization.QuotaAdmins = []string{"admin"}
	}}, edit...)...)
	return env, br
}

// jwt is an unsecured JWT (header.payload. with no signature) with the
// given claims: what an attacker can mint for any subject.
func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

var (
	aliceToken = jwt(`{"sub":"alice","iss":"idp"}`) // accepted by the stand-in
	adminToken = jwt(`{"sub":"admin","iss":"idp"}`) // accepted by the stand-in
)

// oauthInitial is an OAUTHBEARER client initial response (RFC 7628).
func oauthInitial(token string) []byte {
	return []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
}

// alterVictimQuota is AlterClientQuotas setting user victim's
// producer_byte_rate to 1 B/s: what an attacker acting as a quota admin
// would do to a neighbour.
func alterVictimQuota() *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("victim")}}
	e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1}}
	req.Entries = append(req.Entries, e)
	return req
}

// noQuotaGranted fails if any quota was set (the attacks target victim).
func noQuotaGranted(t *testing.T, env *testkit.Env) {
	t.Helper()
	q := env.App.Engine().Quotas()
	if n := q.Len(); n != 0 {
		t.Fatalf("the attack changed the quotas: %d entities now (%v)", n, q.Entities())
	}
}

// Kafka's OAuthBearerSaslServer answers an invalid token with error 0 and
// an error challenge, failing only when the client sends %x01 next. An
// attacker who mints a token for the quota admin and then, instead of
// %x01, acts as the admin gets the connection closed: the login never
// completed.
func attackForgedOAuthToken(t *testing.T) {
	env, br := startStandIn(t)
	forged := oauthInitial(jwt(`{"sub":"admin"}`)) // not signed by the broker's IdP

	rc := dialRaw(t, env.Bootstrap)
	if hs := rc.handshake(t, 1, "OAUTHBEARER"); hs.ErrorCode != 0 {
		t.Fatalf("SaslHandshake OAUTHBEARER: error %d", hs.ErrorCode)
	}
	ar := rc.authenticate(t, 1, forged)
	if ar.ErrorCode != 0 || !strings.Contains(string(ar.SASLAuthBytes), "invalid_token") {
		t.Fatalf("the broker's answer to a forged token: error %d, %q; want error 0 and its error challenge", ar.ErrorCode, ar.SASLAuthBytes)
	}
	if resp, err := rc.roundTrip(alterVictimQuota()); err == nil {
		t.Fatalf("a forged token altered quotas: %+v", resp)
	}
	rc.expectClosed(t, "a request after the challenge")
	noQuotaGranted(t, env)

	// The client that answers the challenge with %x01 gets the broker's
	// failure, as from Kafka, and is closed.
	rc = dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "OAUTHBEARER")
	rc.authenticate(t, 1, forged)
	if ar := rc.authenticate(t, 1, []byte{0x01}); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("%%x01 after the challenge: error %d, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode)
	}
	rc.expectClosed(t, "after the broker's failure")

	if ls := logLines(env, "authenticated (pass-through)"); len(ls) > 0 {
		t.Fatalf("a forged token was bound:\n%s", strings.Join(ls, "\n"))
	}
	if got := br.Logins(); slices.Contains(got, "admin") {
		t.Fatalf("the broker logged in admin: %v", got)
	}

	// The real admin's token is a login (the row would pass vacuously
	// if nothing could alter quotas).
	rc = dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "OAUTHBEARER")
	if ar := rc.authenticate(t, 1, oauthInitial(adminToken)); ar.ErrorCode != 0 || len(ar.SASLAuthBytes) != 0 {
		t.Fatalf("admin's valid token: error %d, %q", ar.ErrorCode, ar.SASLAuthBytes)
	}
	resp, err := rc.roundTrip(alterVictimQuota())
	if err != nil {
		t.Fatalf("the admin's AlterClientQuotas: %v", err)
	}
	if code := resp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode; code != 0 {
		t.Fatalf("the admin's AlterClientQuotas: error %d", code)
	}
	waitLog(t, env, 2*time.Second, "authenticated (pass-through)", "principal=User:admin", "mechanism=OAUTHBEARER")
}

// After an error challenge Kafka's server evaluates any message but %x01
// as a new token. An attacker who sends a token for admin, then their own
// valid token, is logged in — as themselves: the identity bound is the
// one the broker accepted.
func attackOAuthSecondToken(t *testing.T) {
	env, _ := startStandIn(t)
	rc := dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "OAUTHBEARER")
	if ar := rc.authenticate(t, 1, oauthInitial(jwt(`{"sub":"admin"}`))); ar.ErrorCode != 0 || len(ar.SASLAuthBytes) == 0 {
		t.Fatalf("forged token: error %d, %q; want the error challenge", ar.ErrorCode, ar.SASLAuthBytes)
	}
	if ar := rc.authenticate(t, 1, oauthInitial(aliceToken)); ar.ErrorCode != 0 || len(ar.SASLAuthBytes) != 0 {
		t.Fatalf("alice's valid token after the challenge: error %d, %q", ar.ErrorCode, ar.SASLAuthBytes)
	}
	resp, err := rc.roundTrip(alterVictimQuota())
	if err != nil {
		t.Fatalf("AlterClientQuotas as alice: %v", err)
	}
	if code := resp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice (not an admin) altering quotas: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	noQuotaGranted(t, env)
	waitLog(t, env, 2*time.Second, "authenticated (pass-through)", "principal=User:alice", "mechanism=OAUTHBEARER")
	if ls := logLines(env, "authenticated (pass-through)", "principal=User:admin"); len(ls) > 0 {
		t.Fatalf("bound as admin:\n%s", strings.Join(ls, "\n"))
	}
}

// SCRAM through the gateway: the server-first message is not a login (a
// request after it closes the connection); the server-final one is; a bad
// proof is the broker's failure.
func attackScramPassthrough(t *testing.T) {
	env, _ := startStandIn(t)

	// server-first, then a request instead of the client-final message.
	rc := dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "SCRAM-SHA-256")
	conv := scramConversation(t, "SCRAM-SHA-256", "admin", "wrong")
	first, _ := conv.Step("")
	if ar := rc.authenticate(t, 1, []byte(first)); ar.ErrorCode != 0 || !strings.HasPrefix(string(ar.SASLAuthBytes), "r=") {
		t.Fatalf("server-first: error %d, %q", ar.ErrorCode, ar.SASLAuthBytes)
	}
	if resp, err := rc.roundTrip(alterVictimQuota()); err == nil {
		t.Fatalf("after only the server-first message, AlterClientQuotas was answered: %+v", resp)
	}
	rc.expectClosed(t, "a request after server-first")

	// A wrong password: the broker fails the proof.
	rc = dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "SCRAM-SHA-256")
	conv = scramConversation(t, "SCRAM-SHA-256", "admin", "wrong")
	first, _ = conv.Step("")
	ar := rc.authenticate(t, 1, []byte(first))
	final, _ := conv.Step(string(ar.SASLAuthBytes))
	if ar := rc.authenticate(t, 1, []byte(final)); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: error %d, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode)
	}
	rc.expectClosed(t, "after a failed proof")
	noQuotaGranted(t, env)
	if ls := logLines(env, "authenticated (pass-through)"); len(ls) > 0 {
		t.Fatalf("a failed SCRAM login was bound:\n%s", strings.Join(ls, "\n"))
	}

	// The right password: server-final, a login.
	rc = dialRaw(t, env.Bootstrap)
	rc.handshake(t, 1, "SCRAM-SHA-256")
	conv = scramConversation(t, "SCRAM-SHA-256", "alice", "alice-secret")
	first, _ = conv.Step("")
	ar = rc.authenticate(t, 1, []byte(first))
	final, _ = conv.Step(string(ar.SASLAuthBytes))
	if ar := rc.authenticate(t, 1, []byte(final)); ar.ErrorCode != 0 || !strings.HasPrefix(string(ar.SASLAuthBytes), "v=") {
		t.Fatalf("right password: error %d, %q; want the server-final message", ar.ErrorCode, ar.SASLAuthBytes)
	}
	if _, err := rc.roundTrip(kmsg.NewPtrDescribeClientQuotasRequest()); err != nil {
		t.Fatalf("DescribeClientQuotas after a completed SCRAM login: %v", err)
	}
	waitLog(t, env, 2*time.Second, "authenticated (pass-through)", "principal=User:alice", "mechanism=SCRAM-SHA-256")
}

// A login whose principal Tollgate cannot read is answered
// SASL_AUTHENTICATION_FAILED by Tollgate — never forwarded to the broker,
// never bound as ANONYMOUS (which is a quota admin in some configurations).
func attackUnreadableIdentity(t *testing.T) {
	env, br := startStandIn(t, func(c *app.Config) {
		c.Authorization.QuotaAdmins = []string{"admin", "ANONYMOUS"}
	})
	for _, tt := range []struct {
		name, mech string
		msg        []byte
	}{
		{"SCRAM delegation token (tokenauth)", "SCRAM-SHA-256", []byte("n,,n=tokenid,r=abcdef,tokenauth=true")},
		{"SCRAM reserved m= extension", "SCRAM-SHA-256", []byte("n,,m=ext,n=alice,r=abcdef")},
		{"OAUTHBEARER token without the sub claim", "OAUTHBEARER", oauthInitial(jwt(`{"iss":"idp"}`))},
		{"OAUTHBEARER token that is not a JWT", "OAUTHBEARER", oauthInitial("opaque-token")},
		{"PLAIN authorization id of another user", "PLAIN", []byte("admin\x00alice\x00alice-secret")},
	} {
		rc := dialRaw(t, env.Bootstrap)
		rc.handshake(t, 1, tt.mech)
		if ar := rc.authenticate(t, 1, tt.msg); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%s: error %d, want SASL_AUTHENTICATION_FAILED", tt.name, ar.ErrorCode)
		}
		rc.expectClosed(t, tt.name)
	}
	noQuotaGranted(t, env)
	if ls := logLines(env, "authenticated (pass-through)"); len(ls) > 0 {
		t.Fatalf("an unreadable login was bound:\n%s", strings.Join(ls, "\n"))
	}
	if got := br.Logins(); len(got) > 1 { // svc, Tollgate's own metadata client
		t.Fatalf("refused logins reached the broker: %v", got)
	}

	// The claim is a setting (Kafka's sasl.oauthbearer.sub.claim.name).
	env2, _ := startStandIn(t, func(c *app.Config) { c.Listeners[0].SASL.OAuthBearerSubClaimName = "iss" })
	rc := dialRaw(t, env2.Bootstrap)
	rc.handshake(t, 1, "OAUTHBEARER")
	if ar := rc.authenticate(t, 1, oauthInitial(aliceToken)); ar.ErrorCode != 0 {
		t.Fatalf("alice's token with claim iss: error %d", ar.ErrorCode)
	}
	waitLog(t, env2, 2*time.Second, "authenticated (pass-through)", "principal=User:idp")
}

// A client that has not logged in announces a 600 KiB frame: the gateway
// closes the connection on reading the size (it never waits for, or
// allocates, the body); after a login the same size is just a request.
func attackPreLoginFrame(t *testing.T) {
	env, _ := startTerminate(t, map[string]string{"alice": "alice-secret"}, nil)
	rc := dialRaw(t, env.Bootstrap)
	var sz [4]byte
	binary.BigEndian.PutUint32(sz[:], 600<<10)
	if _, err := rc.c.Write(sz[:]); err != nil {
		t.Fatal(err)
	}
	rc.expectClosed(t, "a 600 KiB frame before login")
	waitLog(t, env, 2*time.Second, "reason=frame_too_large", "remote="+rc.c.LocalAddr().String())

	// Logged in, a 600 KiB record is produced as usual.
	ctx := ctxT(t, 20*time.Second)
	cl := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"),
		kgo.DefaultProduceTopic("big-after-login"), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(1<<20))...)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 600<<10)}).FirstErr(); err != nil {
		t.Fatalf("a 600 KiB record after login: %v", err)
	}
}

// Behind a load balancer only the balancer may say where a connection
// comes from. An attacker who reaches the port directly and claims, in a
// PROXY header, an address whose principals_by_cidr principal is a quota
// admin gets the connection closed; the balancer's connections are served.
// A listener with proxy_protocol and no trusted list does not start.
func attackUntrustedProxy(t *testing.T) {
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Listeners[0].ProxyProtocol = true
		c.Listeners[0].ProxyProtocolTrustedCIDRs = []string{"127.0.0.2"} // the load balancer
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{{CIDR: "10.0.0.0/8", Principal: "ops"}}
		c.Authorization.QuotaAdmins = []string{"ops"}
	})
	ctx := ctxT(t, 10*time.Second)
	attacker := dialRawVia(t, ctx, dialFunc(proxyDialerFrom("127.0.0.1", "10.0.0.9:5000", 2)), env.Bootstrap)
	if resp, err := attacker.roundTrip(alterVictimQuota()); err == nil {
		t.Fatalf("a PROXY header from an untrusted peer was believed: %+v", resp)
	}
	waitLog(t, env, 2*time.Second, "reason=untrusted_proxy")
	noQuotaGranted(t, env)

	// The balancer's header is believed (the row would pass vacuously if
	// nobody could alter quotas through the listener).
	lb := dialRawVia(t, ctx, dialFunc(proxyDialerFrom("127.0.0.2", "10.0.0.9:5001", 2)), env.Bootstrap)
	resp, err := lb.roundTrip(alterVictimQuota())
	if err != nil {
		t.Fatalf("through the trusted balancer: %v", err)
	}
	if code := resp.(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode; code != 0 {
		t.Fatalf("ops through the trusted balancer: error %d", code)
	}

	cfg := app.Default()
	cfg.Listeners[0].ProxyProtocol = true
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "proxy_protocol_trusted_cidrs") {
		t.Fatalf("a PROXY listener without trusted peers: %v, want a refusal naming proxy_protocol_trusted_cidrs", err)
	}
}

// dialFunc adapts a dial function to dialRawVia.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// KIP-932 share groups fetch with ShareFetch, not Fetch: a tenant that
// switches its consumers to a share group must not escape
// consumer_byte_rate. The share consumer's responses are charged to it and
// throttled.
func attackShareFetchQuota(t *testing.T) {
	const rate = 16 << 10 // start-up burst Q·(N−1)·W = 160 KiB
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: kmsg.StringPtr("ANONYMOUS"), ConsumerByteRate: ptrF(rate)}}
	})
	shareFetchThrottled(t, env, "share-quota", "no consumer_byte_rate bucket of ANONYMOUS was", func(u quota.Usage) bool {
		return u.Key == model.ConsumerByteRate && u.User == "ANONYMOUS" && u.Quota == rate
	})
}

// shareFetchThrottled has a share-group consumer (KIP-932) read random
// 64 KiB records from topic while they are produced, until a bucket that
// matches is charged and throttles it, or five records (twice a 16 KiB/s
// quota's burst) came through without: then it fails, naming what.
func shareFetchThrottled(t *testing.T, env *testkit.Env, topic, what string, bucket func(quota.Usage) bool) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	d := &testkit.Dialer{}
	prod := newClient(t, env, d, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("create")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A share group starts at the latest offset: produce while it consumes.
	share := newClient(t, env, d, kgo.ShareGroup(topic+"-g"), kgo.ConsumeTopics(topic))
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for i := 0; i < 200 && pctx.Err() == nil; i++ {
			v := make([]byte, 64<<10)
			rand.Read(v) // incompressible: the bytes on the wire are the bytes charged
			prod.ProduceSync(pctx, &kgo.Record{Value: v})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	throttled := func() bool {
		for _, u := range env.App.Engine().Usage(time.Now()) {
			if bucket(u) && u.Rate > 0 && u.Throttles > 0 {
				return true
			}
		}
		return false
	}
	got := 0
	for got < 5 && ctx.Err() == nil && !throttled() {
		fs := share.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) == 64<<10 {
				got++
			}
		})
	}
	stop()
	if got == 0 {
		t.Fatal("the share consumer received nothing")
	}
	if !throttled() {
		t.Fatalf("after %d share-fetched records of 64 KiB (random), %s charged and throttled: %+v", got, what, env.App.Engine().Usage(time.Now()))
	}
}

// A tenant under controller_mutation_rate deletes topics by id
// (DeleteTopics v6+) instead of by name: it is charged each topic's
// partitions all the same, as Kafka's controller charges them. Three
// topics of 30 partitions, a quota of 1 partition/s (a burst of ~10):
// the first delete passes and takes the bucket below zero, the second is
// refused with THROTTLING_QUOTA_EXCEEDED and its topic still exists.
func attackDeleteTopicsByID(t *testing.T) {
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{ClientID: kmsg.StringPtr("evader"), ControllerMutationRate: ptrF(1)}}
	})
	ctx := ctxT(t, 30*time.Second)
	d := &testkit.Dialer{}
	setupClient := newClient(t, env, d, kgo.ClientID("setup"))
	setup := kadm.NewClient(setupClient)
	topics := []string{"by-id-1", "by-id-2", "by-id-3"}
	created, err := setup.CreateTopics(ctx, 30, 1, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	evader := newClient(t, env, d, kgo.ClientID("evader"))
	deleteByID := func(topic string) int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = created[topic].ID
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, evader)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].TopicID != created[topic].ID {
			t.Fatalf("DeleteTopics of %s by id: answer %+v", topic, resp.Topics)
		}
		return resp.Topics[0].ErrorCode
	}
	if code := deleteByID("by-id-1"); code != 0 {
		t.Fatalf("the first delete by id: error %d, want 0 (the bucket is not below zero)", code)
	}
	if code := deleteByID("by-id-2"); code != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("the second delete by id, 30 partitions past the quota: error %d, want THROTTLING_QUOTA_EXCEEDED (89)", code)
	}
	// A fresh Metadata request (kadm's ListTopics may answer from the
	// client's metadata cache).
	md := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		md.Topics = append(md.Topics, rt)
	}
	resp, err := md.RequestWith(ctx, setupClient)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, tp := range resp.Topics {
		if tp.ErrorCode == 0 {
			left = append(left, *tp.Topic)
		}
	}
	slices.Sort(left)
	if want := []string{"by-id-2", "by-id-3"}; !slices.Equal(left, want) {
		t.Errorf("topics left %v, want %v", left, want)
	}
}

// Password guessing through a pass-through listener: the broker judges
// the passwords, Tollgate counts its refusals per source address (the
// same authentication.failed_logins_per_ip as terminated logins), and an
// address over the limit is refused at its first SaslAuthenticate —
// before the broker sees it, the right password included — while another
// address logs in.
func attackPassthroughPasswordGuessing(t *testing.T) {
	env, br := startStandIn(t, func(c *app.Config) {
		c.Authentication.FailedLoginsPerIP = 3
		c.Authentication.FailedLoginWindow = time.Hour
	})
	plainLogin := func(pass string) (int16, string) {
		rc := dialRaw(t, env.Bootstrap)
		if hs := rc.handshake(t, 1, "PLAIN"); hs.ErrorCode != 0 {
			t.Fatalf("handshake: %d", hs.ErrorCode)
		}
		ar := rc.authenticate(t, 1, []byte("\x00alice\x00"+pass))
		msg := ""
		if ar.ErrorMessage != nil {
			msg = *ar.ErrorMessage
		}
		return ar.ErrorCode, msg
	}
	for i := range 3 {
		if code, msg := plainLogin(fmt.Sprint("guess-", i)); code != kerr.SaslAuthenticationFailed.Code || msg != "Authentication failed: Invalid username or password" {
			t.Fatalf("guess %d: error %d %q, want the broker's refusal", i, code, msg)
		}
	}
	const limited = "Authentication failed: too many failed logins from this address, try again later"
	if code, msg := plainLogin("alice-secret"); code != kerr.SaslAuthenticationFailed.Code || msg != limited {
		t.Errorf("the right password after 3 failures: error %d %q, want %q", code, msg, limited)
	}
	if got := br.Logins(); slices.Contains(got, "alice") { // svc is Tollgate's own
		t.Errorf("the broker completed logins %v: alice's from the limited address", got)
	}
	if n := scrapeMetric(t, env, "tollgate_authentication_rate_limited_total"); n != 1 {
		t.Errorf("tollgate_authentication_rate_limited_total = %v, want 1", n)
	}
	if n := scrapeMetric(t, env, "tollgate_authentication_failures_total"); n != 4 {
		t.Errorf("tollgate_authentication_failures_total = %v, want 4 (3 by the broker, 1 limited)", n)
	}
	other := franzClient(t, append(franzOpts(env.Bootstrap, nil, "PLAIN", "alice", "alice-secret"), kgo.Dialer(fromIP("127.0.0.2")))...)
	if err := other.Ping(ctxT(t, 20*time.Second)); err != nil {
		t.Fatalf("alice from 127.0.0.2: %v", err)
	}
	if got := br.Logins(); !slices.Contains(got, "alice") {
		t.Errorf("the broker's logins %v, want alice's from 127.0.0.2", got)
	}
}

// A share-group consumer (KIP-932's ShareFetch, topics by id) reading a
// topic with a per-topic consumer_byte_rate is charged on that topic's
// bucket and throttled by it, as a Fetch is: share groups are no way
// around a per-topic quota.
func attackShareFetchTopicQuota(t *testing.T) {
	const rate = 16 << 10 // start-up burst Q·(N−1)·W = 160 KiB
	const topic = "share-topic-quota"
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{Topic: kmsg.StringPtr(topic), ConsumerByteRate: ptrF(rate)}}
	})
	shareFetchThrottled(t, env, topic, "the topic's consumer_byte_rate bucket was not", func(u quota.Usage) bool {
		return u.Key == model.ConsumerByteRate && u.Topic == topic && !u.TopicPrefix && u.Quota == rate
	})
}

// attackStalledReader: a client pipelines requests — ApiVersions and
// Metadata — and reads none of the answers, its receive window full (a
// 4 KiB receive buffer). Before the fix the gateway blocked writing to it
// with no deadline (the issue measured a connection still open 25 s after
// 200 000 pipelined ApiVersions with a 3 s idle time): the session, its
// goroutines, its upstream connection and its buffers stayed. Now a write
// that makes no progress for socket.connections_max_idle closes it
// (write_timeout; TestStalledReaderClosed in internal/proxy pins that
// path). Over loopback the kernel's buffers can take megabytes of answers
// first, and the stalled client's own TCP then backs off so far that the
// gateway hears nothing for the idle time and closes it as idle_timeout:
// either way it is closed. The stalled client has a listener of its own,
// so the close counts are its alone; a well-behaved client on the other
// is served meanwhile.
func attackStalledReader(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Socket.ConnectionsMaxIdle = 2 * time.Second
		c.Listeners = append(c.Listeners, proxy.ListenerConfig{Name: "STALL", Bootstrap: "127.0.0.1:0"})
	})
	good := franzClient(t, kgo.SeedBrokers(env.Bootstrap))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := good.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	closed := func() (n float64, reasons string) {
		for _, r := range []proxy.Reason{proxy.ReasonWriteTimeout, proxy.ReasonIdle} {
			v := scrapeMetricOr(t, env, `tollgate_connections_closed_total{listener="STALL",reason="`+string(r)+`"}`, 0)
			n += v
			reasons += fmt.Sprintf(" %s=%v", r, v)
		}
		return n, reasons
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "stalled", "1.0"
	for i, req := range []kmsg.Request{av, kmsg.NewPtrMetadataRequest()} {
		name := kmsg.NameForKey(req.Key())
		req.SetVersion(3)
		c, err := net.DialTimeout("tcp", env.App.Gateway().BootstrapAddrs()["STALL"], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4096)
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("stalled")).AppendRequest(nil, req, 1)
		go func() {
			c.SetWriteDeadline(time.Now().Add(45 * time.Second))
			for range 200_000 {
				if _, err := c.Write(frame); err != nil {
					return // closed by the gateway (or the deadline)
				}
			}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, reasons := closed()
			if n >= float64(i+1) {
				t.Logf("%s: the stalled client closed:%s", name, reasons)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: a client that read nothing for 30 s is not closed (idle time 2 s); %d sessions on its listener; %s",
					name, env.App.Gateway().SessionsByListener()["STALL"], closeReasons(t, env))
			}
			if err := good.Ping(ctx); err != nil {
				t.Fatalf("%s: the well-behaved client, while the stalled one holds its session: %v", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Nothing stays.
		waitUntil(t, name+": the stalled session gone", 50*time.Millisecond, 10*time.Second, func() bool {
			return env.App.Gateway().SessionsByListener()["STALL"] == 0
		})
	}
}

// closeReasons is the exposed tollgate_connections_closed_total samples.
func closeReasons(t *testing.T, env *testkit.Env) string {
	var out []string
	for _, l := range strings.Split(scrapeAll(t, env), "\n") {
		if strings.HasPrefix(l, "tollgate_connections_closed_total{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// attackRequestMemory: 20 connections each declare a 100 MiB Metadata frame,
// send 99 % of it and stop. A frame's buffer is taken at its declared size,
// so before the budget the gateway grew by 20 × 100 MiB (the issue
// measured 242 MiB for four). With socket.queued_max_request_bytes (256 MiB
// by default) two frames are held, the others wait unread in the sockets'
// buffers, and a well-behaved client keeps producing and consuming.
func attackRequestMemory(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	gw := env.App.Gateway()
	topic := up.Topic(t, "membudget")
	good := franzClient(t, kgo.SeedBrokers(env.Bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r, err := kadm.NewClient(good).CreateTopic(ctx, 1, -1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, r.Err)
	}
	env.WaitTopic(t, topic, 1)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	const n, size = 20, 104857600 - 4 // the largest frame socket.request_max_bytes allows
	for range n {
		c, err := net.DialTimeout("tcp", env.Bootstrap, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.SetWriteDeadline(time.Now().Add(90 * time.Second))
			head := make([]byte, 4, 4+64<<10)
			binary.BigEndian.PutUint32(head, size)
			head = binary.BigEndian.AppendUint16(head, uint16(kmsg.Metadata))
			head = append(head, make([]byte, 64<<10-2)...)
			if _, err := c.Write(head); err != nil {
				return
			}
			chunk := make([]byte, 1<<20)
			for sent := 64 << 10; sent < size*99/100; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return // closed, or our deadline
				}
			}
		}()
	}
	_, budget, _ := gw.RequestMemory()
	if budget != proxy.DefaultQueuedMaxRequestBytes {
		t.Fatalf("budget %d, want the default %d", budget, proxy.DefaultQueuedMaxRequestBytes)
	}
	var peak int64
	waitUntil(t, "18 of the 20 frames waiting for memory", 50*time.Millisecond, time.Minute, func() bool {
		inUse, _, waits := gw.RequestMemory()
		peak = max(peak, inUse)
		return waits >= n-2
	})
	// The well-behaved client produces and consumes meanwhile.
	for i := range 20 {
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d while the frames wait: %v", i, err)
		}
	}
	for got := 0; got < 20; {
		fs := good.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume while the frames wait: %v", err)
		}
		got += fs.NumRecords()
		inUse, _, _ := gw.RequestMemory()
		peak = max(peak, inUse)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("request memory peak %d MiB of %d MiB; heap grew %d MiB with %d frames of 100 MiB open", peak>>20, budget>>20, grew>>20, n)
	if peak > budget {
		t.Fatalf("request frames held %d bytes, over the budget %d", peak, budget)
	}
	// The heap is the test binary's, shared with the tests running in
	// parallel: the bound is loose, but 20 frames held would be 2 GiB.
	if grew > 1<<30 {
		t.Fatalf("the heap grew %d MiB with a budget of %d MiB", grew>>20, budget>>20)
	}
}

// What Tollgate answers itself is charged (issue 23 point 1). A client
// held to request_percentage=1 asks DescribeClientQuotas — answered by the
// control plane, never by the broker — as fast as it can: the time the
// gateway spends answering is charged as the broker's would be, so its
// answers come throttled (and the connection muted) within a few thousand
// requests. Before, none ever was.
func attackLocalAnswersCharged(t *testing.T) {
	pct := 1.0
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{ClientID: kmsg.StringPtr("tollgate-e2e-raw"), RequestPercentage: &pct}}
	})
	ctx := ctxT(t, 60*time.Second)
	c := dialRawVia(t, ctx, &net.Dialer{}, env.Bootstrap)
	const most = 2_000_000
	deadline := time.Now().Add(40 * time.Second)
	for i := 1; i <= most && time.Now().Before(deadline); i++ {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Version = 1
		resp := c.do(t, req).(*kmsg.DescribeClientQuotasResponse)
		if resp.ThrottleMillis > 0 {
			t.Logf("throttled %d ms at request %d", resp.ThrottleMillis, i)
			return
		}
	}
	t.Errorf("%d DescribeClientQuotas at request_percentage=1 were never throttled", most)
}
