package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Quotas for how teams work: client-id prefix groups (Redpanda's
// client-id-prefix), shadow quotas and per-entity burst, end to end.

// kadm passes any entity type on, as rpk does: client-id-prefix entities
// set, described with each match type, refused with Tollgate's codes and
// messages, all through the gateway.
func TestPrefixThroughKadm(t *testing.T) {
	t.Parallel()
	env := startControl(t)
	ctx := ctxT(t, 30*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	prefix := func(name string) kadm.ClientQuotaEntity {
		return kadm.ClientQuotaEntity{{Type: "client-id-prefix", Name: &name}}
	}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: prefix("team-a-"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}, {Key: "consumer_byte_rate", Value: 2 << 20}}},
		{Entity: prefix("team-b-"), Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 5}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	team := "team-a-"
	exact, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id-prefix", MatchName: &team, MatchType: 0}})
	if err != nil || len(exact) != 1 || len(exact[0].Values) != 2 || exact[0].Entity[0].Type != "client-id-prefix" || *exact[0].Entity[0].Name != team {
		t.Fatalf("describe exact: %v %+v", err, exact)
	}
	all, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id-prefix", MatchType: 2}})
	if err != nil || len(all) != 2 {
		t.Fatalf("describe any: %v %+v", err, all)
	}
	clients, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 2}})
	if err != nil || len(clients) != 0 {
		t.Fatalf("a client-id filter lists prefix entities: %v %+v", err, clients)
	}
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id-prefix", MatchType: 1}})
	if !isKerr(err, kerr.InvalidRequest) {
		t.Errorf("describe default prefix: %v, want INVALID_REQUEST", err)
	}

	user, empty := "alice", ""
	bad, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id-prefix"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: prefix(empty), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}, {Type: "client-id-prefix", Name: &team}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: prefix("team-c-"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 0}}},
		{Entity: prefix("team-d-"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 3}}},
	})
	if err != nil || len(bad) != 5 {
		t.Fatalf("bad alter: %v %+v", err, bad)
	}
	want := map[string]bool{
		"Invalid quota entity, client-id-prefix has no default entity (a default client-id quota covers every client-id)": true,
		"Empty client-id-prefix not supported": true,
		"Invalid quota entity combination, a client-id-prefix entity stands alone: it cannot be combined with user, client-id or ip": true,
		"Quota producer_byte_rate must be greater than 0":    true,
		"Invalid configuration key connection_creation_rate": true,
	}
	for _, b := range bad {
		if !isKerr(b.Err, kerr.InvalidRequest) || !want[b.ErrMessage] {
			t.Errorf("entry %v: %v %q", b.Entity, b.Err, b.ErrMessage)
		}
		delete(want, b.ErrMessage)
	}
	if len(want) > 0 {
		t.Errorf("messages never seen: %v", want)
	}
	if after, _ := adm.DescribeClientQuotas(ctx, false, nil); len(after) != 2 {
		t.Errorf("after the refused entries: %d entities, want 2", len(after))
	}
}

func isKerr(err error, want *kerr.Error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Code == want.Code
}

