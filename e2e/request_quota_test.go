package e2e

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/wire"
)

// Quotas on requests rather than bytes: request_percentage (a share of
// the broker's time) and controller_mutation_rate (partitions created or
// deleted per second).

// The hammers' cheap requests name hammerTopic; each takes the broker
// hammerWork (slowBroker).
const (
	hammerTopic = "hammered"
	hammerWork  = 5 * time.Millisecond
)

// slowBroker sits between the gateway and the embedded cluster
// (app.Options.UpstreamDial) and makes the brokers take work to answer
// each request slow picks — in a bubble the cluster otherwise answers in
// no time at all — one request at a time per connection, as a broker
// does (it reads a connection's next request only once it has answered
// the last), and other connections meanwhile. Other answers take no time
// but keep their place in line.
type slowBroker struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	work time.Duration
	slow func(key int16, clientID string) bool
	// answered, if set, is told of each slow request's answer: its
	// client-id, its upstream time as the gateway charges it (from its
	// writing, or the answer before it if later, to its own answer; the
	// broker's own time included) and when the answer passed.
	answered func(clientID string, upstream time.Duration, at time.Time)
}

func (b *slowBroker) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := b.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	near, far := net.Pipe()
	sc := &slowConn{Conn: c, b: b, answers: near, slow: map[int32]slowReq{}}
	go sc.answer(far)
	return sc, nil
}

// slowConn is one upstream connection: requests go straight to the broker,
// noting which are slow; answers come through a pipe, each in its turn.
type slowConn struct {
	net.Conn
	b       *slowBroker
	answers net.Conn

	head []byte // the start of the request being written, until its header is read
	rest int    // bytes of the request being written still to come after head

	mu   sync.Mutex
	slow map[int32]slowReq // slow requests in flight, by correlation id
}

// slowReq is a slow request in flight: whose, and when it was written.
type slowReq struct {
	clientID string
	written  time.Time
}

func (c *slowConn) Write(p []byte) (int, error) {
	c.note(p)
	return c.Conn.Write(p)
}

// note reads the header of each request frame written (a frame may come
// in several writes, several in one).
func (c *slowConn) note(p []byte) {
	for len(p) > 0 {
		if c.rest > 0 {
			n := min(c.rest, len(p))
			c.rest, p = c.rest-n, p[n:]
			continue
		}
		c.head = append(c.head, p...)
		p = nil
		if len(c.head) < 4 {
			return
		}
		size := 4 + int(binary.BigEndian.Uint32(c.head))
		need := min(size, 4+512) // any header of these clients fits in 512 bytes
		if len(c.head) < need {
			return
		}
		if h, err := wire.ParseRequestHeader(c.head[4:need]); err == nil && c.b.slow(h.Key, string(h.ClientID)) {
			c.mu.Lock()
			c.slow[h.CorrelationID] = slowReq{clientID: string(h.ClientID), written: time.Now()}
			c.mu.Unlock()
		}
		if len(c.head) >= size {
			p = c.head[size:] // the next frames
		} else {
			c.rest = size - len(c.head)
		}
		c.head = nil
	}
}

