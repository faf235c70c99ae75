package e2e

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
)

// Failed and malformed logins on a terminating SASL_PLAINTEXT listener,
// driven with raw requests. Each case checks what the client sees; a good
// client produces during every failed login's delay and after every case;
// the failures are counted in tollgate_authentication_failures_total and
// audited with the source address and no user name.
// failDelay is TestAuthFailures' failed_authentication_delay.
const failDelay = 1500 * time.Millisecond

func TestAuthFailures(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env, _ := startTerminate(t, map[string]string{"alice": "alice-secret"}, nil, func(c *app.Config) {
		c.DataDir = dataDir
		c.Audit.AggregateInterval = 200 * time.Millisecond
		// Long enough that a good client's produce, started with a failed
		// login, ends before the failure is answered: a failed login's
		// delay holds its own connection only.
		c.Listeners[0].SASL.FailedAuthenticationDelay = failDelay
	})
	ctx := ctxT(t, 60*time.Second)
	const topic = "auth-failures"
	goodOpts := franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret")
	createAuthTopics(t, ctx, goodOpts, topic)
	good := franzClient(t, append(goodOpts, kgo.DefaultProduceTopic(topic))...)
	goodProduce := func(t *testing.T, what string) {
		t.Helper()
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte(what)}).FirstErr(); err != nil {
			t.Errorf("good client, %s: %v", what, err)
		}
	}
	goodProduce(t, "before")

	type failure struct{ source, message string }
	var failures []failure // every answer 58, in order

	// failAuth sends a SaslAuthenticate the gateway must refuse: it must
	// answer 58 no sooner than the failed-authentication delay, then close.
	// The good client produces meanwhile, and is answered first.
	failAuth := func(t *testing.T, rc *rawConn, req *kmsg.SASLAuthenticateRequest, what string) string {
		t.Helper()
		var wg sync.WaitGroup
		start := time.Now()
		if err := rc.send(req); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		produced := make(chan struct{})
		wg.Add(1)
		go func() { defer wg.Done(); goodProduce(t, "during "+what); close(produced) }()
		resp, err := rc.recv(req)
		took := time.Since(start)
		select {
		case <-produced:
		default:
			t.Errorf("%s: the good client's produce was still waiting when the failed login was answered %v later: the delay held another connection", what, took.Round(time.Millisecond))
		}
		wg.Wait()
		if err != nil {
			t.Fatalf("%s: no SaslAuthenticate response: %v", what, err)
		}
		r := resp.(*kmsg.SASLAuthenticateResponse)
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		t.Logf("%s: error %d %q after %v", what, r.ErrorCode, msg, took.Round(time.Millisecond))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%s: error %d, want SASL_AUTHENTICATION_FAILED (58)", what, r.ErrorCode)
		}
		if took < failDelay {
			t.Errorf("%s: answered after %v, want at least the failed-authentication delay (%v)", what, took, failDelay)
		}
		if strings.Contains(msg, "alice") || strings.Contains(msg, "mallory") {
			t.Errorf("%s: the message names the user: %q", what, msg)
		}
		rc.expectClosed(t, what)
		failures = append(failures, failure{rc.c.LocalAddr().String(), msg})
		return msg
	}
	plainHandshake := func(t *testing.T, mech string) *rawConn {
		t.Helper()
		rc := dialRaw(t, env.Bootstrap)
		if hs := rc.handshake(t, 1, mech); hs.ErrorCode != 0 {
			t.Fatalf("SaslHandshake v1 %s: error %d", mech, hs.ErrorCode)
		}
		return rc
	}

	t.Run("PLAIN wrong password and unknown user", func(t *testing.T) {
		wrong := failAuth(t, plainHandshake(t, "PLAIN"), saslAuthenticate(1, []byte("\x00alice\x00wrong")), "PLAIN wrong password")
		unknown := failAuth(t, plainHandshake(t, "PLAIN"), saslAuthenticate(1, []byte("\x00mallory\x00alice-secret")), "PLAIN unknown user")
		if wrong != unknown || wrong == "" {
			t.Errorf("PLAIN: wrong password answered %q, unknown user %q; want one non-empty message", wrong, unknown)
		}
		goodProduce(t, "after PLAIN failures")
	})

	t.Run("SCRAM wrong password and unknown user", func(t *testing.T) {
		var msgs []string
		for _, c := range []struct{ user, pass string }{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
			what := "SCRAM-SHA-256 " + map[string]string{"alice": "wrong password", "mallory": "unknown user"}[c.user]
			rc := plainHandshake(t, "SCRAM-SHA-256")
			conv := scramConversation(t, "SCRAM-SHA-256", c.user, c.pass)
			first, _ := conv.Step("")
			sf := rc.authenticate(t, 2, []byte(first))
			// An unknown user is shown a salt and iteration count like a
			// real one's: the exchange only fails at the proof.
			if sf.ErrorCode != 0 || !strings.Contains(string(sf.SASLAuthBytes), ",s=") || !strings.HasSuffix(string(sf.SASLAuthBytes), ",i=4096") {
				t.Fatalf("%s: server-first: error %d %q", what, sf.ErrorCode, sf.SASLAuthBytes)
			}
			final, err := conv.Step(string(sf.SASLAuthBytes))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			msgs = append(msgs, failAuth(t, rc, saslAuthenticate(2, []byte(final)), what))
		}
		if msgs[0] != msgs[1] || msgs[0] == "" {
			t.Errorf("SCRAM: wrong password answered %q, unknown user %q; want one non-empty message", msgs[0], msgs[1])
		}
		goodProduce(t, "after SCRAM failures")
	})

	t.Run("truncated SCRAM exchange", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			final func(real string) string
		}{
			{"short client-final", func(string) string { return "c=biws" }},
			{"client-final cut in half", func(real string) string { return real[:len(real)/2] }},
			{"garbage client-final", func(string) string { return "\xff\x00garbage" }},
		} {
			rc := plainHandshake(t, "SCRAM-SHA-256")
			conv := scramConversation(t, "SCRAM-SHA-256", "alice", "alice-secret")
			first, _ := conv.Step("")
			sf := rc.authenticate(t, 1, []byte(first))
			if sf.ErrorCode != 0 {
				t.Fatalf("%s: client-first: error %d", c.name, sf.ErrorCode)
			}
			real, err := conv.Step(string(sf.SASLAuthBytes))
			if err != nil {
				t.Fatal(err)
			}
			failAuth(t, rc, saslAuthenticate(1, []byte(c.final(real))), "SCRAM "+c.name)
		}
		// A garbage client-first fails the same way.
		failAuth(t, plainHandshake(t, "SCRAM-SHA-512"), saslAuthenticate(1, []byte("hello")), "SCRAM garbage client-first")
		goodProduce(t, "after truncated exchanges")
	})

	t.Run("unsupported mechanism", func(t *testing.T) {
		rc := dialRaw(t, env.Bootstrap)
		hs := rc.handshake(t, 1, "GSSAPI")
		if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hs.SupportedMechanisms, authMechanisms) {
			t.Errorf("SaslHandshake GSSAPI: error %d, mechanisms %v; want UNSUPPORTED_SASL_MECHANISM (33) and %v", hs.ErrorCode, hs.SupportedMechanisms, authMechanisms)
		}
		// Kafka closes the connection after UNSUPPORTED_SASL_MECHANISM.
		if hs, err := rc.roundTrip(func() kmsg.Request {
			r := kmsg.NewPtrSASLHandshakeRequest()
			r.Version, r.Mechanism = 1, "PLAIN"
			return r
		}()); err == nil {
			t.Errorf("after error 33 the connection stayed open: a new SaslHandshake PLAIN was answered %d", hs.(*kmsg.SASLHandshakeResponse).ErrorCode)
		}
		goodProduce(t, "after an unsupported mechanism")
	})

	t.Run("request before authentication", func(t *testing.T) {
		rc := dialRaw(t, env.Bootstrap)
		// ApiVersions is allowed before authentication.
		if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Fatalf("ApiVersions before authentication: %v", err)
		}
		checkMetadataBeforeAuth(t, env, rc, "terminate")
		// So is a SaslAuthenticate before SaslHandshake.
		rc = dialRaw(t, env.Bootstrap)
		if resp, err := rc.roundTrip(saslAuthenticate(1, []byte("\x00alice\x00alice-secret"))); err == nil {
			t.Fatalf("SaslAuthenticate before SaslHandshake was answered: %+v", resp)
		}
		waitLog(t, env, 2*time.Second, "SaslAuthenticate before SaslHandshake", "remote="+rc.c.LocalAddr().String())
		goodProduce(t, "after requests before authentication")
	})

	t.Run("SaslHandshake v0 with raw tokens", func(t *testing.T) {
		// v0: the token that follows is a raw frame, no request header;
		// PLAIN's answer is an empty raw frame.
		raw := func(rc *rawConn, tok string) ([]byte, error) {
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
			if _, err := rc.c.Write(append(frame, tok...)); err != nil {
				return nil, err
			}
			rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
			return readFrame(rc.c)
		}
		rc := dialRaw(t, env.Bootstrap)
		if r := rc.handshake(t, 0, "PLAIN"); r.ErrorCode != 0 {
			t.Fatalf("SaslHandshake v0: error %d", r.ErrorCode)
		}
		if b, err := raw(rc, "\x00alice\x00alice-secret"); err != nil || len(b) != 0 {
			t.Fatalf("raw PLAIN token: %q %v", b, err)
		}
		if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("Metadata after a v0 login: %v", err)
		}
		waitLog(t, env, 2*time.Second, "handshake=v0", "principal=User:alice")
		// A wrong password over v0: no error frame, the connection closes.
		bad := dialRaw(t, env.Bootstrap)
		bad.handshake(t, 0, "PLAIN")
		if b, err := raw(bad, "\x00alice\x00wrong"); err == nil {
			t.Fatalf("a wrong v0 PLAIN token was answered: %q", b)
		}
		// Counted and audited like the v1 failures, though v0 sends no 58.
		failures = append(failures, failure{bad.c.LocalAddr().String(), ""})
		goodProduce(t, "after SaslHandshake v0")
	})

	t.Run("re-authentication", func(t *testing.T) {
		rc := plainHandshake(t, "PLAIN")
		if r := rc.authenticate(t, 1, []byte("\x00alice\x00alice-secret")); r.ErrorCode != 0 {
			t.Fatalf("PLAIN login: error %d", r.ErrorCode)
		}
		if hs := rc.handshake(t, 1, "PLAIN"); hs.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("SaslHandshake after authentication: error %d, want ILLEGAL_SASL_STATE (34)", hs.ErrorCode)
		}
		if r := rc.authenticate(t, 1, []byte("\x00alice\x00alice-secret")); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("SaslAuthenticate after authentication: error %d, want ILLEGAL_SASL_STATE (34)", r.ErrorCode)
		}
		// The session stays authenticated and usable.
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		if _, err := rc.roundTrip(md); err != nil {
			t.Fatalf("Metadata after a refused re-authentication: %v", err)
		}
	})

	// Every 58 is counted and audited once, with the source address and
	// the message, and no user name: all come from 127.0.0.1, so the first
	// is an event of its own (with the port) and the others are counted
	// into aggregated events (audit.aggregate_interval).
	if n := scrapeMetric(t, env, "tollgate_authentication_failures_total"); n != float64(len(failures)) {
		t.Errorf("tollgate_authentication_failures_total = %v, want %d (one per SASL_AUTHENTICATION_FAILED)", n, len(failures))
	}
	var raw []string
	var events []map[string]any
	var written []string
	var summed uint64
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, events = auditLines(t, dataDir+"/audit.log")
		written, summed = nil, 0
		for _, ev := range events {
			if ev["action"] != "authenticate" {
				continue
			}
			init, _ := ev["initiator"].(map[string]any)
			src, _ := init["source"].(string)
			if n := aggregateCount(ev); n > 0 {
				summed += n
				if src != "127.0.0.1" {
					t.Errorf("aggregated event's source %q, want the address without a port", src)
				}
			} else {
				written = append(written, src)
			}
		}
		if uint64(len(written))+summed >= uint64(len(failures)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, ev := range events {
		if ev["action"] != "authenticate" {
			continue
		}
		init, _ := ev["initiator"].(map[string]any)
		if ev["outcome"] != "denied" || ev["error_code"] != float64(kerr.SaslAuthenticationFailed.Code) || init["listener"] != "SASL_PLAINTEXT" {
			t.Errorf("audit event: %s", raw[i])
		}
		for _, name := range []string{"alice", "mallory"} {
			if strings.Contains(raw[i], name) {
				t.Errorf("audit event names the user %s: %s", name, raw[i])
			}
		}
	}
	if len(written) == 0 || written[0] != failures[0].source || uint64(len(written))+summed != uint64(len(failures)) {
		t.Errorf("authenticate audit events: %v written, %d summed; want the first from %s and %d in all",
			written, summed, failures[0].source, len(failures))
	}
	goodProduce(t, "at the end")
}
