package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// What an operator watches: the dashboard in a real browser (a gateway's,
// and a Tollgate cluster instance's), the metrics docs/metrics.md lists,
// and the Grafana dashboard's queries.

const chromiumPath = "/usr/bin/chromium"

// The dashboard in a real browser: a producer at full speed is throttled
// under a (user, client-id) producer_byte_rate, and headless Chromium shows
// that bucket in the throttled table with a drawn chart; the resolve box
// names the entity whose quota applies per key, and an admin's two quota
// changes are listed with old → new values. The admin port needs a key
// (ANONYMOUS may not read here): the page asks for one, refuses a wrong one,
// and keeps the right one for the tab only. The producer's own view of its
// throttling (KIP-714) shows next to its bucket. The full-page screenshot is
// left in artifacts/dashboard.png (and, with UPDATE_SCREENSHOT=1, copied
// to docs/dashboard.png for the README).
func TestDashboard(t *testing.T) {
	// Not parallel: a real browser waits (bounded) for real-time throttling to
	// show; it is the heaviest test and its waits are not safe under
	// contention.
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the dashboard test drives headless Chromium at %s, which is missing (%v): "+
			"install it with `apt-get install -y chromium` (scripts/test.sh does)", chromiumPath, err)
	}
	const (
		produceQuota = 256 << 10 // bytes per second
		consumeQuota = 1 << 20
		topic        = "dashboard"
		producerID   = "dashboard-producer"
		consumerID   = "dashboard-consumer"
	)
	user := "ANONYMOUS"
	credFile, keys := writeCredentials(t, nil, "viewer")
	viewerKey := keys[0]
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.CredentialsFile = credFile
		c.Quota.WindowNum = 3
		c.Quota.WindowSize = 250 * time.Millisecond
		pid := producerID
		prod, cons, mut := float64(produceQuota), float64(consumeQuota), 10.0
		c.Quotas = []app.QuotaEntry{
			{User: &user, ClientID: &pid, ProducerByteRate: &prod},
			{DefaultClientID: true, ConsumerByteRate: &cons},
			{DefaultUser: true, ControllerMutationRate: &mut},
		}
		// Connections from 127.0.0.2 are the quota admin "admin".
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{{CIDR: "127.0.0.2/32", Principal: "admin"}}
		c.Authorization.QuotaAdmins = []string{"admin"}
		c.BrokerConfigs = map[string]string{
			"listener.name.PLAINTEXT.max.connection.creation.rate": "50",
			"listener.name.PLAINTEXT.max.connections":              "200",
		}
		// The clients push their own metrics (franz-go does by default)
		// every second: the Clients' own view panel fills quickly.
		c.Telemetry.PushInterval = time.Second
		// A usage ledger with half an hour of the producer's minutes (100
		// B/s, one minute at 1 000 B/s) for the quota advisor's proposal.
		seedLedger(t, filepath.Join(c.DataDir, "usage"), user, producerID, time.Now().Add(-40*time.Minute), 31)
	})
	start := time.Now()

	// The browser first, so that the page sees the traffic start.
	browser, closeBrowser := startChromium(t)
	defer closeBrowser()
	url := "http://" + env.App.HTTPAddr() + "/"
	step := func(name string, d time.Duration, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, d)
		defer cancel()
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatalf("%s: %v (after %v)", name, err, time.Since(start).Round(time.Millisecond))
		}
	}
	step("load the dashboard", 15*time.Second, chromedp.Steps(
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("key-panel")),
	))
	// 401 → the key form; a wrong key is refused and forgotten; the
	// viewer's key opens the page and lives in sessionStorage only.
	type keyState struct {
		Panel  bool   `json:"panel"`
		Why    string `json:"why"`
		Status string `json:"status"`
		Stored string `json:"stored"`
		Cookie string `json:"cookie"`
		Banner bool   `json:"banner"`
	}
	keyJS := `({panel: !document.getElementById('key-panel').hidden, why: document.getElementById('key-why').innerText,
		status: document.getElementById('status-text').innerText, stored: sessionStorage.getItem('tollgate.apiKey') || '',
		cookie: document.cookie, banner: !document.getElementById('banner').hidden})`
	ks := run(t, browser, chromedp.Evaluate[keyState](keyJS))
	if !ks.Panel || !strings.Contains(ks.Why, "needs an API key") || ks.Status != "Key required" || ks.Banner {
		t.Errorf("first load without a key: %+v", ks)
	}
	step("a wrong key", 10*time.Second, chromedp.Steps(
		chromedp.SendKeys(chromedp.ID("key-input"), "tg_aaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"),
		chromedp.Click(chromedp.CSS(`#key-form button`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('key-why').innerText.includes('That key was refused')`,
			chromedp.WithPollingInterval(50*time.Millisecond)),
	))
	if ks = run(t, browser, chromedp.Evaluate[keyState](keyJS)); !ks.Panel || ks.Stored != "" || !strings.Contains(ks.Why, "unknown, revoked or malformed") {
		t.Errorf("after a wrong key: %+v", ks)
	}
	step("the viewer's key", 15*time.Second, chromedp.Steps(
		chromedp.SendKeys(chromedp.ID("key-input"), viewerKey),
		chromedp.Click(chromedp.CSS(`#key-form button`)),
		chromedp.WaitNotVisible(chromedp.ID("key-panel")),
		chromedp.Poll[chromedp.Void](`document.getElementById('status-text').innerText.startsWith('Live')`,
			chromedp.WithPollingInterval(50*time.Millisecond)),
	))
	if ks = run(t, browser, chromedp.Evaluate[keyState](keyJS)); ks.Panel || ks.Stored != viewerKey || ks.Cookie != "" || ks.Banner {
		t.Errorf("with the viewer's key: panel %v, stored %v, cookie %q, banner %v", ks.Panel, ks.Stored == viewerKey, ks.Cookie, ks.Banner)
	}
	if n := scrapeMetric(t, env, "tollgate_authentication_failures_total"); n != 1 {
		t.Errorf("%v failed logins counted, want the wrong key's one", n)
	}

	// Traffic: two quota changes by the admin (audit events), an explicit
	// topic creation (controller_mutation_rate), a producer at full speed,
	// and a consumer reading it back.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fromAdmin := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	admin := kadm.NewClient(newClient(t, env, nil, kgo.ClientID("kafka-configs"), kgo.Dialer(fromAdmin.DialContext)))
	alice := "alice"
	for _, v := range []float64{10 << 20, 20 << 20} {
		res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &alice}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: v}},
		}})
		if err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("alter client quotas: %v %+v", err, res)
		}
	}
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	prod := newClient(t, env, nil, kgo.ClientID(producerID), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(32<<10))
	cons := newClient(t, env, nil, kgo.ClientID(consumerID), kgo.ConsumeTopics(topic))
	trafficCtx, stopTraffic := context.WithTimeout(ctx, 20*time.Second)
	var wg sync.WaitGroup
	var acked atomic.Int64
	trafficStart := time.Now()
	defer func() {
		stopTraffic()
		wg.Wait()
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		val := make([]byte, 8<<10)
		for trafficCtx.Err() == nil {
			prod.Produce(trafficCtx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
			// Keep at most ~256 KiB buffered so the loop stays bounded.
			for prod.BufferedProduceBytes() > 256<<10 && trafficCtx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
		}
		prod.AbortBufferedRecords(context.Background())
	}()
	go func() {
		defer wg.Done()
		for trafficCtx.Err() == nil {
			cons.PollFetches(trafficCtx)
		}
	}()

	// The throttled (user, client-id) bucket appears in the throttled table
	// and its chart has a drawn rate path (a few seconds of samples).
	sel := fmt.Sprintf(`[data-quota="producer_byte_rate"][data-user=%q][data-client-id=%q]`, user, producerID)
	step("wait for the throttled producer", 15*time.Second, chromedp.Steps(
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => {
			const row = document.querySelector('#throttled-body tr%[1]s');
			const path = document.querySelector('#top-grid article%[1]s svg path.rate');
			const d = path ? path.getAttribute('d') || '' : '';
			return !!row && (d.match(/L/g) || []).length >= 6;
		})()`, sel), chromedp.WithPollingInterval(100*time.Millisecond)),
	))
	// The quota advisor's proposal from the ledger, on the bucket's card.
	step("the advisor's proposal", 10*time.Second, chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => {
		const n = document.querySelector('#top-grid article%s .suggestion');
		return !!n && n.innerText.includes('usage suggests') && n.innerText.includes('of 31 minutes');
	})()`, sel), chromedp.WithPollingInterval(100*time.Millisecond)))
	type seen struct {
		Row    string `json:"row"`
		Path   string `json:"path"`
		Polls  int    `json:"polls"`
		Banner bool   `json:"banner"`
		Hot    bool   `json:"hot"`
		Audit  string `json:"audit"`
	}
	got := run(t, browser, chromedp.Evaluate[seen](fmt.Sprintf(`(() => {
		const row = document.querySelector('#throttled-body tr%[1]s');
		const card = document.querySelector('#top-grid article%[1]s');
		return {
			row: row ? row.innerText : '',
			path: card.querySelector('svg path.rate').getAttribute('d'),
			polls: Number(document.body.dataset.polls || 0),
			banner: !document.getElementById('banner').hidden,
			hot: card.classList.contains('hot'),
			audit: document.getElementById('audit-list').innerText,
		};
	})()`, sel)))
	for _, want := range []string{"producer_byte_rate", user, producerID, "256 KiB/s"} {
		if !strings.Contains(got.Row, want) {
			t.Errorf("throttled table row %q lacks %q", got.Row, want)
		}
	}
	if !strings.HasPrefix(got.Path, "M") || strings.Count(got.Path, "L") < 6 {
		t.Errorf("chart path %q is not a drawn line", got.Path)
	}
	for _, want := range []string{"Alter client quotas", "applied", "User:admin", "user=alice", "producer_byte_rate: 10 MiB/s→20 MiB/s"} {
		if !strings.Contains(got.Audit, want) {
			t.Errorf("recent quota changes %q lack %q", got.Audit, want)
		}
	}
	if !got.Hot || got.Banner {
		t.Errorf("card highlighted %v (want true), error banner shown %v (want false)", got.Hot, got.Banner)
	}

	// The clients' own view: the producer's reported throttle time, pushed
	// through the gateway (KIP-714), on the row of its user and client-id
	// next to the bucket that throttled it.
	tsel := fmt.Sprintf(`#telemetry-body tr[data-user=%q][data-client-id=%q]`, user, producerID)
	step("the producer's own view", 15*time.Second, chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => {
		const row = document.querySelector('%s');
		return !!row && !!row.querySelector('[data-metric="produce_throttle"]') && !!row.querySelector('[data-quota="producer_byte_rate"]');
	})()`, tsel), chromedp.WithPollingInterval(100*time.Millisecond)))
	own := run(t, browser, chromedp.Evaluate[map[string]string](fmt.Sprintf(`(() => {
		const row = document.querySelector('%s');
		return {reported: row.querySelector('[data-metric="produce_throttle"]').innerText,
			bucket: row.querySelector('[data-quota="producer_byte_rate"]').innerText,
			hidden: String(document.getElementById('telemetry').hidden)};
	})()`, tsel)))
	if !strings.Contains(own["reported"], "avg") || !strings.Contains(own["reported"], "max") || strings.Contains(own["reported"], "max 0 ms") ||
		!strings.Contains(own["bucket"], "256 KiB/s") || !strings.Contains(own["bucket"], "throttled") || own["hidden"] != "false" {
		t.Errorf("the producer's own view: %q", own)
	}

	// The resolve box says which entity's quota applies per key.
	step("resolve", 10*time.Second, chromedp.Steps(
		chromedp.SendKeys(chromedp.ID("r-user"), user),
		chromedp.SendKeys(chromedp.ID("r-client"), producerID),
		chromedp.SendKeys(chromedp.ID("r-ip"), "127.0.0.1"),
		chromedp.Click(chromedp.CSS(`#resolve-form button`)),
		chromedp.WaitVisible(chromedp.CSS(`#resolve-table tr[data-quota="controller_mutation_rate"]`)),
	))
	res := run(t, browser, chromedp.Evaluate[map[string]string](`Object.fromEntries(
		[...document.querySelectorAll('#resolve-table tbody tr')].map(r => [r.dataset.quota, r.innerText]))`))
	for k, want := range map[string]string{
		"producer_byte_rate":       "level 1 · user+client-id",
		"consumer_byte_rate":       "level 8 · default-client-id",
		"controller_mutation_rate": "level 6 · default-user",
		"request_percentage":       "no quota",
	} {
		if !strings.Contains(res[k], want) {
			t.Errorf("resolve %s: %q lacks %q", k, res[k], want)
		}
	}

	// Let the charts fill a little more, then the screenshots: light (the
	// README's) and dark.
	step("more samples", 10*time.Second, chromedp.Poll[chromedp.Void](
		`Number(document.body.dataset.polls || 0) >= 13`, chromedp.WithPollingInterval(100*time.Millisecond)))
	// The rate swings around the quota with such short windows; take the
	// picture at a moment above it when one comes within a few seconds.
	over, cancelOver := context.WithTimeout(browser, 4*time.Second)
	if err := chromedp.Do(over, chromedp.Poll[chromedp.Void](
		fmt.Sprintf(`!!document.querySelector('#top-grid article%s .util.bad')`, sel),
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Logf("screenshot taken below the quota: %v", err)
	}
	cancelOver()
	shot := run(t, browser, chromedp.FullScreenshot(100))
	step("dark mode", 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	}))
	darkShot := run(t, browser, chromedp.FullScreenshot(100))

	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	saveFile(t, filepath.Join(root, "artifacts", "dashboard.png"), shot)
	saveFile(t, filepath.Join(root, "artifacts", "dashboard-dark.png"), darkShot)
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		saveFile(t, filepath.Join(root, "docs", "dashboard.png"), shot)
	}
	el := time.Since(trafficStart)
	t.Logf("throttled row and chart after %d polls; producer acked %d KiB in %v (%.0f KiB/s, quota %d KiB/s); "+
		"%v since start; screenshot in artifacts/dashboard.png",
		got.Polls, acked.Load()>>10, el.Round(time.Millisecond), float64(acked.Load())/1024/el.Seconds(), produceQuota>>10,
		time.Since(start).Round(time.Millisecond))
}

