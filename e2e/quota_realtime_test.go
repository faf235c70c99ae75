package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

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
