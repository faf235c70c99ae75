package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/testkit"
)

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
