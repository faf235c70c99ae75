// Command quota measures how accurately Tollgate holds clients to their
// quotas, in real time on loopback: a franz-go producer and consumer at
// full speed under Q, many client-ids each under its own quota at once, and
// a kafka-go producer (which ignores throttle_time_ms and is held by the
// connection mute alone). Rates are measured client-side in the bytes the
// quota counts (request bytes for produce, response bytes for fetch),
// after a start-up period, since a fresh bucket may burst Q·(N−1)·W.
//
// With tenants and client-id prefix groups (issue "Quotas for how teams
// really work"): ten principals of one tenant under its ceiling, twenty
// client-ids of one prefix group under its quota.
//
//	go run ./bench/quota -q 5242880 -warmup 12s -measure 30s
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
)

var (
	q       = flag.Float64("q", 5<<20, "quota in bytes per second for the single producer/consumer")
	warmup  = flag.Duration("warmup", 12*time.Second, "start-up period not measured")
	measure = flag.Duration("measure", 30*time.Second, "measured period")
	many    = flag.Int("clients", 50, "client-ids, each under its own quota")
	manyQ   = flag.Float64("clients-q", 200<<10, "quota of each of the many client-ids")
	manyB   = flag.Int("clients-batch", 64<<10, "ProducerBatchMaxBytes of each of the many client-ids (one request is the measuring grain: keep it well under Q·measure)")
	only    = flag.String("only", "", "run one scenario: single, many, kafkago, tenant, prefix")
	tenantC = flag.Float64("tenant-c", 5<<20, "the tenant's producer_byte_rate ceiling (tenant scenario)")
	groupQ  = flag.Float64("group-q", 5<<20, "the client-id prefix group's producer_byte_rate (prefix scenario)")
	alg     = flag.String("algorithm", "token_bucket", "quota.byte_rate_algorithm: token_bucket or sampled (Kafka's)")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	rate := func(v float64) *float64 { return &v }
	s := func(v string) *string { return &v }
	var entries []app.QuotaEntry
	entries = append(entries,
		app.QuotaEntry{ClientID: s("bench-producer"), ProducerByteRate: rate(*q)},
		app.QuotaEntry{ClientID: s("bench-consumer"), ConsumerByteRate: rate(*q)},
		app.QuotaEntry{ClientID: s("bench-kafkago"), ProducerByteRate: rate(*q)},
	)
	for i := 0; i < *many; i++ {
		entries = append(entries, app.QuotaEntry{ClientID: s(fmt.Sprintf("bench-many-%02d", i)), ProducerByteRate: rate(*manyQ)})
	}
	cfg := app.Config{
		Listeners: []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
		Quotas:    entries,
		Quota:     app.QuotaSettings{ByteRateAlgorithm: *alg},
	}
	dir, _ := os.MkdirTemp("", "tgbench")
	defer os.RemoveAll(dir)
	cfg.DataDir = dir
	users, keys := groupsSetup(&cfg, dir)
	a, err := app.Start(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer a.Stop(ctx)
	boot := a.Bootstrap()
	fmt.Printf("quota.byte_rate_algorithm=%s, quota.window.num=11, quota.window.size=1s; warm-up %v, measured %v\n\n", *alg, *warmup, *measure)
	if *only == "" || *only == "single" {
		single(boot)
	}
	if *only == "" || *only == "many" {
		manyClients(boot)
	}
	if *only == "" || *only == "kafkago" {
		kafkaGo(boot)
	}
	if *only == "" || *only == "tenant" {
		tenantScenario(a.Gateway().BootstrapAddrs()["SASL_PLAINTEXT"], users, keys)
	}
	if *only == "" || *only == "prefix" {
		prefixScenario(boot)
	}
}

// meter counts bytes in one-second buckets from a start time.
type meter struct {
	start time.Time
	mu    sync.Mutex
	secs  []float64
}

func newMeter() *meter { return &meter{start: time.Now()} }

func (m *meter) add(n int) {
	s := int(time.Since(m.start) / time.Second)
	m.mu.Lock()
	for len(m.secs) <= s {
		m.secs = append(m.secs, 0)
	}
	m.secs[s] += float64(n)
	m.mu.Unlock()
}

// over returns the mean rate over [from, from+d).
func (m *meter) over(from, d time.Duration) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, b := int(from/time.Second), int((from+d)/time.Second)
	var sum float64
	for i := a; i < b && i < len(m.secs); i++ {
		sum += m.secs[i]
	}
	return sum / d.Seconds()
}

