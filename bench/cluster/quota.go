package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The producers of one client-id and what they get acknowledged. Bytes are
// counted as the quota counts them: a Produce request's size (header and
// body, after the 4-byte size prefix), when its response arrives — the
// gateway charges a request when its response passes.

const (
	tenant     = "bench-tenant"
	quotaTopic = "bench-quota"
)

// meter counts bytes in one-second slots from a common start.
type meter struct {
	start time.Time
	mu    sync.Mutex
	secs  []float64
}

func (m *meter) add(n int) {
	s := int(time.Since(m.start) / time.Second)
	if s < 0 {
		return
	}
	m.mu.Lock()
	for len(m.secs) <= s {
		m.secs = append(m.secs, 0)
	}
	m.secs[s] += float64(n)
	m.mu.Unlock()
}

// sum returns the bytes counted in seconds [from, to).
func (m *meter) sum(from, to int) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t float64
	for i := max(from, 0); i < to && i < len(m.secs); i++ {
		t += m.secs[i]
	}
	return t
}

// e2eHook counts a franz-go client's answered Produce requests.
type e2eHook struct{ m *meter }

func (h e2eHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key == int16(kmsg.Produce) && e.WriteErr == nil && e.ReadErr == nil {
		h.m.add(e.BytesWritten - 4)
	}
}

// The records are 4 KiB and a request carries at most 64 KiB of them, so
// that one request is a small part of a second of Q (the measuring grain).
const (
	recordSize = 4 << 10
	batchBytes = 64 << 10
)

// franzProducer produces records as fast as the gateway lets it until ctx
// ends (at most 4 MiB buffered), then closes.
func franzProducer(ctx context.Context, boot string, m *meter, wg *sync.WaitGroup) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot), kgo.ClientID(tenant), kgo.DefaultProduceTopic(quotaTopic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(batchBytes), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.WithHooks(e2eHook{m}))
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cl.Close()
		val := make([]byte, recordSize)
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Value: val}, nil)
			for cl.BufferedProduceBytes() > 4<<20 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	return nil
}

// kafkaGoProducer runs a segmentio/kafka-go Writer (which ignores
// throttle_time_ms: only the gateway's mute holds it) from two goroutines,
// 16 records per call, until ctx ends.
func kafkaGoProducer(ctx context.Context, boot string, m *meter, wg *sync.WaitGroup) error {
	dialer := &net.Dialer{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(boot),
		Topic:        quotaTopic,
		RequiredAcks: kafka.RequireOne,
		BatchSize:    16,
		BatchBytes:   batchBytes,
		BatchTimeout: time.Millisecond,
		Transport: &kafka.Transport{
			ClientID: tenant,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return newAckConn(c, m), nil
			},
		},
	}
	val := make([]byte, recordSize)
	msgs := make([]kafka.Message, 16)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: val}
	}
	var inner sync.WaitGroup
	for range 2 {
		inner.Add(1)
		go func() {
			defer inner.Done()
			for ctx.Err() == nil {
				w.WriteMessages(ctx, msgs...)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		inner.Wait()
		w.Close()
	}()
	return nil
}

// ackConn counts, on a kafka-go connection, the size of each Produce
// request when the response with its correlation id is read. It follows
// the frames only by their size prefix and header (read with kbin).
type ackConn struct {
	net.Conn
	m       *meter
	mu      sync.Mutex
	out, in testkit.FrameHeads
	pending map[int32]int // correlation id → request size
}

func newAckConn(c net.Conn, m *meter) *ackConn {
	return &ackConn{Conn: c, m: m, out: testkit.FrameHeads{Head: 12}, in: testkit.FrameHeads{Head: 8}, pending: map[int32]int{}}
}

func (c *ackConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.out.Feed(p[:n], func(h []byte, _ int) {
		r := kbin.Reader{Src: h}
		size, key, _, corr := r.Int32(), r.Int16(), r.Int16(), r.Int32()
		if key == int16(kmsg.Produce) {
			c.pending[corr] = int(size)
		}
	})
	c.mu.Unlock()
	return n, err
}

func (c *ackConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in.Feed(p[:n], func(h []byte, _ int) {
		r := kbin.Reader{Src: h}
		_, corr := r.Int32(), r.Int32()
		if size, ok := c.pending[corr]; ok {
			delete(c.pending, corr)
			c.m.add(size)
		}
	})
	c.mu.Unlock()
	return n, err
}

// quotaRun is one run of the producers of one client-id under one quota.
type quotaRun struct {
	clustered bool
	move      bool
	q         float64
	dur, skip time.Duration
	meters    [3]*meter
	// the bucket's rate as each instance saw it at the end of each
	// phase: tollgate_quota_rate and tollgate_quota_instance_rate.
	rates [][3][2]float64
	cpu   [3]time.Duration
}

// runQuota starts three instances (one Tollgate cluster or three alone),
// sets the quota and runs the producers: 1 franz-go via A, 2 franz-go and
// 2 kafka-go via B, 1 kafka-go via C; with move, at the midpoint the
// producer on A stops and one starts on C.
func runQuota(o options, clustered, move bool) (*quotaRun, error) {
	run := &quotaRun{clustered: clustered, move: move, q: o.q, dur: o.dur, skip: o.skip}
	return run, onTrio(o, clustered, run.produce)
}

func (run *quotaRun) produce(t *trio, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.dur+2*time.Minute)
	defer cancel()
	if err := t.createTopic(ctx, quotaTopic, 3); err != nil {
		return err
	}
	name := tenant
	if err := t.setQuota(ctx, &name, "producer_byte_rate", o.q); err != nil {
		return err
	}
	start := time.Now()
	for i := range run.meters {
		run.meters[i] = &meter{start: start}
	}
	var cpu0 [3]time.Duration
	for i, in := range t.inst {
		cpu0[i] = in.cpu()
	}
	runCtx, stop := context.WithDeadline(ctx, start.Add(o.dur))
	defer stop()
	aCtx, stopA := context.WithCancel(runCtx)
	defer stopA()
	var wg sync.WaitGroup
	a, b, c := t.inst[0].boot, t.inst[1].boot, t.inst[2].boot
	errs := []error{
		franzProducer(aCtx, a, run.meters[0], &wg),
		franzProducer(runCtx, b, run.meters[1], &wg),
		franzProducer(runCtx, b, run.meters[1], &wg),
		kafkaGoProducer(runCtx, b, run.meters[1], &wg),
		kafkaGoProducer(runCtx, b, run.meters[1], &wg),
		kafkaGoProducer(runCtx, c, run.meters[2], &wg),
	}
	for _, err := range errs {
		if err != nil {
			stop()
			wg.Wait()
			return err
		}
	}
	mid := o.dur / 2
	moved := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case now := <-tick.C:
			el := now.Sub(start)
			s := int(el/time.Second) - 1
			if s >= 0 && s%5 == 4 {
				run.progress(s)
			}
			if run.move && !moved && el >= mid {
				moved = true
				run.rates = append(run.rates, scrapeRates(t))
				stopA()
				if err := franzProducer(runCtx, c, run.meters[2], &wg); err != nil {
					stop()
					wg.Wait()
					return err
				}
				fmt.Fprintf(os.Stderr, "  %3.0f s: moved the producer on A to C\n", el.Seconds())
			}
		}
		for _, in := range t.inst {
			if err := in.alive(); err != nil {
				stop()
				wg.Wait()
				return err
			}
		}
	}
	run.rates = append(run.rates, scrapeRates(t))
	for i, in := range t.inst {
		run.cpu[i] = in.cpu() - cpu0[i]
	}
	stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "  some producers did not stop within 30 s")
	}
	return nil
}

