package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// controller_mutation_rate in strict mode: topics are charged in request
// order while the bucket is not negative; once it is, the rest of the
// request fails with THROTTLING_QUOTA_EXCEEDED (89) and a throttle, and
// only the accepted topics reach the cluster.
func TestControllerMutationQuotaStrict(t *testing.T) {
	// Not parallel: checks throttle times of a real-time token bucket.
	testkit.EachUpstream(t, controllerMutationQuotaStrict)
}

func controllerMutationQuotaStrict(t *testing.T, up *testkit.Upstream) {
	user := "ANONYMOUS"
	rate := 1.0 // partitions per second; the bucket holds 11
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: &user, ControllerMutationRate: &rate}}
	})
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, env, nil)
	var names []string
	name := map[string]string{} // t1 → the test's own topic t1-…
	for _, n := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "p1"} {
		name[n] = up.Topic(t, n)
		names = append(names, name[n])
	}
	freshTopics(t, up, names...)

	create := func(version int16, ns ...string) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = version
		req.TimeoutMillis = 5000
		for _, n := range ns {
			rt := kmsg.NewCreateTopicsRequestTopic()
			// Replication factor -1: the broker's default (3 on the
			// real cluster, whose min.insync.replicas is 2).
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name[n], 3, -1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// 11 tokens: t1 (8 left), t2 (5), t3 (2), t4 (-1: accepted, tokens were
	// not negative before it), t5 and t6 rejected.
	resp := create(7, "t1", "t2", "t3", "t4", "t5", "t6")
	answered := time.Now()
	want := []int16{0, 0, 0, 0, 89, 89}
	if len(resp.Topics) != len(want) {
		t.Fatalf("got %d topics, want %d", len(resp.Topics), len(want))
	}
	for i, tp := range resp.Topics {
		if tp.ErrorCode != want[i] || tp.Topic != names[i] {
			t.Errorf("topic %d: %s error %d, want %s error %d", i, tp.Topic, tp.ErrorCode, names[i], want[i])
		}
	}
	if resp.Topics[4].ErrorMessage == nil || *resp.Topics[4].ErrorMessage != "The throttling quota has been exceeded." {
		t.Errorf("error message %v", resp.Topics[4].ErrorMessage)
	}
	if resp.ThrottleMillis < 500 || resp.ThrottleMillis > 1500 {
		t.Errorf("throttle %d ms, want about 1000 (one token missing at 1/s)", resp.ThrottleMillis)
	}
	// A real cluster's brokers learn of new topics from the controller's
	// metadata log a little after CreateTopics is answered (kfake: at
	// once): wait, bounded, until the accepted topics are known, then
	// the rejected ones would be too had they been created.
	exists := map[string]bool{}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		exists = map[string]bool{}
		for _, tp := range md.Topics {
			if tp.Topic != nil && tp.ErrorCode == 0 {
				exists[*tp.Topic] = true
			}
		}
		if exists[name["t1"]] && exists[name["t2"]] && exists[name["t3"]] && exists[name["t4"]] || time.Now().After(deadline) {
			break
		}
	}
	for _, n := range []string{"t1", "t2", "t3", "t4"} {
		if !exists[name[n]] {
			t.Errorf("accepted topic %s was not created", name[n])
		}
	}
	for _, n := range []string{"t5", "t6"} {
		if exists[name[n]] {
			t.Errorf("rejected topic %s reached the cluster", name[n])
		}
	}
	// The client waited out the throttle, so the bucket is back at about
	// 0: the next topic is accepted and drives it to -3; the one after is
	// rejected, answered by the gateway alone. (Waited out here, not only
	// by the client: franz-go waits on the connection it was throttled
	// on, and kfake names one controller for good, but a KRaft cluster's
	// Metadata names a random broker as the controller, so the next
	// CreateTopics may leave on another connection, one the gateway did
	// not mute; the bucket, one for the user over every connection, is
	// still below zero then, and a strict request meeting it is refused
	// with the rest of the throttle, as Kafka's strict mode refuses it.)
	time.Sleep(time.Until(answered.Add(time.Duration(resp.ThrottleMillis) * time.Millisecond)))
	if r := create(7, "t7"); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis != 0 {
		t.Errorf("t7: error %d throttle %d, want accepted without throttle (strict throttles only rejections)", r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	if r := create(7, "t8"); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis < 1000 {
		t.Errorf("t8: error %d throttle %d, want 89 and a throttle of 2-3 s", r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	// Permissive below v6 (a client that speaks Kafka 2.6's versions):
	// accepted, throttled by the deficit.
	old := newClient(t, env, nil, kgo.MaxVersions(kversion.V2_6_0()))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name["p1"], 3, -1
	req.Topics = append(req.Topics, rt)
	r, err := req.RequestWith(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version >= 6 {
		t.Fatalf("the old client spoke CreateTopics v%d", r.Version)
	}
	if r.Topics[0].ErrorCode != 0 || r.ThrottleMillis <= 0 {
		t.Errorf("permissive v%d: error %d throttle %d, want accepted and throttled", r.Version, r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
}