// cycles returns the mean rate over whole burst cycles inside
// [from, from+d): from the first second a burst starts (a second above
// burst bytes after one at or below it; a burst can spread over a few
// seconds) to the last such start. Kafka's sampled
// window lets a throttled client through in one burst about every window,
// so a fixed measuring window holds one burst more or less depending on
// where it starts; whole cycles do not. ok is false with fewer than two
// bursts.
func (m *meter) cycles(from, d time.Duration, burst float64) (rate float64, n int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, b := int(from/time.Second), min(int((from+d)/time.Second), len(m.secs))
	var starts []int
	for i := max(a, 1); i < b; i++ {
		// A dip inside a burst is not a new one: bursts come about a
		// window apart (N−1 = 10 s here), never within 5 s.
		if m.secs[i] > burst && m.secs[i-1] <= burst && (len(starts) == 0 || i-starts[len(starts)-1] >= 5) {
			starts = append(starts, i)
		}
	}
	if len(starts) < 2 {
		return 0, 0, false
	}
	first, last := starts[0], starts[len(starts)-1]
	var sum float64
	for i := first; i < last; i++ {
		sum += m.secs[i]
	}
	return sum / float64(last-first), len(starts) - 1, true
}

func (m *meter) shape(n int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := ""
	for i := 0; i < n && i < len(m.secs); i++ {
		out += fmt.Sprintf(" %.1f", m.secs[i]/(1<<20))
	}
	return out
}

// wireHook counts produce request bytes and fetch response bytes as the
// quota counts them (after the 4-byte size prefix) and when it counts
// them: a produce request when its response passes (a request the gateway
// holds is not yet counted), a fetch response when it is read.
type wireHook struct{ prod, fetch *meter }

func (h wireHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key == int16(kmsg.Produce) && h.prod != nil && e.WriteErr == nil && e.ReadErr == nil {
		h.prod.add(e.BytesWritten - 4)
	}
}

func (h wireHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err == nil && key == int16(kmsg.Fetch) && h.fetch != nil {
		h.fetch.add(n - 4)
	}
}

func produceLoop(ctx context.Context, cl *kgo.Client, topic string, size int, acked ...*meter) {
	val := make([]byte, size)
	for ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: val}, func(r *kgo.Record, err error) {
			if err == nil && len(acked) > 0 {
				acked[0].add(len(r.Value))
			}
		})
		for cl.BufferedProduceBytes() > 4<<20 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
}

func single(boot string) {
	total := *warmup + *measure
	// Fill a topic for the consumer, unthrottled (no quota on this id).
	fill, _ := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ClientID("bench-fill"), kgo.DefaultProduceTopic("bench-consume"),
		kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	need := int(*q*total.Seconds()*1.3) / (64 << 10)
	val := make([]byte, 64<<10)
	var wg sync.WaitGroup
	for i := 0; i < need; i++ {
		wg.Add(1)
		fill.Produce(context.Background(), &kgo.Record{Value: val}, func(*kgo.Record, error) { wg.Done() })
	}
	wg.Wait()
	fill.Close()

	pm, cm := newMeter(), newMeter()
	prod, _ := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ClientID("bench-producer"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(wireHook{prod: pm}))
	cons, _ := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ClientID("bench-consumer"), kgo.ConsumeTopics("bench-consume"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(wireHook{fetch: cm}))
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	go produceLoop(ctx, prod, "bench-produce", 16<<10)
	for ctx.Err() == nil {
		cons.PollFetches(ctx)
	}
	prod.Close()
	cons.Close()
	p, c := pm.over(*warmup, *measure), cm.over(*warmup, *measure)
	fmt.Printf("## One producer and one consumer at full speed, Q = %.2f MiB/s each\n\n", *q/(1<<20))
	fmt.Printf("| client | achieved MiB/s | achieved ÷ Q |\n|---|---|---|\n")
	fmt.Printf("| franz-go producer | %.3f | %.4f |\n| franz-go consumer | %.3f | %.4f |\n\n", p/(1<<20), p / *q, c/(1<<20), c / *q)
	// Between bursts a throttled client gets well under Q a second; a
	// burst (up to Q·(N−1)·W, spread over a few seconds) starts with a
	// second above 2Q.
	burst := *q * 2
	pc, pn, pok := pm.cycles(*warmup, *measure, burst)
	cc, cn, cok := cm.cycles(*warmup, *measure, burst)
	if pok && cok {
		fmt.Printf("Over whole burst cycles inside the measured period: producer %.4f of Q (%d cycles), consumer %.4f of Q (%d cycles).\n\n", pc / *q, pn, cc / *q, cn)
	}
	fmt.Printf("Shape, MiB per second, whole run (%d s):\n\n- producer:%s\n- consumer:%s\n\n", int(total.Seconds()), pm.shape(int(total.Seconds())), cm.shape(int(total.Seconds())))
}