// answer passes the broker's answers to the pipe in order, a slow one
// work after the later of its arrival and the answer before it.
func (c *slowConn) answer(far net.Conn) {
	defer far.Close()
	var last, passed time.Time // when the last answer was due, and when it passed
	for {
		var size [4]byte
		if _, err := io.ReadFull(c.Conn, size[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
		copy(frame, size[:])
		if _, err := io.ReadFull(c.Conn, frame[4:]); err != nil || len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		c.mu.Lock()
		sr, slow := c.slow[corr]
		delete(c.slow, corr)
		c.mu.Unlock()
		at := time.Now()
		if last.After(at) {
			at = last
		}
		if slow {
			at = at.Add(c.b.work)
		}
		time.Sleep(time.Until(at))
		last = at
		if _, err := far.Write(frame); err != nil {
			return
		}
		if slow && c.b.answered != nil {
			// far.Write returned: the gateway has read the answer.
			now := time.Now()
			c.b.answered(sr.clientID, now.Sub(later(sr.written, passed)), now)
		}
		passed = time.Now()
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (c *slowConn) Read(p []byte) (int, error)        { return c.answers.Read(p) }
func (c *slowConn) SetReadDeadline(t time.Time) error { return c.answers.SetReadDeadline(t) }

func (c *slowConn) SetDeadline(t time.Time) error {
	c.answers.SetReadDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *slowConn) Close() error {
	c.answers.Close()
	return c.Conn.Close()
}

// hammer sends cheap requests to broker leader as fast as it can — two
// goroutines for each of Metadata, ListOffsets and an empty Fetch (max_wait
// 0: answered at once) — until ctx ends, and counts those sent and
// answered between from and to.
type hammer struct {
	throttleSeen
	from, to time.Time
	answered atomic.Int64 // within [from, to)
	topic    string       // the topic its requests name; "": hammerTopic
}

// throttleSeen counts the throttles a franz-go client is given (a hook).
type throttleSeen struct {
	throttles atomic.Int64
	worst     atomic.Int64 // the longest throttle_time_ms seen, ns
}

func (s *throttleSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	s.throttles.Add(1)
	for {
		w := s.worst.Load()
		if int64(d) <= w || s.worst.CompareAndSwap(w, int64(d)) {
			return
		}
	}
}

func (h *hammer) run(ctx context.Context, t *testing.T, cl *kgo.Client, leader int32, id [16]byte) {
	topic := h.topic
	if topic == "" {
		topic = hammerTopic
	}
	reqs := []func() kmsg.Request{
		func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			r.Topics = append(r.Topics, mt)
			return r
		},
		func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = topic
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
			r.Topics = append(r.Topics, lt)
			return r
		},
		func() kmsg.Request {
			r := fetchOne(topic, 0, 1<<40) // past the end: nothing to send
			r.MaxWaitMillis, r.MinBytes = 0, 1
			r.Topics[0].TopicID = id
			return r
		},
	}
	var wg sync.WaitGroup
	for i := range 2 * len(reqs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if n > 1_000_000 {
					t.Error("the hammer never stops")
					return
				}
				began := time.Now()
				if _, err := cl.Broker(int(leader)).Request(ctx, reqs[i%len(reqs)]()); err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: %v", kmsg.NameForKey(reqs[i%len(reqs)]().Key()), err)
					}
					return
				}
				if !began.Before(h.from) && !time.Now().After(h.to) {
					h.answered.Add(1)
				}
			}
		}()
	}
	wg.Wait()
}

// share is the hammer's share of one thread of the broker (its requests ×
// the work each costs ÷ the time), in percent.
func (h *hammer) share() float64 {
	return 100 * float64(h.answered.Load()) * hammerWork.Seconds() / h.to.Sub(h.from).Seconds()
}

// request_percentage enforced (issue "Quotas for how teams really work",
// point 5): a client sending cheap requests (Metadata, ListOffsets, empty
// Fetches) as fast as it can, each costing the broker 5 ms, is held to its
// percentage of one thread — the gateway charges the upstream's time for
// each request — with Kafka's window and throttle bound, while a
// byte-rate-limited producer next to it, on the same gateway and broker,
// gets its byte rate untouched. The same requests from a client without a
// request quota take the broker's time on both of their connections at
// once (~200 %), so it is the quota that holds the hammer.
func TestRequestPercentageHoldsCheapRequests(t *testing.T) {
	t.Parallel()
	const (
		pct = 20.0 // percent of one thread
		// Measured over whole cycles of Kafka's sampled window (N·W =
		// 11 s), after the first, which holds the start-up allowance
		// Q·(N−1)·W.
		warm, measure = 11 * time.Second, 44 * time.Second
		free          = 5 * time.Second
	)
	synctest.Test(t, func(t *testing.T) {
		nw := &testkit.Network{}
		slow := &slowBroker{dial: nw.DialContext, work: hammerWork, slow: func(key int16, clientID string) bool {
			return (clientID == "hammer" || clientID == "free") && (key == 1 || key == 2 || key == 3)
		}}
		env := testkit.StartInBubbleOn(t, nw, app.Options{UpstreamDial: slow.DialContext}, func(c *app.Config) {
			p := pct
			c.Quotas = []app.QuotaEntry{
				{ClientID: kmsg.StringPtr("hammer"), RequestPercentage: &p},
				quotaOf(nil, kmsg.StringPtr("producer"), vq, 0),
			}
		})
		admin := bubbleClient(t, env, kgo.ClientID("admin"))
		adm := kadm.NewClient(admin)
		ctx := context.Background()
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, hammerTopic); err != nil {
			t.Fatal(err)
		}
		td, err := adm.ListTopics(ctx, hammerTopic)
		if err != nil || td[hammerTopic].Err != nil {
			t.Fatalf("%v %v", err, td[hammerTopic].Err)
		}
		id, leader := [16]byte(td[hammerTopic].ID), td[hammerTopic].Partitions[0].Leader

		start := time.Now()
		h := &hammer{from: start.Add(warm), to: start.Add(warm + measure)}
		f := &hammer{from: start, to: start.Add(free)}
		hc := bubbleClient(t, env, kgo.ClientID("hammer"), kgo.WithHooks(h))
		fc := bubbleClient(t, env, kgo.ClientID("free"), kgo.WithHooks(f))
		n := &counted{}
		pc := bubbleClient(t, env, kgo.ClientID("producer"), kgo.WithHooks(n))

		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithDeadline(ctx, h.to)
			defer cancel()
			h.run(ctx, t, hc, leader, id)
		}()
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithDeadline(ctx, f.to)
			defer cancel()
			f.run(ctx, t, fc, leader, id)
		}()
		go func() { defer wg.Done(); produceFor(pc, "bytes", warm+measure) }()
		wg.Wait()

		t.Logf("hammer: %.2f%% of a thread over %v after %v (quota %.0f%%), %d throttles, the longest %v",
			h.share(), measure, warm, pct, h.throttles.Load(), time.Duration(h.worst.Load()))
		t.Logf("free: %.2f%% over its first %v, %d throttles", f.share(), free, f.throttles.Load())
		if s := h.share(); s < 0.9*pct || s > 1.1*pct {
			t.Errorf("the hammer took %.2f%% of the broker's time, want its quota %.0f%% ± 10%%", s, pct)
		}
		if h.throttles.Load() == 0 {
			t.Error("the hammer never saw throttle_time_ms")
		}
		if w := time.Duration(h.worst.Load()); w > time.Second {
			t.Errorf("a throttle of %v: Kafka bounds request-quota throttles by the 1 s window", w)
		}
		if s := f.share(); s < 150 {
			t.Errorf("without a request quota the same requests took %.2f%% of the broker's time, want ~200%% (two connections)", s)
		}
		if f.throttles.Load() != 0 {
			t.Errorf("a client without a request quota was throttled %d times", f.throttles.Load())
		}
		checkHeld(t, "the producer next to the hammer", n.prod.Load(), vq, warm+measure)
	})
}