// progress prints the five seconds up to s: what each instance got
// acknowledged, ÷ Q.
func (run *quotaRun) progress(s int) {
	var parts []string
	tot := 0.0
	for i, m := range run.meters {
		v := m.sum(s-4, s+1) / 5 / run.q
		tot += v
		parts = append(parts, fmt.Sprintf("%s %.2f", names[i], v))
	}
	fmt.Fprintf(os.Stderr, "  %3d s: total %.2f Q (%s)\n", s+1, tot, strings.Join(parts, ", "))
}

// scrapeRates reads the tenant's bucket rate as each instance knows it.
func scrapeRates(t *trio) [3][2]float64 {
	var out [3][2]float64
	for i, in := range t.inst {
		ms, err := benchkit.Scrape(in.admin)
		if err != nil {
			continue
		}
		for k, v := range ms {
			if !strings.Contains(k, `client_id="`+tenant+`"`) || !strings.Contains(k, `quota="producer_byte_rate"`) {
				continue
			}
			switch {
			case strings.HasPrefix(k, "tollgate_quota_rate{"):
				out[i][0] = v
			case strings.HasPrefix(k, "tollgate_quota_instance_rate{"):
				out[i][1] = v
			}
		}
	}
	return out
}

// window is a span of seconds of a run, and how it is reported.
type window struct {
	label    string
	from, to int
	qs       bool // in Q·s (a burst) rather than ÷ Q (a rate)
}

func (run *quotaRun) windows() []window {
	d, skip := int(run.dur/time.Second), int(run.skip/time.Second)
	if !run.move {
		return []window{
			{"first 10 s (start-up burst), Q·s", 0, 10, true},
			{fmt.Sprintf("steady, %d–%d s, ÷ Q", skip, d), skip, d, false},
		}
	}
	mid := d / 2
	return []window{
		{"first 10 s (start-up burst), Q·s", 0, 10, true},
		{fmt.Sprintf("steady before the move, %d–%d s, ÷ Q", skip, mid), skip, mid, false},
		{fmt.Sprintf("10 s after the move, %d–%d s, Q·s", mid, mid+10), mid, mid + 10, true},
		{fmt.Sprintf("steady after the move, %d–%d s, ÷ Q", mid+5, d), mid + 5, d, false},
	}
}

// value returns instance i's (or, with i < 0, the total) bytes over w, in
// Q·s or ÷ Q.
func (run *quotaRun) value(w window, i int) float64 {
	var sum float64
	for j, m := range run.meters {
		if i < 0 || i == j {
			sum += m.sum(w.from, w.to)
		}
	}
	if w.qs {
		return sum / run.q
	}
	return sum / run.q / float64(w.to-w.from)
}

// shape returns the total per second over the run, in Q.
func (run *quotaRun) shape() string {
	var parts []string
	for s := 0; s < int(run.dur/time.Second); s++ {
		var v float64
		for _, m := range run.meters {
			v += m.sum(s, s+1)
		}
		parts = append(parts, fmt.Sprintf("%.2f", v/run.q))
	}
	return strings.Join(parts, " ")
}
