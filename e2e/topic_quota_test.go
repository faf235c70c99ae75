package e2e

import (
	"context"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Per-topic quotas end to end, in virtual time: franz-go producers and
// consumers through the gateway in front of the embedded cluster, a
// per-topic quota on one topic. What a per-topic quota counts is the
// topic's record batches, so the clients count them too: each batch's
// records (kgo's batch metrics) plus its 61-byte header.

// recordBatchHeader is the size of a v2 record batch's header, which kgo's
// batch metrics leave out.
const recordBatchHeader = 61

// topicSeconds counts, per topic, the record batch bytes produced or
// fetched in each second of virtual time.
type topicSeconds struct {
	start time.Time
	mu    sync.Mutex
	secs  map[string][]float64
	thr   int
}

func newTopicSeconds() *topicSeconds {
	return &topicSeconds{start: time.Now(), secs: map[string][]float64{}}
}

func (p *topicSeconds) add(topic string, n int) {
	i := int(time.Since(p.start) / time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.secs[topic]
	for len(s) <= i {
		s = append(s, 0)
	}
	s[i] += float64(n)
	p.secs[topic] = s
}

func (p *topicSeconds) OnProduceBatchWritten(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.ProduceBatchMetrics) {
	p.add(topic, m.CompressedBytes+recordBatchHeader)
}

func (p *topicSeconds) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	p.add(topic, m.CompressedBytes+recordBatchHeader)
}

func (p *topicSeconds) OnBrokerThrottle(kgo.BrokerMetadata, time.Duration, bool) {
	p.mu.Lock()
	p.thr++
	p.mu.Unlock()
}

// sum is topic's bytes in seconds [from, to).
func (p *topicSeconds) sum(topic string, from, to time.Duration) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n float64
	s := p.secs[topic]
	for i := int(from / time.Second); i < int(to/time.Second) && i < len(s); i++ {
		n += s[i]
	}
	return n
}

func (p *topicSeconds) throttles() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thr
}

// producePaced produces rate bytes a second to topic for d, in records of
// vrecSize, a tenth of a second's worth at a time (rate/10 a multiple of
// vrecSize, or the rest is not offered).
func producePaced(cl *kgo.Client, topic string, rate float64, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	val := make([]byte, vrecSize)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		for range int(rate / 10 / vrecSize) {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: val}, nil)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

const (
	topicWarm    = 12 * time.Second // the 10 s burst and a little
	topicMeasure = 30 * time.Second
)