// A consumer tailing a quiet topic spends its time in long polls the
// broker holds (max_wait_ms, min_bytes 1): the gateway does not charge that
// wait, as Kafka does not charge purgatory time, so a small
// request_percentage never throttles it — though one of its fetches is in
// flight almost all the time — and it reads every record as it arrives.
// (JoinGroup's wait is the unit tests': a franz-go group member throttled
// in a bubble can wedge it, blocked on a mutex, which synctest does not
// count as idle.)
func TestRequestPercentageSparesLongPolls(t *testing.T) {
	t.Parallel()
	const run = 30 * time.Second
	synctest.Test(t, func(t *testing.T) {
		env := testkit.StartInBubble(t, app.Options{}, func(c *app.Config) {
			p := 1.0 // 10 ms of the broker's time a second
			c.Quotas = []app.QuotaEntry{{ClientID: kmsg.StringPtr("tail"), RequestPercentage: &p}}
		})
		prod := bubbleClient(t, env, kgo.ClientID("trickle"), kgo.DefaultProduceTopic("quiet"))
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		n := &throttleSeen{}
		cons := bubbleClient(t, env, kgo.ClientID("tail"), kgo.ConsumeTopics("quiet"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second), kgo.WithHooks(n))
		// A record every 1.5 s: some polls expire, some end early when a
		// record arrives.
		tailQuietTopic(t, run, 1500*time.Millisecond, prod, cons, n, func(int) []byte { return []byte("more") })
	})
}

// tailQuietTopic polls with cons, a consumer of a quiet topic holding one
// record, its throttles counted by n, for run, while prod produces a record
// (value(i), the i-th) to the topic every interval; then it checks that the
// consumer's polls waited, that it was never throttled and that it read
// every record but the last one in flight.
func tailQuietTopic(t *testing.T, run, every time.Duration, prod, cons *kgo.Client, n *throttleSeen, value func(i int) []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	var wg sync.WaitGroup
	sent := 1
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: value(i)}).FirstErr(); err == nil {
					sent++
				}
			}
		}
	})
	got := 0
	for i := 0; ctx.Err() == nil; i++ {
		if i > 100_000 {
			t.Fatal("the consumer's polls do not wait")
		}
		got += cons.PollFetches(ctx).NumRecords()
	}
	wg.Wait()
	t.Logf("read %d of %d records in %v; %d throttles", got, sent, run, n.throttles.Load())
	if n.throttles.Load() != 0 {
		t.Errorf("a long-polling consumer was throttled %d times (the longest %v): its wait was charged",
			n.throttles.Load(), time.Duration(n.worst.Load()))
	}
	if got < sent-1 {
		t.Errorf("read %d of %d records", got, sent)
	}
}

// controller_mutation_rate in strict mode: topics are charged in request
// order while the bucket is not negative; once it is, the rest of the
// request fails with THROTTLING_QUOTA_EXCEEDED (89) and a throttle, and
// only the accepted topics reach the cluster.
func TestControllerMutationQuotaStrict(t *testing.T) {
	// Not parallel: checks throttle times of a real-time token bucket.
	testkit.EachUpstream(t, controllerMutationQuotaStrict)
}

