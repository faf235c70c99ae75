package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

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
