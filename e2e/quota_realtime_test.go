package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Quotas in real time, on every upstream: the produce quota, and the
// counterparts of the synctest tests' scenarios.

// One real-time run on loopback, with generous bounds, to show that the
// deterministic (synctest) quota tests hide nothing: a producer at full
// speed under producer_byte_rate is throttled to about the quota.
//
// On the real cluster too: 128 KiB/s is far below what its brokers take
// here (a 32 KiB batch with acks=all is a few ms), so what holds the
// producer is the gateway's quota, not the brokers.
func TestProduceQuotaRealTime(t *testing.T) {
	// Not parallel: measures a byte rate in real time.
	testkit.EachUpstream(t, produceQuotaRealTime)
}

func produceQuotaRealTime(t *testing.T, up *testkit.Upstream) {
	const q = 128 << 10 // bytes per second
	user := "ANONYMOUS"
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Quota.WindowNum = 11
		c.Quota.WindowSize = 250 * time.Millisecond
		rate := float64(q)
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &rate}}
	})
	topic := up.Topic(t, "rt")
	freshTopics(t, up, topic)
	hook := &throttleSeen{}
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.WithHooks(hook), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(32<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 8<<10)
	var sent atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	const run = 6 * time.Second
	for time.Since(start) < run {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err == nil && time.Since(start) <= run {
				sent.Add(int64(len(val)))
			}
			wg.Done()
		})
		if time.Since(start) > run {
			break
		}
		// Keep at most ~256 KiB buffered so the loop stays bounded.
		for cl.BufferedProduceBytes() > 256<<10 && time.Since(start) < run {
			time.Sleep(time.Millisecond)
		}
	}
	el := time.Since(start).Seconds()
	cl.AbortBufferedRecords(ctx)
	wg.Wait()
	// The first Q·(N−1)·W bytes pass unthrottled (a fresh bucket), then
	// the rate converges to Q.
	burst := float64(q) * 10 * 0.25
	got := (float64(sent.Load()) - burst) / el
	t.Logf("sent %d bytes in %.1fs: %.0f B/s after the burst (quota %d); %d throttles, max %v",
		sent.Load(), el, got, q, hook.throttles.Load(), time.Duration(hook.worst.Load()))
	if hook.throttles.Load() == 0 {
		t.Fatal("the producer never saw a throttle")
	}
	if got > 1.6*q || got < 0.4*q {
		t.Fatalf("achieved %.0f B/s under a %d B/s quota", got, q)
	}
}

// Real-time counterparts, on every upstream, of quota scenarios whose
// exact figures the synctest tests check on kfake in virtual time (a
// bubble cannot hold a real broker): client-id prefix groups, tenant
// ceilings and request_percentage's long polls, each with the real-time
// test's generous bounds (TestProduceQuotaRealTime), to show that the real
// broker's answers — its own pace, its purgatory — change nothing.

const (
	rtQ      = 128 << 10 // bytes per second: far below what the real brokers take here
	rtRun    = 6 * time.Second
	rtWindow = 250 * time.Millisecond // 11 of them: a start-up burst of 2.5 s of quota
)

// rtQuotaWindows are TestProduceQuotaRealTime's windows.
func rtQuotaWindows(c *app.Config) {
	c.Quota.WindowNum = 11
	c.Quota.WindowSize = rtWindow
}

// produceAcked produces at full speed to topic for d, as
// TestProduceQuotaRealTime does, and returns the record bytes acknowledged
// within d: what the gateway let through, not what the client wrote (a
// producer has up to five requests in flight on each broker connection,
// written but held or not yet charged).
func produceAcked(ctx context.Context, cl *kgo.Client, topic string, d time.Duration) int64 {
	val := make([]byte, vrecSize)
	var acked atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: val}, func(_ *kgo.Record, err error) {
			if err == nil && time.Since(start) <= d {
				acked.Add(int64(len(val)))
			}
			wg.Done()
		})
		// At most ~256 KiB buffered so the loop stays bounded.
		for cl.BufferedProduceBytes() > 256<<10 && time.Since(start) < d {
			time.Sleep(time.Millisecond)
		}
	}
	cl.AbortBufferedRecords(ctx)
	wg.Wait()
	return acked.Load()
}

