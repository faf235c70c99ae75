package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testkit"
)

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