func controllerMutationQuotaStrict(t *testing.T, up *testkit.Upstream) {
	user := "ANONYMOUS"
	rate := 1.0 // partitions per second; the bucket holds 11
	env := up.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: &user, ControllerMutationRate: &rate}}
	})
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, env, nil)
	var names []string
	name := map[string]string{} // t1 → the test's own topic t1-…
	for _, n := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "p1"} {
		name[n] = up.Topic(t, n)
		names = append(names, name[n])
	}
	freshTopics(t, up, names...)

	create := func(version int16, ns ...string) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = version
		req.TimeoutMillis = 5000
		for _, n := range ns {
			rt := kmsg.NewCreateTopicsRequestTopic()
			// Replication factor -1: the broker's default (3 on the
			// real cluster, whose min.insync.replicas is 2).
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name[n], 3, -1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// 11 tokens: t1 (8 left), t2 (5), t3 (2), t4 (-1: accepted, tokens were
	// not negative before it), t5 and t6 rejected.
	resp := create(7, "t1", "t2", "t3", "t4", "t5", "t6")
	answered := time.Now()
	want := []int16{0, 0, 0, 0, 89, 89}
	if len(resp.Topics) != len(want) {
		t.Fatalf("got %d topics, want %d", len(resp.Topics), len(want))
	}
	for i, tp := range resp.Topics {
		if tp.ErrorCode != want[i] || tp.Topic != names[i] {
			t.Errorf("topic %d: %s error %d, want %s error %d", i, tp.Topic, tp.ErrorCode, names[i], want[i])
		}
	}
	if resp.Topics[4].ErrorMessage == nil || *resp.Topics[4].ErrorMessage != "The throttling quota has been exceeded." {
		t.Errorf("error message %v", resp.Topics[4].ErrorMessage)
	}
	if resp.ThrottleMillis < 500 || resp.ThrottleMillis > 1500 {
		t.Errorf("throttle %d ms, want about 1000 (one token missing at 1/s)", resp.ThrottleMillis)
	}
	// A real cluster's brokers learn of new topics from the controller's
	// metadata log a little after CreateTopics is answered (kfake: at
	// once): wait, bounded, until the accepted topics are known, then
	// the rejected ones would be too had they been created.
	exists := map[string]bool{}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		exists = map[string]bool{}
		for _, tp := range md.Topics {
			if tp.Topic != nil && tp.ErrorCode == 0 {
				exists[*tp.Topic] = true
			}
		}
		if exists[name["t1"]] && exists[name["t2"]] && exists[name["t3"]] && exists[name["t4"]] || time.Now().After(deadline) {
			break
		}
	}
	for _, n := range []string{"t1", "t2", "t3", "t4"} {
		if !exists[name[n]] {
			t.Errorf("accepted topic %s was not created", name[n])
		}
	}
	for _, n := range []string{"t5", "t6"} {
		if exists[name[n]] {
			t.Errorf("rejected topic %s reached the cluster", name[n])
		}
	}
	// The client waited out the throttle, so the bucket is back at about
	// 0: the next topic is accepted and drives it to -3; the one after is
	// rejected, answered by the gateway alone. (Waited out here, not only
	// by the client: franz-go waits on the connection it was throttled
	// on, and kfake names one controller for good, but a KRaft cluster's
	// Metadata names a random broker as the controller, so the next
	// CreateTopics may leave on another connection, one the gateway did
	// not mute; the bucket, one for the user over every connection, is
	// still below zero then, and a strict request meeting it is refused
	// with the rest of the throttle, as Kafka's strict mode refuses it.)
	time.Sleep(time.Until(answered.Add(time.Duration(resp.ThrottleMillis) * time.Millisecond)))
	if r := create(7, "t7"); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis != 0 {
		t.Errorf("t7: error %d throttle %d, want accepted without throttle (strict throttles only rejections)", r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	if r := create(7, "t8"); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis < 1000 {
		t.Errorf("t8: error %d throttle %d, want 89 and a throttle of 2-3 s", r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
	// Permissive below v6 (a client that speaks Kafka 2.6's versions):
	// accepted, throttled by the deficit.
	old := newClient(t, env, nil, kgo.MaxVersions(kversion.V2_6_0()))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name["p1"], 3, -1
	req.Topics = append(req.Topics, rt)
	r, err := req.RequestWith(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version >= 6 {
		t.Fatalf("the old client spoke CreateTopics v%d", r.Version)
	}
	if r.Topics[0].ErrorCode != 0 || r.ThrottleMillis <= 0 {
		t.Errorf("permissive v%d: error %d throttle %d, want accepted and throttled", r.Version, r.Topics[0].ErrorCode, r.ThrottleMillis)
	}
}
