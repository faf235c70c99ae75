package e2e

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
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
