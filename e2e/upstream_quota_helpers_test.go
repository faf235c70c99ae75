package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Helpers of the quota tests that run on every upstream (EachUpstream).

// freshTopics makes sure none of names exists on a real upstream before the
// test (and deletes them after it): up.Topic's names are the same at every
// run of a test, and an attached cluster (TOLLGATE_KAFKA_CLUSTER) outlives
// the test binary, so a second run would meet the first run's topics —
// TOPIC_ALREADY_EXISTS, or auto-created topics with records in them. The
// topics are deleted on the cluster straight, not through the gateway, so
// that no quota of the test is charged for it. kfake starts empty with
// each gateway: nothing to do.
func freshTopics(t *testing.T, up *testkit.Upstream, names ...string) {
	t.Helper()
	if !up.Real() {
		return
	}
	cl, err := kgo.NewClient(up.Kafka.AdminOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	del := func(ctx context.Context) error {
		resps, err := adm.DeleteTopics(ctx, names...)
		if err != nil {
			return err
		}
		for _, r := range resps {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return r.Err
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := del(ctx); err != nil {
		t.Fatalf("delete %v left by an earlier run: %v", names, err)
	}
	// Deleted in the controller's metadata: wait until no broker names
	// them any more (a create right after could still meet them).
	for {
		td, err := adm.ListTopics(ctx, names...)
		var left []string
		for name, d := range td {
			if d.Err == nil {
				left = append(left, name)
			}
		}
		if err == nil && len(left) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("topics %v still listed after their deletion: %v %v", names, left, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := del(ctx); err != nil {
			t.Logf("delete %v after the test: %v", names, err)
		}
	})
}

// startControlOn is startControl in front of up: connections from
// 127.0.0.2 are "admin" (a quota admin), from 127.0.0.3 "alice", from
// anywhere else ANONYMOUS.
func startControlOn(t *testing.T, up *testkit.Upstream, edit ...func(*app.Config)) *testkit.Env {
	t.Helper()
	return up.Start(t, app.Options{}, append([]func(*app.Config){func(c *app.Config) {
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{
			{CIDR: "127.0.0.2/32", Principal: "admin"},
			{CIDR: "127.0.0.3/32", Principal: "alice"},
		}
		c.Authorization.QuotaAdmins = []string{"admin"}
	}}, edit...)...)
}

// startTerminateOn is startTerminate in front of up: a SASL_PLAINTEXT
// listener terminating the logins of the SCRAM users and API keys (the
// keys' plaintexts returned in the order of keyIdentities).
func startTerminateOn(t *testing.T, up *testkit.Upstream, users map[string]string, keyIdentities []string, edit ...func(*app.Config)) (*testkit.Env, []string) {
	t.Helper()
	creds, keys := writeCredentials(t, users, keyIdentities...)
	env := up.Start(t, app.Options{}, append([]func(*app.Config){func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
	}}, edit...)...)
	return env, keys
}
