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
	user := "ANONYMOUS"
	rate := 1.0 // partitions per second; the bucket holds 11
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: &user, ControllerMutationRate: &rate}}
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil)

	create := func(version int16, names ...string) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = version
		req.TimeoutMillis = 5000
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 3, 1
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
	want := []int16{0, 0, 0, 0, 89, 89}
	if len(resp.Topics) != len(want) {
		t.Fatalf("got %d topics, want %d", len(resp.Topics), len(want))
	}
	for i, tp := range resp.Topics {
		if tp.ErrorCode != want[i] || tp.Topic != []string{"t1", "t2", "t3", "t4", "t5", "t6"}[i] {
			t.Errorf("topic %d: %s error %d, want error %d", i, tp.Topic, tp.ErrorCode, want[i])
		}
	}
	if resp.Topics[4].ErrorMessage == nil || *resp.Topics[4].ErrorMessage != "The throttling quota has been exceeded." {
		t.Errorf("error message %v", resp.Topics[4].ErrorMessage)
	}
	if resp.ThrottleMillis < 500 || resp.ThrottleMillis > 1500 {
		t.Errorf("throttle %d ms, want about 1000 (one token missing at 1/s)", resp.ThrottleMillis)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, tp := range md.Topics {
		if tp.Topic != nil {
			exists[*tp.Topic] = true
		}
	}
	for _, n := range []string{"t1", "t2", "t3", "t4"} {
		if !exists[n] {
			t.Errorf("accepted topic %s was not created", n)
		}
	}
	for _, n := range []string{"t5", "t6"} {
		if exists[n] {
			t.Errorf("rejected topic %s reached the cluster", n)
		}
	}
	// The client waited out the throttle, so the bucket is back at about
	// 0: the next topic is accepted and drives it to -3; the one after is
	// rejected, answered by the gateway alone.
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
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "p1", 3, 1
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
