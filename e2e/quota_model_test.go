package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Quotas for how teams work: client-id prefix groups (Redpanda's
// client-id-prefix), shadow quotas and per-entity burst, end to end.

// kadm passes any entity type and key on, as rpk does: client-id-prefix
// entities set, described with each match type, refused with Tollgate's
// codes and messages; shadow and burst_seconds set and refused; all
// through the gateway.
func TestQuotaModelThroughKadm(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, quotaModelThroughKadm)
}

func quotaModelThroughKadm(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
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

	// shadow and burst_seconds: set, described, refused.
	opts, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: prefix("team-a-"), Ops: []kadm.AlterClientQuotaOp{{Key: "shadow", Value: 1}, {Key: "burst_seconds", Value: 0}}},
		{Entity: prefix("team-b-"), Ops: []kadm.AlterClientQuotaOp{{Key: "shadow", Value: 0}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}, {Key: "burst_seconds", Value: 3601}}},
	})
	if err != nil || len(opts) != 3 {
		t.Fatalf("options: %v %+v", err, opts)
	}
	msgs := map[string]string{}
	for _, o := range opts {
		msgs[*o.Entity[0].Name] = o.ErrMessage
	}
	if msgs["team-a-"] != "" ||
		msgs["team-b-"] != "Quota shadow must be 1 (it marks the entity's quotas shadow: measured, not enforced; remove the key to enforce them)" ||
		msgs["alice"] != "Quota burst_seconds must be from 0 to 3600 (seconds of quota a fresh client may send at once; 0: none; remove the key for Kafka's, 10)" {
		t.Errorf("options: %q", msgs)
	}
	got, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id-prefix", MatchName: &team, MatchType: 0}})
	if err != nil || len(got) != 1 || len(got[0].Values) != 4 {
		t.Fatalf("describe with options: %v %+v", err, got)
	}
	r := env.App.Engine().Resolve(model.ProducerByteRate, "bob", "team-a-1", time.Now())
	if !r.Options.Shadow || !r.Options.HasBurst || r.Options.Burst != 0 || r.Quota != 1<<20 {
		t.Errorf("the engine's resolution: %+v", r)
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
		r := env.App.Engine().Resolve(model.ProducerByteRate, anon, "app", time.Now())
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

// Per-entity burst, in virtual time with a franz-go producer at full speed
// (small batches, so that one request is a small grain): with burst 0 the
// first seconds carry Q each, with 2 s the first ones carry 2 s worth more,
// without one Kafka's 10 s; then Q, whatever the burst.
func TestSynctestBurstPerEntity(t *testing.T) {
	t.Parallel()
	const first, run = 5 * time.Second, 20 * time.Second
	for _, tc := range []struct {
		name  string
		burst *float64
		extra float64 // seconds of Q beyond Q·first in the first seconds
	}{
		{"none", ptrF(0), 0},
		{"2s", ptrF(2), 2},
		{"kafka", nil, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
					e := quotaOf(ptrS("ANONYMOUS"), nil, vq, 0)
					e.BurstSeconds = tc.burst
					c.Quotas = []app.QuotaEntry{e}
				})
				p := &perSecond{start: time.Now()}
				cl := bubbleClient(t, env, kgo.WithHooks(p), kgo.ProducerBatchMaxBytes(16<<10))
				produceFor(cl, "burst-"+tc.name, run)
				p.mu.Lock()
				defer p.mu.Unlock()
				var early, late float64
				for i, b := range p.secs {
					if i < int(first/time.Second) {
						early += b
					} else if i >= 12 && i < int(run/time.Second) {
						late += b
					}
				}
				want := vq * (first.Seconds() + tc.extra)
				t.Logf("burst %s: first %v carried %.2f Q (want %.1f Q); seconds 12–%d %.3f Q/s; first second %.2f Q",
					tc.name, first, early/vq, want/vq, int(run/time.Second), late/vq/(run.Seconds()-12), p.secs[0]/vq)
				// One request (16 KiB batches) is the grain.
				if early > want+vq/4 || early < want-vq/4 {
					t.Errorf("the first %v carried %.2f Q, want %.2f Q", first, early/vq, want/vq)
				}
				if tc.burst != nil && *tc.burst == 0 && p.secs[0] > 1.25*vq {
					t.Errorf("burst 0: the first second carried %.2f Q, want about Q", p.secs[0]/vq)
				}
				if r := late / vq / (run.Seconds() - 12); r < 0.95 || r > 1.05 {
					t.Errorf("after the start-up: %.3f Q/s, want Q", r)
				}
			})
		})
	}
}

func ptrS(s string) *string { return &s }