// checkRealTimeRate checks bytes sent at full speed over el under a quota
// q whose bucket started full: after the burst (q·10·W), about q — within
// TestProduceQuotaRealTime's 0.4–1.6.
func checkRealTimeRate(t *testing.T, what string, bytes int64, q float64, el time.Duration) {
	t.Helper()
	burst := q * 10 * rtWindow.Seconds()
	got := (float64(bytes) - burst) / el.Seconds()
	t.Logf("%s: %d bytes in %v, %.0f B/s after the burst (quota %.0f)", what, bytes, el, got, q)
	if got > 1.6*q || got < 0.4*q {
		t.Errorf("%s: %.0f B/s under a %.0f B/s quota", what, got, q)
	}
}

// Two producers whose client-ids share a prefix share its one quota; a
// producer outside the prefix, offering 1.9 Q at a steady pace, gets all
// of it and is never throttled.
func TestPrefixGroupRealTime(t *testing.T) {
	// Not parallel: measures byte rates in real time.
	testkit.EachUpstream(t, prefixGroupRealTime)
}

func prefixGroupRealTime(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{}, rtQuotaWindows, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{ClientIDPrefix: ptrS("team-a-"), ProducerByteRate: ptrF(rtQ)}}
	})
	topic := up.Topic(t, "teams")
	freshTopics(t, up, topic)
	ids := []string{"team-a-1", "team-a-2"}
	group := make([]*counted, len(ids))
	sent := make([]int64, len(ids))
	free := &counted{}
	opts := func(id string, n *counted) []kgo.Opt {
		return []kgo.Opt{kgo.ClientID(id), kgo.WithHooks(n), kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32 << 10)}
	}
	ctx := ctxT(t, 60*time.Second)
	warm := newClient(t, env, nil, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := warm.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		group[i] = &counted{}
		cl := newClient(t, env, nil, opts(id, group[i])...)
		wg.Go(func() { sent[i] = produceAcked(ctx, cl, topic, rtRun) })
	}
	fc := newClient(t, env, nil, opts("team-b-1", free)...)
	const offered = 3 * vrecSize * 10 // 3 records a tenth of a second: 240 KiB/s, 1.9 Q
	wg.Go(func() { producePaced(fc, topic, offered, rtRun) })
	wg.Wait()
	el := rtRun // what is counted was acknowledged within it
	var sum int64
	for i, s := range sent {
		sum += s
		if float64(s) < 0.1*rtQ*rtRun.Seconds() {
			t.Errorf("%s starved: %d bytes in %v", ids[i], s, el)
		}
	}
	checkRealTimeRate(t, "two client-ids of prefix team-a- together", sum, rtQ, el)
	if got := float64(free.prod.Load()); got < 0.8*offered*rtRun.Seconds() {
		t.Errorf("team-b-1, outside the prefix, sent %.0f of the %.0f bytes it offered: it was limited", got, offered*rtRun.Seconds())
	}
	if n := free.throttles.Load(); n != 0 {
		t.Errorf("team-b-1, outside the prefix, was throttled %d times", n)
	}
	if group[0].throttles.Load()+group[1].throttles.Load() == 0 {
		t.Error("the prefix group was never throttled")
	}
}

// Two principals of one tenant, each with its own quota of 2 C, producing
// at full speed, are held together to the tenant's ceiling C.
func TestTenantCeilingRealTime(t *testing.T) {
	// Not parallel: measures byte rates in real time.
	testkit.EachUpstream(t, tenantCeilingRealTime)
}

