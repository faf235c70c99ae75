package e2e

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Quotas follow the authenticated principal, not the client-id: under a
// default_user producer quota, alice and bob producing with the SAME
// client-id get a bucket each, and two API keys of one identity (PLAIN,
// user "token") share that identity's single bucket. Each bucket's rate
// holds exactly the bytes of the connections it should: while the run is
// shorter than the quota window the rate is bytes ÷ [10 s, 11 s), so a
// bucket shared by mistake or split by mistake is off by 2×.
func TestAuthQuotaFollowsPrincipal(t *testing.T) {
	// Not parallel: measures byte rates in real time and bounds the run's wall
	// time.
	testkit.EachUpstream(t, authQuotaFollowsPrincipal)
}

func authQuotaFollowsPrincipal(t *testing.T, up *testkit.Upstream) {
	env, keys := startTerminateOn(t, up, map[string]string{"alice": "alice-secret", "bob": "bob-secret"}, []string{"team-a", "team-a"},
		func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(1 << 30)}}
		})
	ctx := ctxT(t, 30*time.Second)
	const clientID = "shared-app"
	topic := up.Topic(t, "auth-quota")
	freshTopics(t, up, topic)
	createAuthTopics(t, ctx, franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"), topic)
	start := time.Now()

	produce := func(mech, user, pass string, n int) int64 {
		t.Helper()
		c := &counted{}
		cl := franzClient(t, append(franzOpts(env.Bootstrap, nil, mech, user, pass),
			kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic), kgo.WithHooks(c),
			kgo.ProducerBatchCompression(kgo.NoCompression()))...)
		val := make([]byte, 4<<10)
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Value: val}
		}
		// One call: a real broker's acks=all round trips, one per record,
		// would take the run past the window on a loaded machine.
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s as %s: %v", mech, user, err)
		}
		cl.Close()
		return c.prod.Load()
	}
	bytes := map[string]int64{
		"alice": produce("SCRAM-SHA-256", "alice", "alice-secret", 20),
		"bob":   produce("SCRAM-SHA-512", "bob", "bob-secret", 20),
	}
	k0 := produce("PLAIN", "token", keys[0], 10)
	k1 := produce("PLAIN", "token", keys[1], 10)
	bytes["team-a"] = k0 + k1

	usage := env.App.Engine().Usage(time.Now())
	var users []string
	for _, u := range usage {
		if u.Key != model.ProducerByteRate {
			continue
		}
		users = append(users, u.User)
		want, ok := bytes[u.User]
		if !ok {
			t.Errorf("unexpected producer bucket %+v", u)
			continue
		}
		if u.ClientID != "" || !u.Entity.User.IsSet() || u.Entity.Client.IsSet() {
			t.Errorf("bucket of %s: client tag %q, entity %+v; want the user-level default quota's bucket (client tag empty)", u.User, u.ClientID, u.Entity)
		}
		implied := u.Rate * 10.5
		t.Logf("bucket user=%s client=%q: rate %.0f B/s ≈ %.0f bytes; its connections produced %d", u.User, u.ClientID, u.Rate, implied, want)
		if math.Abs(implied-float64(want)) > 0.06*float64(want) {
			t.Errorf("bucket of %s holds ≈%.0f bytes, its connections produced %d", u.User, implied, want)
		}
	}
	slices.Sort(users)
	if !slices.Equal(users, []string{"alice", "bob", "team-a"}) {
		t.Errorf("producer buckets by user: %v, want exactly [alice bob team-a] (one per principal; none for the client-id or for user token)", users)
	}
	if k0 == 0 || k1 == 0 {
		t.Fatalf("an API key produced nothing: %d, %d", k0, k1)
	}
	if d := time.Since(start); d > 9*time.Second {
		t.Fatalf("the run took %v: past the 10 s minimum window the byte check does not hold", d)
	}
	// Both API keys logged in as the identity.
	if ls := logLines(env, "msg=authenticated ", "principal=User:team-a", "mechanism=PLAIN"); len(ls) < 2 {
		t.Errorf("%d logins as User:team-a, want one per API key at least", len(ls))
	}
}
