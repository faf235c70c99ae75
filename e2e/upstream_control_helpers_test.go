package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/testkit"
)

// Helpers of the control-plane, transaction, TLS and streaming tests that
// run on every upstream (testkit.EachUpstream). startControlOn, the
// upstream-aware startControl, is in upstream_quota_helpers_test.go.

// upstreamAdmin is an admin client of the upstream cluster straight, not
// through the gateway: kfake's brokers, or the real cluster's PLAINTEXT
// listeners (ANONYMOUS, a super user there). Closed when the test ends.
func upstreamAdmin(t *testing.T, env *testkit.Env) *kadm.Client {
	t.Helper()
	return kadm.NewClient(franzClient(t, kgo.SeedBrokers(env.UpstreamAddrs()...)))
}

// eventually retries check every 100 ms until it returns nil or d passes,
// then fails the test with its last error. A real cluster applies a config
// change through its metadata log: the broker that answers the next
// request may not have applied it yet (kfake applies it at once).
func eventually(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