// A per-topic quota holds its topic to Q and no other topic: a producer at
// full speed to the limited topic gets Q (within 3 % over 30 s after the
// start-up burst), while another producer of the same user and client-id
// offering 2.5 Q to another topic gets 2.5 Q, never throttled. One producer
// writing both topics at once is still held to Q on the limited one: its
// requests carry both, and the free topic's bytes wait with them.
func TestSynctestTopicQuotaProduce(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, f func(t *testing.T, env *testkit.Env)) {
		synctest.Test(t, func(t *testing.T) {
			env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
				c.Quotas = []app.QuotaEntry{{Topic: ptrS("held"), ProducerByteRate: ptrF(vq)}}
			})
			f(t, env)
		})
	}
	t.Run("two producers", func(t *testing.T) {
		run(t, func(t *testing.T, env *testkit.Env) {
			held, free := newTopicSeconds(), newTopicSeconds()
			// Small batches: one request is the grain of the measure.
			ch := bubbleClient(t, env, kgo.ClientID("app"), kgo.WithHooks(held), kgo.ProducerBatchMaxBytes(32<<10))
			cf := bubbleClient(t, env, kgo.ClientID("app"), kgo.WithHooks(free), kgo.ProducerBatchMaxBytes(32<<10))
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); produceFor(ch, "held", topicWarm+topicMeasure) }()
			go func() { defer wg.Done(); producePaced(cf, "free", 2.5*vq, topicWarm+topicMeasure) }()
			wg.Wait()
			r := held.sum("held", topicWarm, topicWarm+topicMeasure) / (vq * topicMeasure.Seconds())
			f := free.sum("free", topicWarm, topicWarm+topicMeasure) / (vq * topicMeasure.Seconds())
			t.Logf("held: %.4f Q over 30 s after %v; free: %.3f Q; first second of held %.2f Q; throttles %d / %d",
				r, topicWarm, f, held.sum("held", 0, time.Second)/vq, held.throttles(), free.throttles())
			if r < 0.97 || r > 1.03 {
				t.Errorf("the held topic: %.4f of its quota over 30 s, want 0.97–1.03", r)
			}
			if f < 2.45 {
				t.Errorf("the free topic: %.3f Q of the 2.5 Q offered: held by another topic's quota", f)
			}
			if held.throttles() == 0 || free.throttles() != 0 {
				t.Errorf("throttles: held %d (want some), free %d (want none)", held.throttles(), free.throttles())
			}
		})
	})
	t.Run("large requests, streamed", func(t *testing.T) {
		// Batches of 256 KiB on 3 partitions make requests of up to
		// 768 KiB, which the gateway streams (the per-topic bytes are
		// counted as they pass); a quota of 4 Q keeps the grain of one
		// request under 1 % of 30 s.
		synctest.Test(t, func(t *testing.T) {
			q := 4.0 * vq
			env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
				c.Quotas = []app.QuotaEntry{{Topic: ptrS("held"), ProducerByteRate: ptrF(q)}}
			})
			n := newTopicSeconds()
			large := &largest{}
			cl := bubbleClient(t, env, kgo.WithHooks(n, large), kgo.ProducerBatchMaxBytes(256<<10))
			produceFor(cl, "held", topicWarm+topicMeasure)
			r := n.sum("held", topicWarm, topicWarm+topicMeasure) / (q * topicMeasure.Seconds())
			t.Logf("held: %.4f of 4 Q over 30 s; largest produce request %d bytes", r, large.max())
			if large.max() < 64<<10 {
				t.Fatalf("no request was streamed: the largest was %d bytes", large.max())
			}
			if r < 0.97 || r > 1.03 {
				t.Errorf("the held topic: %.4f of its quota over 30 s, want 0.97–1.03", r)
			}
		})
	})
	t.Run("one producer, both topics", func(t *testing.T) {
		run(t, func(t *testing.T, env *testkit.Env) {
			n := newTopicSeconds()
			cl := bubbleClient(t, env, kgo.WithHooks(n), kgo.ProducerBatchMaxBytes(32<<10))
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); produceFor(cl, "held", topicWarm+topicMeasure) }()
			go func() { defer wg.Done(); producePaced(cl, "free", vq/2, topicWarm+topicMeasure) }()
			wg.Wait()
			r := n.sum("held", topicWarm, topicWarm+topicMeasure) / (vq * topicMeasure.Seconds())
			f := n.sum("free", topicWarm, topicWarm+topicMeasure) / (vq * topicMeasure.Seconds())
			t.Logf("held: %.4f Q, free: %.3f Q (offered 0.5 Q, in the same requests)", r, f)
			if r < 0.95 || r > 1.03 {
				t.Errorf("the held topic: %.4f of its quota over 30 s, want 0.95–1.03", r)
			}
		})
	})
}