func tenantCeilingRealTime(t *testing.T, up *testkit.Upstream) {
	users := []string{"svc-team-0", "svc-team-1"}
	env, keys := startTerminateOn(t, up, nil, users, rtQuotaWindows, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{DefaultUser: true, ProducerByteRate: ptrF(2 * rtQ)}}
		c.Tenants = []app.TenantEntry{{Name: "team", PrincipalPrefixes: []string{"svc-team-"}, ProducerByteRate: ptrF(rtQ)}}
	})
	topic := up.Topic(t, "tenant")
	freshTopics(t, up, topic)
	login := func(key string) kgo.Opt { return kgo.SASL(plain.Auth{User: "token", Pass: key}.AsMechanism()) }
	ctx := ctxT(t, 60*time.Second)
	warm := newClient(t, env, nil, login(keys[0]), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := warm.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	per := make([]*counted, len(users))
	sent := make([]int64, len(users))
	var wg sync.WaitGroup
	for i := range users {
		per[i] = &counted{}
		cl := newClient(t, env, nil, login(keys[i]), kgo.WithHooks(per[i]), kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32<<10))
		wg.Go(func() { sent[i] = produceAcked(ctx, cl, topic, rtRun) })
	}
	wg.Wait()
	el := rtRun // what is counted was acknowledged within it
	checkRealTimeRate(t, "the tenant's two principals together", sent[0]+sent[1], rtQ, el)
	for i, s := range sent {
		if float64(s) < 0.1*rtQ*rtRun.Seconds() {
			t.Errorf("%s starved: %d bytes in %v", users[i], s, el)
		}
		if per[i].throttles.Load() == 0 {
			t.Errorf("%s was never throttled", users[i])
		}
	}
	for _, u := range env.App.Engine().TenantUsage(time.Now()) {
		if u.Tenant == "team" && (u.Active != 2 || u.Throttles == 0) {
			t.Errorf("tenant usage %+v: want 2 active principals, throttles", u)
		}
	}
}

// TestRequestPercentageSparesLongPolls in real time, on every upstream: a
// real broker parks a long poll in its purgatory until a record arrives
// or max_wait_ms passes, and the gateway charges none of that wait, so a
// consumer tailing a quiet topic under request_percentage 1 is never
// throttled and reads every record.
func TestRequestPercentageSparesLongPollsRealTime(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, requestPercentageSparesLongPolls)
}

func requestPercentageSparesLongPolls(t *testing.T, up *testkit.Upstream) {
	const run = 8 * time.Second
	// kfake: 1 % (10 ms of the broker's time a second). The real cluster:
	// 20 % — a gateway charges a request's wall time on the upstream, and
	// on two cores shared with three JVMs a plain Metadata or ListOffsets
	// takes tens of ms there (Kafka would charge its handler thread's
	// fraction of a ms). Charged, the polls' waits would be ~100 % (one
	// 1 s poll a second): five times this quota, so the check still tells.
	p := 1.0
	if up.Real() {
		p = 20
	}
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{ClientID: kmsg.StringPtr("tail"), RequestPercentage: &p}}
	})
	topic := up.Topic(t, "quiet")
	freshTopics(t, up, topic)
	prod := newClient(t, env, nil, kgo.ClientID("trickle"), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := prod.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n := &throttleSeen{}
	cons := newClient(t, env, nil, kgo.ClientID("tail"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second), kgo.WithHooks(n))
	// A record every 700 ms: some polls expire, some end early when a
	// record arrives.
	tailQuietTopic(t, run, 700*time.Millisecond, prod, cons, n, func(i int) []byte { return fmt.Appendf(nil, "more-%d", i) })
}

// TestRequestPercentageHoldsCheapRequests in real time, on every upstream:
// a client sending cheap requests as fast as it can, each made to take the
// upstream rtWork more (slowBroker, in front of kfake or the real
// brokers), is held to its request_percentage of one thread, while the
// same requests from a client without a request quota take the upstream's
// time on both of their connections at once. The share is what the
// upstream spent on the hammer's requests as slowBroker times it — the
// broker's own time included, as the gateway charges it — not their count
// times rtWork: a real broker takes a few ms of its own per request here,
// which the count would leave out.
func TestRequestPercentageHoldsCheapRequestsRealTime(t *testing.T) {
	// Not parallel: measures the upstream's time in real time.
	testkit.EachUpstream(t, requestPercentageHoldsCheapRequests)
}