// Three producers whose client-ids share a prefix share one quota; a client
// outside the prefix is not limited, and one with an exact client-id quota
// gets its own bucket (an exact client-id beats a prefix).
func TestSynctestPrefixGroupSharesOneQuota(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			prefix, vip := "team-a-", "team-a-vip"
			q := float64(vq)
			c.Quotas = []app.QuotaEntry{
				{ClientIDPrefix: &prefix, ProducerByteRate: &q},
				{ClientID: &vip, ProducerByteRate: &q},
			}
		})
		ids := []string{"team-a-ingest-1", "team-a-ingest-2", "team-a-etl"}
		group := make([]*counted, len(ids))
		vip, free := &counted{}, &counted{}
		var wg sync.WaitGroup
		run := func(c *kgo.Client) {
			wg.Add(1)
			go func() { defer wg.Done(); produceFor(c, "teams", vrun) }()
		}
		for i, id := range ids {
			group[i] = &counted{}
			run(bubbleClient(t, env, kgo.ClientID(id), kgo.WithHooks(group[i])))
		}
		run(bubbleClient(t, env, kgo.ClientID("team-a-vip"), kgo.WithHooks(vip)))
		run(bubbleClient(t, env, kgo.ClientID("team-b-1"), kgo.WithHooks(free)))
		wg.Wait()
		var sum int64
		for i, g := range group {
			sum += g.prod.Load()
			if g.prod.Load() < vq*2 {
				t.Errorf("%s starved: %d bytes", ids[i], g.prod.Load())
			}
		}
		checkHeld(t, "three client-ids of prefix team-a- together", sum, vq, vrun)
		checkHeld(t, "team-a-vip, its own exact client-id quota", vip.prod.Load(), vq, vrun)
		if f := free.prod.Load(); float64(f) < 3*vq*vrun.Seconds() {
			t.Errorf("team-b-1, outside the prefix, sent only %d bytes in %v: it was limited", f, vrun)
		}
	})
}

// Shadow mode end to end, in virtual time: a franz-go producer at full
// speed under a shadow quota is not slowed (no throttle reaches it, it
// sends far beyond the quota), the engine counts what the quota would have
// done; one audited AlterClientQuotas entry (shadow removed) enforces it,
// from a fresh bucket: the start-up burst, then Q.
func TestSynctestShadowThenEnforced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var dataDir string
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
			dataDir = c.DataDir
		})
		ctx := context.Background()
		adm := kadm.NewClient(bubbleClient(t, env))
		anon := "ANONYMOUS"
		alter := func(ops ...kadm.AlterClientQuotaOp) {
			t.Helper()
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
				Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &anon}}, Ops: ops}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("alter: %v %+v", err, res)
			}
		}
		alter(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: vq}, kadm.AlterClientQuotaOp{Key: "shadow", Value: 1})

		const shadowRun = 10 * time.Second
		n := &counted{}
		cl := bubbleClient(t, env, kgo.ClientID("app"), kgo.WithHooks(n))
		produceFor(cl, "shadowed", shadowRun)
		if n.throttles.Load() != 0 {
			t.Errorf("a shadow quota throttled the producer %d times", n.throttles.Load())
		}
		// Enforced, 10 s would carry the 10 s burst and 10 s of Q.
		if sent := float64(n.prod.Load()); sent < 4*vq*(shadowRun+vburst).Seconds() {
			t.Errorf("under a shadow quota the producer sent %.1f Q in %v: it was held", sent/vq, shadowRun)
		}
		r := env.App.Engine().Resolve(quota.ProducerByteRate, anon, "app", time.Now())
		t.Logf("shadow: %v", r.Shadowed)
		if !r.Options.Shadow || r.Shadowed.Percent() < 50 || r.Shadowed.Max != quota.DefaultMaxThrottle {
			t.Errorf("shadow stats %+v: a producer far over its quota would have been throttled, to the cap", r.Shadowed)
		}

		alter(kadm.AlterClientQuotaOp{Key: "shadow", Remove: true})
		events := readAudit(t, filepath.Join(dataDir, "audit.log"))
		last := events[len(events)-1]
		ch, _ := last["changes"].([]any)
		if len(events) != 2 || last["outcome"] != "applied" || len(ch) != 1 ||
			ch[0].(map[string]any)["key"] != "shadow" || ch[0].(map[string]any)["old"] != 1.0 || ch[0].(map[string]any)["new"] != nil {
			t.Fatalf("the switch is not one audited change: %v", events)
		}
		e := &counted{}
		cl2 := bubbleClient(t, env, kgo.ClientID("app"), kgo.WithHooks(e))
		produceFor(cl2, "enforced", vrun)
		checkHeld(t, "client-id app after the switch", e.prod.Load(), vq, vrun)
		if e.throttles.Load() == 0 {
			t.Error("enforced: no throttle reached the producer")
		}
	})
}

func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, ev)
	}
	return out
}