// A per-topic consumer quota holds a consumer of its topic to Q (within
// 5 % over 30 s after the start-up burst) and no consumer of another topic.
func TestSynctestTopicQuotaConsume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			c.Quotas = []app.QuotaEntry{{Topic: ptrS("held"), ConsumerByteRate: ptrF(vq)}}
		})
		// Fill both topics with more than the consumers may read in the
		// run; producing is not limited.
		fill := bubbleClient(t, env, kgo.ProducerBatchMaxBytes(64<<10))
		val := make([]byte, 16<<10)
		var recs []*kgo.Record
		total := 2 * vq * (topicWarm + topicMeasure + vburst).Seconds()
		for i := 0; i < int(total)/len(val); i++ {
			recs = append(recs, &kgo.Record{Topic: "held", Value: val})
		}
		free := 0.0
		for i := 0; i < int(4*vq*topicMeasure.Seconds())/len(val); i++ {
			recs = append(recs, &kgo.Record{Topic: "free", Value: val})
			free += float64(len(val))
		}
		if err := fill.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		held, other := newTopicSeconds(), newTopicSeconds()
		ch := bubbleClient(t, env, kgo.ClientID("c"), kgo.ConsumeTopics("held"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(held))
		cf := bubbleClient(t, env, kgo.ClientID("c"), kgo.ConsumeTopics("free"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(other))
		var wg sync.WaitGroup
		for _, cl := range []*kgo.Client{ch, cf} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), topicWarm+topicMeasure)
				defer cancel()
				for ctx.Err() == nil {
					cl.PollFetches(ctx)
				}
			}()
		}
		wg.Wait()
		r := held.sum("held", topicWarm, topicWarm+topicMeasure) / (vq * topicMeasure.Seconds())
		got := other.sum("free", 0, 5*time.Second)
		t.Logf("held: %.4f Q over 30 s after %v; free: %.0f of %.0f bytes in the first 5 s (%.1f Q); throttles %d / %d",
			r, topicWarm, got, free, got/vq/5, held.throttles(), other.throttles())
		if r < 0.95 || r > 1.05 {
			t.Errorf("the held topic: %.4f of its quota over 30 s, want 0.95–1.05", r)
		}
		if got < 0.95*free {
			t.Errorf("the free topic: %.0f of %.0f bytes in 5 s: held by another topic's quota", got, free)
		}
		if other.throttles() != 0 {
			t.Errorf("the free topic's consumer was throttled %d times", other.throttles())
		}
	})
}

// largest is the largest produce request a client wrote.
type largest struct {
	mu sync.Mutex
	n  int
}

func (l *largest) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err == nil && key == 0 {
		l.mu.Lock()
		l.n = max(l.n, n)
		l.mu.Unlock()
	}
}

func (l *largest) max() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// A per-topic quota in a Tollgate cluster: set once through the first
// gateway's Kafka API (kadm, entity type topic), enforced by all three, and
// every gateway's per-topic bucket measures the whole cluster (usage
// reports carry the topic): producers 1, 2 and 1 on the three gateways
// writing the limited topic get Q in total, within ±5 % over 90 s after
// the start-up burst and the throttles that follow it (20 s: the four
// producers' burst overshoots, and its debt is paid by throttles up to
// about 15 s). 90 s, not 30: the clients count a batch when they write
// it, the gateways when it passes, and with four producers each holding
// requests in flight the window's edges alone are ±5 % of 30 s; in
// virtual time the longer window costs nothing.
func TestSynctestClusterTopicQuota(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		envs := bubbleCluster(t, 3, nil)
		adm := kadm.NewClient(bubbleClient(t, envs[0]))
		res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "topic", Name: kadmStr("held")}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: vq}},
		}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("alter through the first gateway: %v %+v", err, res)
		}
		for _, e := range envs {
			for e.App.Engine().ResolveTopic(0, "ANONYMOUS", "p", "held", time.Now()).Quota != vq {
				time.Sleep(10 * time.Millisecond)
			}
		}
		const warm, measure = 20 * time.Second, 90 * time.Second
		n := newTopicSeconds()
		var wg sync.WaitGroup
		for i, k := range []int{1, 2, 1} {
			for range k {
				cl := bubbleClient(t, envs[i], kgo.WithHooks(n), kgo.ClientID("p"), kgo.ProducerBatchMaxBytes(32<<10))
				wg.Go(func() { produceFor(cl, "held", warm+measure) })
			}
		}
		wg.Wait()
		got := n.sum("held", warm, warm+measure) / (vq * measure.Seconds())
		t.Logf("three gateways, 4 producers: %.4f × Q over %v after %v", got, measure, warm)
		if got < 0.95 || got > 1.05 {
			t.Errorf("the three gateways gave the topic %.4f × Q over %v, want within ±5 %%", got, measure)
		}
	})
}

// Over real sockets, through the Kafka API as any admin client sends it
// (kadm): per-topic quotas set, described with Kafka's filters, refused
// with Tollgate's messages, and applied at once — a producer writing the
// limited topic is throttled, one writing another topic is not.
func TestTopicQuotaThroughKadm(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, topicQuotaThroughKadm)
}