func manyClients(boot string) {
	total := *warmup + *measure
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	meters := make([]*meter, *many)
	ackMeters := make([]*meter, *many)
	var wg sync.WaitGroup
	for i := range meters {
		meters[i] = newMeter()
		ackMeters[i] = newMeter()
		cl, _ := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ClientID(fmt.Sprintf("bench-many-%02d", i)),
			kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.WithHooks(wireHook{prod: meters[i]}), kgo.ProducerBatchMaxBytes(int32(*manyB)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			produceLoop(ctx, cl, "bench-many", 8<<10, ackMeters[i])
		}()
	}
	wg.Wait()
	var ratios, acked []float64
	for i, m := range meters {
		ratios = append(ratios, m.over(*warmup, *measure) / *manyQ)
		acked = append(acked, ackMeters[i].over(*warmup, *measure) / *manyQ)
	}
	sort.Float64s(acked)
	fmt.Printf("(acknowledged record values ÷ Q: min %.4f, median %.4f, max %.4f)\n", acked[0], acked[len(acked)/2], acked[len(acked)-1])
	sort.Float64s(ratios)
	worst := math.Max(math.Abs(1-ratios[0]), math.Abs(ratios[len(ratios)-1]-1))
	fmt.Printf("## %d client-ids at once, each with its own quota of %.0f KiB/s (batches up to %d KiB)\n\n", *many, *manyQ/1024, *manyB>>10)
	fmt.Printf("| min ÷ Q | median ÷ Q | max ÷ Q | worst deviation |\n|---|---|---|---|\n| %.4f | %.4f | %.4f | %.2f%% |\n\n",
		ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1], 100*worst)
}

// countConn counts the bytes a client writes, Kafka frames included.
type countConn struct {
	net.Conn
	m *meter
}

func (c countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.m.add(n)
	return n, err
}

func kafkaGo(boot string) {
	total := *warmup + *measure
	m := newMeter()
	var frames atomic.Int64
	dialer := &net.Dialer{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(boot),
		Topic:        "bench-kafkago",
		RequiredAcks: kafka.RequireOne,
		BatchSize:    64,
		BatchBytes:   1 << 20,
		BatchTimeout: time.Millisecond,
		Async:        false,
		Transport: &kafka.Transport{
			ClientID: "bench-kafkago",
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				frames.Add(1)
				return countConn{c, m}, nil
			},
		},
		AllowAutoTopicCreation: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	val := make([]byte, 16<<10)
	msgs := make([]kafka.Message, 64)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: val}
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w.WriteMessages(ctx, msgs...)
			}
		}()
	}
	wg.Wait()
	w.Close()
	r := m.over(*warmup, *measure)
	fmt.Printf("## kafka-go producer (ignores throttle_time_ms), Q = %.2f MiB/s\n\n", *q/(1<<20))
	fmt.Printf("| achieved MiB/s | achieved ÷ Q |\n|---|---|\n| %.3f | %.4f |\n\n", r/(1<<20), r / *q)
	fmt.Printf("(bytes written by the client on its connections, all requests included)\n\n")
}