// run runs one browser action with a bound and fails the test on error.
func run[T any](t *testing.T, browser context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// startChromium starts headless Chromium with a fresh profile and returns
// its context and a func that closes it and waits for the process to end.
func startChromium(t *testing.T) (context.Context, func()) {
	t.Helper()
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(logf), chromedp.WithLogf(logf))
	// Start the browser now, without a deadline: it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			if err := chromedp.Cancel(cctx); err != nil {
				t.Logf("close chromium: %v", err)
			}
			ccancel()
			cancel()
			cancelAlloc() // waits for the process to exit
			if t.Failed() {
				mu.Lock()
				for _, l := range logs {
					t.Logf("chromedp: %s", l)
				}
				mu.Unlock()
			}
		})
	}
}

func saveFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The dashboard of a Tollgate cluster's instance, in a real browser: the
// "Tollgate cluster" panel lists both instances (this one marked), says
// this instance hears the exchange and has read the config log, warns that
// the two config files declare different quotas; and a producer that
// connects to the other instance only shows on this one's page as the
// cluster's rate, with this instance's part at 0. (Without cluster.id the
// panel stays hidden: TestDashboardQuotaModel.) The page is left in
// artifacts/dashboard-cluster.png.
func TestDashboardCluster(t *testing.T) {
	// Not parallel: a real browser (see TestDashboard).
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is missing at %s: %v", chromiumPath, err)
	}
	user := "ANONYMOUS"
	envs, _, _ := startTollgateCluster(t, 2, nil, func(i int, c *app.Config) {
		c.Authorization.AllowAnonymousDescribe = true
		// Different file quotas: the digests differ.
		q := float64((i + 1) << 20)
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &q}}
	})
	a, b := envs[0], envs[1]
	ctx := ctxT(t, 60*time.Second)
	if _, err := adminAs(t, b, "127.0.0.2").CreateTopic(ctx, 1, 1, nil, "dash-cluster"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, b, nil, kgo.DefaultProduceTopic("dash-cluster"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for range 8 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 32<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// And on, slowly, while the browser starts and the page loads: the
	// rate is over the last ~10 s, and a loaded machine can take longer
	// than that to get there. Bounded: 600 records at most.
	pctx, stopProducing := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < 600 && pctx.Err() == nil; i++ {
			cl.ProduceSync(pctx, &kgo.Record{Value: make([]byte, 32<<10)})
			select {
			case <-pctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { stopProducing(); <-produced }()

	browser, closeBrowser := startChromium(t)
	defer closeBrowser()
	wait := func(name, js string) {
		t.Helper()
		c, cancel := context.WithTimeout(browser, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(c, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			page := run(t, browser, chromedp.Evaluate[string](`document.getElementById('main').innerText`))
			t.Fatalf("%s: %v\npage:\n%s", name, err, page)
		}
	}
	c, cancel := context.WithTimeout(browser, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Steps(chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+a.App.HTTPAddr()+"/"))); err != nil {
		t.Fatal(err)
	}
	wait("the cluster panel with both instances",
		`!document.getElementById('cluster').hidden && !!document.querySelector('#instances-body tr[data-instance="tg-b"]')`)
	// The producer's bucket on A holds B's traffic only.
	sel := `#top-grid article[data-quota="producer_byte_rate"][data-user="ANONYMOUS"]`
	wait("the cluster's rate on A", `(() => {
		const c = document.querySelector('`+sel+`');
		return !!c && !c.querySelector('.rate').innerText.startsWith('0 ') && c.innerText.includes('this instance: 0 B/s');
	})()`)

	type page struct {
		Summary, Facts, Warn, Self, Other, Card, RateHead, Banner string
		WarnShown, FootLink                                       bool
	}
	got := run(t, browser, chromedp.Evaluate[page](`(() => {
		const text = (q) => { const e = document.querySelector(q); return e ? e.innerText : ''; };
		return {
			Summary: text('#cluster-summary'), Facts: text('#cluster-facts'), Warn: text('#cluster-warn'),
			WarnShown: !document.getElementById('cluster-warn').hidden,
			Self: text('#instances-body tr.self'), Other: text('#instances-body tr[data-instance="tg-b"]'),
			Card: text('`+sel+`'), RateHead: text('#throttled-rate-h'),
			FootLink: !document.getElementById('foot-cluster').hidden,
			Banner: document.getElementById('banner').hidden ? '' : text('#banner'),
		};
	})()`))
	t.Logf("cluster panel: %s\n%s\nself: %s\nother: %s\ncard: %s", got.Summary, got.Facts, got.Self, got.Other, got.Card)
	for _, c := range []struct{ what, text, want string }{
		{"summary", got.Summary, "Cluster e2e · 2 live instances · as instance tg-a sees it"},
		{"facts", got.Facts, "connected"},
		{"facts", got.Facts, "ready"},
		{"facts", got.Facts, "_tollgate-e2e-config"},
		{"facts", got.Facts, "published"},
		{"this instance's row", got.Self, "tg-a"},
		{"this instance's row", got.Self, "this instance"},
		{"this instance's row", got.Self, a.App.HTTPAddr()},
		{"the other's row", got.Other, b.App.HTTPAddr()},
		{"the other's row", got.Other, "differs"},
		{"the warning", got.Warn, "config files declare different quotas"},
		{"the card", got.Card, "Tollgate cluster, of 1 MiB/s quota"},
		{"the card", got.Card, "this instance: 0 B/s (0% of it)"},
		{"the throttled table's header", got.RateHead, "Cluster rate"},
	} {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s %q lacks %q", c.what, c.text, c.want)
		}
	}
	if !got.WarnShown || !got.FootLink || got.Banner != "" {
		t.Errorf("warning shown %v, footer link shown %v (want both), error banner %q", got.WarnShown, got.FootLink, got.Banner)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	saveFile(t, filepath.Join(root, "artifacts", "dashboard-cluster.png"), run(t, browser, chromedp.FullScreenshot(100)))
}

// docs/metrics.md lists exactly the tollgate_* metrics a running gateway
// exposes (with quotas, admission and traffic, so every family appears).
func TestMetricsReference(t *testing.T) {
	t.Parallel()
	user, rate := "ANONYMOUS", float64(1<<30)
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		// Shadow, so that the shadow series appear too.
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &rate, Shadow: true}}
		// 127.0.0.2 may not connect at all: a refusal for the per-IP metrics.
		c.BrokerConfigs = map[string]string{"max.connections.per.ip.overrides": "127.0.0.2:0"}
		// A one-instance Tollgate cluster, for the cluster series.
		c.Cluster.ID = "metrics"
		// A shadow tenant, for the tenant series.
		c.Tenants = []app.TenantEntry{{Name: "t", Principals: []string{user}, ProducerByteRate: &rate, Shadow: true}}
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic("m"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pushEveryChosen(t, ctx, cl) // every family of the clients' own metrics
	cl.Close()                  // a closed connection for tollgate_connections_closed_total
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if c, err := d.Dial("tcp", env.Bootstrap); err == nil {
		expectClosed(t, c)
		c.Close()
	}
	if !env.Logs.WaitFor("reason=client_closed", 5*time.Second) || !env.Logs.WaitFor("connection_limit_max.connections.per.ip", 5*time.Second) {
		t.Fatal("the closes did not happen")
	}
	resp, err := http.Get("http://" + env.App.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for name := range fams {
		if strings.HasPrefix(name, "tollgate_") {
			exposed[name] = true
		}
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(tollgate_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	var missing, stale []string
	for n := range exposed {
		if !documented[n] {
			missing = append(missing, n)
		}
	}
	// Each broker log directory's volume: kfake reports none, so these
	// appear only against a real Kafka (TestStorageProtection checks them
	// there).
	realVolumes := map[string]bool{"tollgate_storage_total_bytes": true, "tollgate_storage_usable_bytes": true}
	for n := range documented {
		if !exposed[n] && !realVolumes[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("exposed but not in docs/metrics.md: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("in docs/metrics.md but not exposed: %v", stale)
	}
	if len(exposed) < 10 {
		t.Errorf("only %d tollgate_* metrics exposed", len(exposed))
	}
}

// The Grafana dashboard uses only documented metrics.
func TestGrafanaDashboardUsesDocumentedMetrics(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	board, err := os.ReadFile("../docs/grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(board, &v); err != nil {
		t.Fatalf("grafana JSON: %v", err)
	}
	used := regexp.MustCompile(`tollgate_[a-z_]+`).FindAllString(string(board), -1)
	if len(used) < 5 {
		t.Fatalf("the dashboard uses only %d metrics", len(used))
	}
	for _, m := range used {
		if !strings.Contains(string(doc), "`"+m+"`") {
			t.Errorf("the Grafana dashboard uses %s, which docs/metrics.md does not list", m)
		}
	}
}

// seedLedger writes n minutes of (user, clientID)'s produce traffic from
// from on, one a minute, into the usage ledger directory dir, as another
// instance's ledger would hold them: 6 000 bytes a minute (100 B/s), the
// last minute 60 000.
func seedLedger(t *testing.T, dir, user, clientID string, from time.Time, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	from = from.UTC().Truncate(time.Minute)
	for i := range n {
		m := from.Add(time.Duration(i) * time.Minute)
		bytes := 6000
		if i == n-1 {
			bytes = 60000
		}
		line, err := json.Marshal(map[string]any{"v": 1, "minute": m.Format(time.RFC3339), "instance": "seed",
			"rows": []map[string]any{{"user": user, "client_id": clientID, "produce_bytes": bytes, "requests": 1}}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, m.Format("2006-01-02")+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(append(line, '\n'))
		f.Close()
	}
}
