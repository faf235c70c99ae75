package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
)

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