// The dashboard shows a client-id prefix group as team-a-*, a shadow
// bucket with what it would have throttled (not among the throttled), its
// burst, and resolve names the group and the shadow figures.
func TestDashboardQuotaModel(t *testing.T) {
	// Not parallel: a real browser (see TestDashboard).
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is missing at %s: %v", chromiumPath, err)
	}
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		prefix, q, burst := "team-a-", float64(1000), 0.0
		c.Quotas = []app.QuotaEntry{{ClientIDPrefix: &prefix, ProducerByteRate: &q, Shadow: true, BurstSeconds: &burst}}
		c.Tenants = []app.TenantEntry{{Name: "retail", Principals: []string{"ANONYMOUS"}, ProducerByteRate: &q, Shadow: true}}
		c.Authorization.AllowAnonymousDescribe = true
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.ClientID("team-a-1"), kgo.DefaultProduceTopic("dash-model"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 8<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	browser, closeBrowser := startChromium(t)
	defer closeBrowser()
	wait := func(name, js string) {
		t.Helper()
		c, cancel := context.WithTimeout(browser, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(c, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	c, cancel := context.WithTimeout(browser, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Steps(chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+env.App.HTTPAddr()+"/"))); err != nil {
		t.Fatal(err)
	}
	wait("the group's card", `[...document.querySelectorAll('#top-grid article')].some((a) => a.innerText.includes('team-a-*') &&
		a.innerText.includes('shadow: would have throttled') && a.innerText.includes('start-up burst: none'))`)
	card := run(t, browser, chromedp.Evaluate[string](`[...document.querySelectorAll('#top-grid article')].map((a) => a.innerText).join('\n---\n')`))
	t.Logf("card:\n%s", card)
	if !regexp.MustCompile(`shadow: would have throttled [0-9.]+ % of 3 requests, by up to [0-9.]+ s`).MatchString(card) {
		t.Errorf("the card lacks the shadow figures:\n%s", card)
	}
	// The tenants panel: the shadow tenant's ceiling, its rate, and what
	// it would have done.
	wait("the tenant's row", `(() => {
		const r = document.querySelector('#tenants-body tr[data-tenant="retail"][data-quota="producer_byte_rate"]');
		return !document.getElementById('tenants').hidden && !!r && r.innerText.includes('shadow: would have throttled');
	})()`)
	tenantRow := run(t, browser, chromedp.Evaluate[string](`document.querySelector('#tenants-body tr[data-tenant="retail"]').innerText`))
	t.Logf("tenant row: %s", tenantRow)
	for _, want := range []string{"retail", "config file", "producer_byte_rate", "1000 B/s", "shadow: would have throttled"} {
		if !strings.Contains(tenantRow, want) {
			t.Errorf("the tenant's row %q lacks %q", tenantRow, want)
		}
	}
	if rows := run(t, browser, chromedp.Evaluate[int](`document.querySelectorAll('#throttled-body tr.hot').length`)); rows != 0 {
		t.Errorf("a shadow bucket is listed among the throttled (%d rows)", rows)
	}
	// Not a Tollgate cluster (no cluster.id): no cluster panel, no
	// cluster rates, and /api/v1/cluster's 404 is no error.
	type noCluster struct {
		Panel, Link, Banner bool
		RateHead            string
	}
	if nc := run(t, browser, chromedp.Evaluate[noCluster](`({Panel: !document.getElementById('cluster').hidden,
		Link: !document.getElementById('foot-cluster').hidden, Banner: !document.getElementById('banner').hidden,
		RateHead: document.getElementById('throttled-rate-h').innerText})`)); nc.Panel || nc.Link || nc.Banner ||
		nc.RateHead != "Rate" || strings.Contains(card, "this instance") || strings.Contains(card, "Tollgate cluster") {
		t.Errorf("without cluster.id: %+v, card:\n%s", nc, card)
	}
	if err := chromedp.Do(c, chromedp.Steps(
		chromedp.SendKeys(chromedp.ID("r-user"), "bob"),
		chromedp.SendKeys(chromedp.ID("r-client"), "team-a-2"),
		chromedp.Click(chromedp.CSS(`#resolve-form button`)),
	)); err != nil {
		t.Fatal(err)
	}
	wait("resolve", `document.getElementById('resolve-out').innerText.includes('shared by every client-id starting with team-a-')`)
	res := run(t, browser, chromedp.Evaluate[string](`document.getElementById('resolve-out').innerText`))
	if !strings.Contains(res, "level 7p · client-id-prefix") || !strings.Contains(res, "shadow: would have throttled") {
		t.Errorf("resolve:\n%s", res)
	}
}