func topicQuotaThroughKadm(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	heldTopic, freeTopic := up.Topic(t, "held"), up.Topic(t, "free")
	freshTopics(t, up, heldTopic, freeTopic)
	ctx := ctxT(t, 60*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	topic := func(typ, name string, more ...kadm.ClientQuotaEntityComponent) kadm.ClientQuotaEntity {
		return append(kadm.ClientQuotaEntity{{Type: typ, Name: &name}}, more...)
	}
	anon := "ANONYMOUS"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: topic("topic", heldTopic, kadm.ClientQuotaEntityComponent{Type: "user", Name: &anon}),
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 64 << 10}}},
		{Entity: topic("topic-prefix", "logs-"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1 << 20}}},
		{Entity: topic("topic", "x", kadm.ClientQuotaEntityComponent{Type: "client-id", Name: &anon}),
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: topic("topic", "y"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 1}}},
	})
	if err != nil || len(res) != 4 {
		t.Fatalf("alter: %v %+v", err, res)
	}
	msgs := map[string]string{}
	for _, r := range res {
		for _, c := range r.Entity {
			if c.Type == "topic" || c.Type == "topic-prefix" {
				msgs[*c.Name] = r.ErrMessage
			}
		}
	}
	if msgs[heldTopic] != "" || msgs["logs-"] != "" ||
		msgs["x"] != "Invalid quota entity combination, a topic or topic-prefix quota is for a user, a client-id-prefix or every client: it cannot be combined with client-id or ip" ||
		msgs["y"] != "Invalid configuration key request_percentage" {
		t.Fatalf("alter results: %q", msgs)
	}
	got, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "topic", MatchType: 2}})
	if err != nil || len(got) != 1 || len(got[0].Entity) != 2 {
		t.Fatalf("describe any topic: %v %+v", err, got)
	}
	if users, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}}); err != nil || len(users) != 0 {
		t.Errorf("a user filter lists per-topic entities: %v %+v", err, users)
	}

	held, free := &counted{}, &counted{}
	// Uncompressed: what is charged is the record batches as sent.
	ph := newClient(t, env, nil, kgo.DefaultProduceTopic(heldTopic), kgo.AllowAutoTopicCreation(), kgo.WithHooks(held),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	pf := newClient(t, env, nil, kgo.DefaultProduceTopic(freeTopic), kgo.AllowAutoTopicCreation(), kgo.WithHooks(free),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 128<<10)
	// 1.5 MiB each: past the limited topic's 640 KiB burst.
	for range 12 {
		if err := pf.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 12 && held.throttles.Load() == 0; i++ {
		if err := ph.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if held.throttles.Load() == 0 || free.throttles.Load() != 0 {
		t.Errorf("throttles: held %d (want some), free %d (want none)", held.throttles.Load(), free.throttles.Load())
	}
}

// The dashboard shows a per-topic quota's bucket as a card of its own,
// with its topic prefix (held-*), beside the client quota's bucket of the
// same user and client-id.
func TestDashboardTopicQuota(t *testing.T) {
	// Not parallel: a real browser (see TestDashboard).
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is missing at %s: %v", chromiumPath, err)
	}
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{
			{User: ptrS("ANONYMOUS"), ProducerByteRate: ptrF(1 << 30)},
			{User: ptrS("ANONYMOUS"), TopicPrefix: ptrS("held-"), ProducerByteRate: ptrF(1000)},
		}
		c.Authorization.AllowAnonymousDescribe = true
	})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.ClientID("app"), kgo.DefaultProduceTopic("held-1"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 8<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	browser, closeBrowser := startChromium(t)
	defer closeBrowser()
	c, cancel := context.WithTimeout(browser, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(c, chromedp.Steps(chromedp.EmulateViewport(1280, 900), chromedp.Navigate("http://"+env.App.HTTPAddr()+"/"))); err != nil {
		t.Fatal(err)
	}
	js := `document.querySelectorAll('#top-grid article').length === 2 &&
		[...document.querySelectorAll('#top-grid article')].some((a) => a.innerText.includes('held-*') && a.innerText.includes('user+topic'))`
	if err := chromedp.Do(c, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		cards := run(t, browser, chromedp.Evaluate[string](`[...document.querySelectorAll('#top-grid article')].map((a) => a.innerText).join('\n---\n')`))
		t.Fatalf("no card of the per-topic bucket beside the client's: %v\n%s", err, cards)
	}
}