func requestPercentageHoldsCheapRequests(t *testing.T, up *testkit.Upstream) {
	const (
		pct    = 20.0 // percent of one thread
		rtWork = hammerWork
		// Kafka's windows, as in the synctest: a throttle is bounded by
		// one window, so the six requests the hammer has in flight
		// (6 × 5 ms) must be small beside it — with 250 ms windows
		// they were not, and the hammer got ~35 % on both upstreams.
		// Whole cycles of the sampled window (N·W = 11 s) after the
		// first, which holds the start-up allowance Q·(N−1)·W: two,
		// not the synctest's four, for the real time they take.
		window        = time.Second
		warm, measure = 11 * window, 22 * time.Second
		free          = 2 * time.Second
	)
	var mu sync.Mutex
	spent := map[string]time.Duration{} // client-id → upstream time answered within its window
	var h, f *hammer
	slow := &slowBroker{dial: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, work: rtWork,
		slow: func(key int16, clientID string) bool {
			return (clientID == "hammer" || clientID == "free") && (key == 1 || key == 2 || key == 3)
		},
		answered: func(clientID string, d time.Duration, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if w := map[string]*hammer{"hammer": h, "free": f}[clientID]; w != nil && !at.Before(w.from) && at.Before(w.to) {
				spent[clientID] += d
			}
		}}
	share := func(clientID string, w *hammer) float64 {
		mu.Lock()
		defer mu.Unlock()
		return 100 * spent[clientID].Seconds() / w.to.Sub(w.from).Seconds()
	}
	env := up.Start(t, app.Options{UpstreamDial: slow.DialContext}, func(c *app.Config) {
		p := pct
		c.Quotas = []app.QuotaEntry{{ClientID: kmsg.StringPtr("hammer"), RequestPercentage: &p}}
	})
	topic := up.Topic(t, "hammered")
	freshTopics(t, up, topic)
	ctx := ctxT(t, 90*time.Second)
	adm := kadm.NewClient(newClient(t, env, nil, kgo.ClientID("admin")))
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	leader := int32(-1)
	for deadline := time.Now().Add(15 * time.Second); leader < 0; time.Sleep(50 * time.Millisecond) {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && td[topic].Err == nil && len(td[topic].Partitions) == 1 && td[topic].Partitions[0].Leader >= 0 {
			id, leader = [16]byte(td[topic].ID), td[topic].Partitions[0].Leader
		} else if time.Now().After(deadline) {
			t.Fatalf("topic %s has no leader: %v %+v", topic, err, td[topic])
		}
	}

	start := time.Now()
	mu.Lock()
	h = &hammer{from: start.Add(warm), to: start.Add(warm + measure), topic: topic}
	f = &hammer{from: start, to: start.Add(free), topic: topic}
	mu.Unlock()
	hc := newClient(t, env, nil, kgo.ClientID("hammer"), kgo.WithHooks(h))
	fc := newClient(t, env, nil, kgo.ClientID("free"), kgo.WithHooks(f))
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithDeadline(ctx, h.to)
		defer cancel()
		h.run(ctx, t, hc, leader, id)
	})
	wg.Go(func() {
		ctx, cancel := context.WithDeadline(ctx, f.to)
		defer cancel()
		f.run(ctx, t, fc, leader, id)
	})
	wg.Wait()

	hs, fs := share("hammer", h), share("free", f)
	t.Logf("hammer: %.2f%% of a thread over %v after %v (quota %.0f%%; %d answered, %.2f%% by their count × %v), %d throttles, the longest %v",
		hs, measure, warm, pct, h.answered.Load(), h.share(), rtWork,
		h.throttles.Load(), time.Duration(h.worst.Load()))
	t.Logf("free: %.2f%% over its first %v, %d throttles", fs, free, f.throttles.Load())
	// TestProduceQuotaRealTime's bounds, not the synctest's ±10 %: two
	// cycles of the window, not four, in real time on a machine whose
	// two cores also run the brokers, measured by a stand-in whose
	// timing is not the gateway's to the millisecond (it came out at
	// 1.08–1.24 × the quota, kfake and the real Kafka alike). Far from
	// the ~200 % the same requests take without a quota.
	if hs < 0.4*pct || hs > 1.6*pct {
		t.Errorf("the hammer took %.2f%% of the upstream's time, want its quota %.0f%% within 0.4–1.6", hs, pct)
	}
	if h.throttles.Load() == 0 {
		t.Error("the hammer never saw throttle_time_ms")
	}
	if w := time.Duration(h.worst.Load()); w > window {
		t.Errorf("a throttle of %v: Kafka bounds request-quota throttles by the window (%v)", w, window)
	}
	if fs < 150 {
		t.Errorf("without a request quota the same requests took %.2f%% of the upstream's time, want ~200%% (two connections)", fs)
	}
	if f.throttles.Load() != 0 {
		t.Errorf("a client without a request quota was throttled %d times", f.throttles.Load())
	}
}
