package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

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
