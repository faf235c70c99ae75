package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Upstream faults, put between the gateway and the brokers by testkit's
// fault layer (app.Options.UpstreamDial): a broker that dies mid-request,
// one that stalls, leaders that move, every broker gone and back. Whatever
// the brokers do, a client is never left hanging: it gets an answer, an
// error or a closed connection, and recovers through metadata.

// startFaultsInBubble runs the gateway in a synctest bubble with the fault
// layer between it and the embedded cluster.
func startFaultsInBubble(t *testing.T, edit ...func(*app.Config)) (*testkit.Env, *testkit.FaultDialer) {
	t.Helper()
	nw := &testkit.Network{}
	faults := &testkit.FaultDialer{Dial: nw.DialContext}
	env := testkit.StartInBubbleOn(t, nw, app.Options{UpstreamDial: faults.DialContext}, edit...)
	return env, faults
}

// faultClient is a franz-go client of env (in a bubble when env.Net is
// set), closed when the test ends.
func faultClient(t *testing.T, env *testkit.Env, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(env.Bootstrap), kgo.AllowAutoTopicCreation(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}
	if env.Net != nil {
		base = append(base, kgo.Dialer(env.Net.DialContext))
	}
	return franzClient(t, append(base, opts...)...)
}

// acked records what a producer got acknowledged, by value.
type acked struct {
	mu   sync.Mutex
	vals map[string]bool
	errs int
}

func (a *acked) promise(r *kgo.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs++
		return
	}
	if a.vals == nil {
		a.vals = map[string]bool{}
	}
	a.vals[string(r.Value)] = true
}

func (a *acked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.vals)
}

// missingFrom lists the acknowledged values not in seen.
func (a *acked) missingFrom(seen map[string]bool) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for v := range a.vals {
		if !seen[v] {
			out = append(out, v)
		}
	}
	return out
}

// readAll reads topic from the start to its current end, with a client of
// the given seed brokers (the upstream cluster directly, or the gateway).
func readAll(t *testing.T, ctx context.Context, topic string, opts ...kgo.Opt) map[string]bool {
	t.Helper()
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v (partitions left: %v)", topic, ctx.Err(), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)] = true
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return seen
}

// apiVersionsV3 is what a client sends first on a connection.
func apiVersionsV3() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "tollgate-e2e-faults", "1"
	return req
}

// waitUntil polls cond every step (virtual time in a bubble) until it
// holds, failing after limit.
func waitUntil(t *testing.T, what string, step, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(step)
	}
	return time.Since(start)
}

// Every broker gone from the gateway's side (their connections reset, new
// dials refused) and back. While they are gone the gateway is not ready,
// the broker ports close and clients fail cleanly: the bootstrap port
// closes each connection (upstream_unreachable), a gone broker's port
// refuses, a client's request ends in an error within its retry timeout,
// not a hang. When they come back, the gateway's metadata client resumes on
// its own, the ports reopen, the gateway is ready again and the same
// clients carry on: the producer delivers what it held and what it sends
// next, and the consumer group consumes everything.
func TestFaultEveryBrokerGoneAndBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env, faults := startFaultsInBubble(t)
		gw := env.App.Gateway()
		upstream := env.App.DevCluster().ListenAddrs()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		const topic = "gone"
		prod := faultClient(t, env, kgo.DefaultProduceTopic(topic))
		cons := faultClient(t, env, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("gone-g"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		seen := map[string]bool{}
		consume := func(want int) {
			t.Helper()
			for len(seen) < want {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of %d", len(seen), want)
				}
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			}
		}
		produce := func(from, to int) error {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)})
			}
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			return prod.ProduceSync(pctx, recs...).FirstErr()
		}
		if err := produce(0, 10); err != nil {
			t.Fatal(err)
		}
		consume(10)
		if !gw.Ready() {
			t.Fatal("not ready with every broker up")
		}
		boot := env.Bootstrap
		host, _, _ := net.SplitHostPort(boot)
		portsBefore := gw.BrokerPorts("PLAINTEXT")
		if len(portsBefore) != 3 {
			t.Fatalf("broker ports %v, want 3", portsBefore)
		}

		for _, a := range upstream {
			faults.Set(a, testkit.Fault{Refuse: true})
			faults.Reset(a)
		}
		took := waitUntil(t, "the gateway not ready with every broker gone", time.Second, 2*time.Minute,
			func() bool { return !gw.Ready() })
		t.Logf("not ready %v after every broker went", took)
		if ports := gw.BrokerPorts("PLAINTEXT"); len(ports) != 0 {
			t.Errorf("broker ports still open with every broker gone: %v", ports)
		}
		for id, p := range portsBefore {
			addr := net.JoinHostPort(host, strconv.Itoa(int(p)))
			if _, err := env.Net.DialContext(ctx, "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("node %d's port %s: %v, want refused", id, addr, err)
			}
		}
		// The bootstrap port stays open; a connection on it is closed, not
		// left waiting, at its first request that needs a broker
		// (ApiVersions may be answered from the listener's cache).
		raw := dialRawVia(t, ctx, env.Net, boot)
		start := time.Now()
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		if _, err := raw.roundTrip(md); err == nil {
			t.Error("a request on the bootstrap port was answered with every broker gone")
		}
		if el := time.Since(start); el > 0 {
			t.Errorf("the bootstrap connection was closed after %v, want at once (refused dials)", el)
		}
		if len(logLines(env, "reason=upstream_unreachable")) == 0 {
			t.Error("no connection closed with upstream_unreachable")
		}
		// A client's request ends in an error within its own retry
		// timeout: every attempt is refused or closed at once, none is
		// left waiting for an answer (which would take kgo's 10 s request
		// timeout per attempt).
		probe := faultClient(t, env, kgo.RetryTimeout(5*time.Second))
		start = time.Now()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, probe); err == nil {
			t.Error("a metadata request was answered with every broker gone")
		}
		if el := time.Since(start); el > 6*time.Second {
			t.Errorf("a metadata request took %v to fail, want its 5 s retry timeout", el)
		}
		// A record sent now waits in the producer (kgo keeps records it
		// has no leader for) and is delivered once the brokers are back.
		during := make(chan error, 1)
		prod.Produce(ctx, &kgo.Record{Value: []byte("during")}, func(_ *kgo.Record, err error) { during <- err })

		for _, a := range upstream {
			faults.Clear(a)
		}
		took = waitUntil(t, "the gateway ready again", 100*time.Millisecond, time.Minute, gw.Ready)
		t.Logf("ready %v after the brokers came back", took)
		waitUntil(t, "the broker ports reopened", 100*time.Millisecond, time.Minute, func() bool {
			return len(gw.BrokerPorts("PLAINTEXT")) == 3
		})
		for id, p := range gw.BrokerPorts("PLAINTEXT") {
			if !env.Net.Listening(net.JoinHostPort(host, strconv.Itoa(int(p)))) {
				t.Errorf("node %d's port %d reported open but not listening", id, p)
			}
		}
		if err := produce(10, 20); err != nil {
			t.Fatalf("produce after the brokers came back: %v", err)
		}
		if err := <-during; err != nil {
			t.Fatalf("the record sent while the brokers were gone: %v", err)
		}
		consume(21)
		if !seen["during"] {
			t.Error("the record sent while the brokers were gone was not consumed")
		}
	})
}

// sessionGoroutines counts the goroutines running a gateway session
// (reader, responder) or sending what a lifted stall held, in the whole
// process: only tests that do not run in parallel may compare counts.
func sessionGoroutines() int {
	n, _ := sessionGoroutineStacks()
	return n
}

// sessionGoroutineStacks is sessionGoroutines with their stacks.
func sessionGoroutineStacks() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count, stacks := 0, ""
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/proxy.(*session)") || strings.Contains(g, "internal/testkit.(*faultConn).flush") {
			count++
			stacks += g + "\n\n"
		}
	}
	return count, stacks
}

// A broker that stalls — takes the request and never answers — holds no
// client beyond upstream.request_timeout plus the request's own wait (a
// Fetch's max_wait_ms): then the session closes with upstream_timeout, to
// the nanosecond in virtual time, its goroutines end and the gateway's
// session count is back where it was. A franz-go producer whose record is
// stuck behind the stall is disconnected the same way, retries, and once
// the broker answers again gets its record acknowledged, stored once.
func TestFaultStalledBrokerTimesOut(t *testing.T) {
	// Not parallel: counts the session goroutines of the whole process.
	synctest.Test(t, func(t *testing.T) {
		const requestTimeout = 30 * time.Second
		env, faults := startFaultsInBubble(t, func(c *app.Config) { c.Upstream.RequestTimeout = requestTimeout })
		gw := env.App.Gateway()
		dev := env.App.DevCluster()
		victim := dev.ListenAddrs()[1] // node 1
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		const topic = "stalled"
		{
			adm := kadm.NewClient(faultClient(t, env))
			if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			adm.Close()
		}
		for p := int32(0); p < 3; p++ {
			if err := dev.MoveTopicPartition(topic, p, p); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		baseSessions, baseGoroutines := gw.Sessions(), sessionGoroutines()
		host, _, _ := net.SplitHostPort(env.Bootstrap)
		node1 := net.JoinHostPort(host, strconv.Itoa(int(gw.BrokerPorts("PLAINTEXT")[1])))

		faults.Set(victim, testkit.Fault{Stall: true})
		raw := dialRawVia(t, ctx, env.Net, node1)
		fetch := fetchOne(topic, 1, 0)
		fetch.Version, fetch.MaxWaitMillis, fetch.MinBytes = 12, 500, 1
		start := time.Now()
		if err := raw.send(fetch); err != nil {
			t.Fatal(err)
		}
		raw.c.SetReadDeadline(time.Now().Add(10 * time.Minute))
		if _, err := readFrame(raw.r); !errors.Is(err, io.EOF) {
			t.Fatalf("the stalled fetch ended with %v, want the gateway closing the connection", err)
		}
		if el, want := time.Since(start), requestTimeout+500*time.Millisecond; el != want {
			t.Errorf("the stalled fetch's connection closed after %v, want request_timeout + max_wait_ms = %v", el, want)
		}
		raw.c.Close()
		synctest.Wait()
		if len(logLines(env, "node=1", "reason=upstream_timeout")) != 1 {
			t.Errorf("log lines for the timeout: %q", logLines(env, "reason=upstream_timeout"))
		}
		if n := gw.Sessions(); n != baseSessions {
			t.Errorf("%d sessions after the stalled one closed, want %d", n, baseSessions)
		}
		if n, stacks := sessionGoroutineStacks(); n != baseGoroutines {
			t.Errorf("%d session goroutines after the stalled session closed, want %d:\n%s", n, baseGoroutines, stacks)
		}

		// A real producer behind the stall.
		faults.Clear(victim)
		prod := faultClient(t, env, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequestTimeoutOverhead(10*time.Minute)) // the gateway's timeout is the one that fires
		for p := int32(0); p < 3; p++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		faults.Set(victim, testkit.Fault{Stall: true})
		done := make(chan error, 1)
		prod.Produce(ctx, &kgo.Record{Partition: 1, Value: []byte("behind the stall")}, func(_ *kgo.Record, err error) { done <- err })
		time.Sleep(requestTimeout + 15*time.Second) // past timeout_ms (10 s) + request_timeout
		if n := len(logLines(env, "node=1", "reason=upstream_timeout")); n < 2 {
			t.Errorf("the producer's stalled connection was not closed (%d upstream_timeout lines)", n)
		}
		select {
		case err := <-done:
			t.Fatalf("the record behind the stall finished while it lasted: %v", err)
		default:
		}
		faults.Clear(victim)
		if err := <-done; err != nil {
			t.Fatalf("the record behind the stall, once the broker answers: %v", err)
		}
		n := 0
		for v := range readAll(t, ctx, topic, kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext)) {
			if v == "behind the stall" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the record behind the stall is stored %d times, want once", n)
		}
	})
}

// produceUntil sends records "<prefix>-<i>" to topic from a goroutine, a
// few at a time, until stop is closed (or limit records); acks records
// what came back acknowledged. The returned channel closes when it has
// stopped.
func produceUntil(ctx context.Context, cl *kgo.Client, topic, prefix string, limit int, stop <-chan struct{}, acks *acked) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < limit; i++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}, acks.promise)
			if i%20 == 19 {
				time.Sleep(5 * time.Millisecond)
			}
			for cl.BufferedProduceRecords() > 2000 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	return done
}

// consumeAll polls cl until every value acks holds has been seen.
func consumeAll(t *testing.T, ctx context.Context, cl *kgo.Client, seen map[string]bool, acks ...*acked) {
	t.Helper()
	for {
		left := 0
		for _, a := range acks {
			left += len(a.missingFrom(seen))
		}
		if left == 0 {
			return
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the consumer group is missing %d acknowledged records", left)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// A broker dies while requests to it are in flight: it took a produce
// request and never answered, then its connections are reset, its address
// refuses, and it leaves the cluster (its partitions led by the others).
// Only the client connections that reached it close; the producers — a
// franz-go one (idempotent, acks=all) and a sarama one (acks=all) — get a
// disconnect, retry, find the new leaders through metadata and carry on,
// and every record either acknowledged is in the topic afterwards and is
// consumed by a consumer group through the gateway.
func TestFaultBrokerDiesMidRequest(t *testing.T) {
	t.Parallel()
	faults := &testkit.FaultDialer{}
	env := testkit.Start(t, app.Options{UpstreamDial: faults.DialContext})
	ctx := ctxT(t, 90*time.Second)
	dev := env.App.DevCluster()
	victim := dev.ListenAddrs()[1] // node 1
	const topic = "dies"
	adm := kadm.NewClient(faultClient(t, env))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if err := dev.MoveTopicPartition(topic, p, p); err != nil {
			t.Fatal(err)
		}
	}
	prod := faultClient(t, env, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	cons := faultClient(t, env, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("dies-g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	scfg := saramaConfig(sarama.V2_8_0_0, &testkit.Dialer{})
	scfg.Producer.Retry.Max = 100
	scfg.Producer.Retry.Backoff = 100 * time.Millisecond
	sprod, err := sarama.NewSyncProducer([]string{env.Bootstrap}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sprod.Close()

	kacks, sacks := &acked{}, &acked{}
	stop := make(chan struct{})
	kdone := produceUntil(ctx, prod, topic, "kgo", 20000, stop, kacks)
	sdone := make(chan struct{})
	go func() {
		defer close(sdone)
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("sarama-%d", i)
			_, _, err := sprod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: int32(i % 3), Value: sarama.StringEncoder(v)})
			sacks.promise(&kgo.Record{Value: []byte(v)}, err)
		}
	}()
	waitUntil(t, "acknowledged records before the fault", 5*time.Millisecond, 30*time.Second, func() bool {
		return kacks.count() >= 200 && sacks.count() >= 30
	})

	// Node 1 takes requests and never answers...
	faults.Set(victim, testkit.Fault{Stall: true})
	waitUntil(t, "a request held by node 1", 5*time.Millisecond, 10*time.Second, func() bool { return faults.Held(victim) > 0 })
	time.Sleep(100 * time.Millisecond)
	// ...then dies: its connections reset, its address refuses, the
	// cluster moves its partitions to the others.
	faults.Set(victim, testkit.Fault{Refuse: true})
	if n := faults.Reset(victim); n == 0 {
		t.Fatal("no connection to node 1 to reset")
	}
	if err := dev.RemoveNode(1); err != nil {
		t.Fatal(err)
	}
	kAtKill, sAtKill := kacks.count(), sacks.count()
	waitLog(t, env, 10*time.Second, "node=1", "reason=upstream_closed")
	waitLog(t, env, 10*time.Second, "upstream broker gone; closing its port", "node=1")
	waitUntil(t, "acknowledged records after the broker died", 10*time.Millisecond, 45*time.Second, func() bool {
		return kacks.count() >= kAtKill+300 && sacks.count() >= sAtKill+30
	})
	close(stop)
	<-kdone
	<-sdone
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged: franz-go %d (%d at the kill), sarama %d (%d at the kill); failed: %d, %d",
		kacks.count(), kAtKill, sacks.count(), sAtKill, kacks.errs, sacks.errs)
	if kacks.errs > 0 {
		t.Errorf("%d franz-go records failed; an idempotent producer with unlimited retries should lose none", kacks.errs)
	}
	if strings.Contains(env.Logs.String(), "node=0 reason=upstream_closed") || strings.Contains(env.Logs.String(), "node=2 reason=upstream_closed") {
		t.Error("connections to live brokers were closed")
	}
	stored := readAll(t, ctx, topic, kgo.SeedBrokers(dev.ListenAddrs()...))
	for _, a := range []*acked{kacks, sacks} {
		if missing := a.missingFrom(stored); len(missing) > 0 {
			t.Errorf("%d acknowledged records are not in the topic, e.g. %v", len(missing), missing[:min(5, len(missing))])
		}
	}
	consumeAll(t, ctx, cons, map[string]bool{}, kacks, sacks)
}

// Leaders move again and again under load: a franz-go producer (which
// follows a NOT_LEADER answer's new leader and endpoint, KIP-951, without
// a metadata round trip), a kafka-go writer (which refreshes metadata)
// and a franz-go consumer group keep going, every acknowledged record is
// consumed, and no client ever dialed anything but a gateway address: the
// endpoints in the answers were rewritten.
func TestFaultLeadersMove(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 90*time.Second)
	dev := env.App.DevCluster()
	const topic, partitions = "moves", 6
	kd, gd := &testkit.Dialer{}, &testkit.Dialer{}
	adm := kadm.NewClient(faultClient(t, env, kgo.Dialer(kd.DialContext)))
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	move := func(round int) {
		t.Helper()
		for p := int32(0); p < partitions; p++ {
			if err := dev.MoveTopicPartition(topic, p, (p+int32(round))%3); err != nil {
				t.Fatal(err)
			}
		}
	}
	move(0)
	prod := faultClient(t, env, kgo.Dialer(kd.DialContext), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	cons := faultClient(t, env, kgo.Dialer(kd.DialContext), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("moves-g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	w := &kafka.Writer{Addr: kafka.TCP(env.Bootstrap), Topic: topic, Transport: kafkaGoTransport(t, gd),
		RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}, BatchSize: 1,
		MaxAttempts: 50, WriteBackoffMin: 20 * time.Millisecond, WriteBackoffMax: 200 * time.Millisecond}
	defer w.Close()

	kacks, gacks := &acked{}, &acked{}
	stop := make(chan struct{})
	kdone := produceUntil(ctx, prod, topic, "kgo", 50000, stop, kacks)
	gdone := make(chan struct{})
	go func() {
		defer close(gdone)
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("kafkago-%d", i)
			err := w.WriteMessages(ctx, kafka.Message{Value: []byte(v)})
			gacks.promise(&kgo.Record{Value: []byte(v)}, err)
		}
	}()
	seen := map[string]bool{}
	for round := 1; round <= 8; round++ {
		k, g := kacks.count(), gacks.count()
		move(round)
		// Each round, both producers get records acknowledged by the
		// new leaders before the next move.
		waitUntil(t, fmt.Sprintf("progress after move %d", round), 10*time.Millisecond, 20*time.Second, func() bool {
			return kacks.count() >= k+100 && gacks.count() >= g+10
		})
	}
	close(stop)
	<-kdone
	<-gdone
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged: franz-go %d, kafka-go %d; failed: %d, %d", kacks.count(), gacks.count(), kacks.errs, gacks.errs)
	if kacks.errs > 0 {
		t.Errorf("%d franz-go records failed while leaders moved", kacks.errs)
	}
	consumeAll(t, ctx, cons, seen, kacks, gacks)
	checkDialsGatewayOnly(t, "franz-go", env, kd.Addrs())
	checkDialsGatewayOnly(t, "kafka-go", env, gd.Addrs())
}

// /readyz over the admin port follows the upstream: 503 once every broker
// is gone (the first metadata refresh to fail finds none reachable, within
// its 10 s), 200 again once they are back.
func TestFaultReadyzFollowsUpstream(t *testing.T) {
	t.Parallel()
	faults := &testkit.FaultDialer{}
	env := testkit.Start(t, app.Options{UpstreamDial: faults.DialContext})
	defer http.DefaultClient.CloseIdleConnections()
	readyz := func() int {
		resp, err := http.Get("http://" + env.App.HTTPAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz %d with every broker up", code)
	}
	upstream := env.App.DevCluster().ListenAddrs()
	for _, a := range upstream {
		faults.Set(a, testkit.Fault{Refuse: true})
		faults.Reset(a)
	}
	took := waitUntil(t, "/readyz 503", 100*time.Millisecond, 30*time.Second, func() bool { return readyz() == http.StatusServiceUnavailable })
	t.Logf("/readyz 503 %v after every broker went", took)
	for _, a := range upstream {
		faults.Clear(a)
	}
	waitUntil(t, "/readyz 200", 50*time.Millisecond, 10*time.Second, func() bool { return readyz() == http.StatusOK })
}

// A slow broker is not a dead one: with every write to node 1 and every
// read from it 2 s late, then with its answers read 7 bytes at a time, the
// gateway's responder reassembles every frame and nothing times out below
// upstream.request_timeout; a producer and a consumer of a partition it
// leads get everything, only later.
func TestFaultSlowBroker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env, faults := startFaultsInBubble(t)
		dev := env.App.DevCluster()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		const topic = "slow"
		adm := kadm.NewClient(faultClient(t, env))
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		if err := dev.MoveTopicPartition(topic, 0, 1); err != nil {
			t.Fatal(err)
		}
		faults.Set(dev.ListenAddrs()[1], testkit.Fault{Delay: 2 * time.Second})
		prod := faultClient(t, env, kgo.DefaultProduceTopic(topic))
		start := time.Now()
		var recs []*kgo.Record
		for i := 0; i < 50; i++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "slow-%d", i)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 4*time.Second {
			t.Errorf("producing through the slow broker took %v, want at least its 2 s each way", el)
		}
		faults.Set(dev.ListenAddrs()[1], testkit.Fault{ReadChunk: 7, ReadEvery: time.Millisecond})
		start = time.Now()
		seen := readAll(t, ctx, topic, kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext))
		for _, r := range recs {
			if !seen[string(r.Value)] {
				t.Errorf("%s not consumed", r.Value)
			}
		}
		if el := time.Since(start); el < 100*time.Millisecond {
			t.Errorf("consuming through the slow reads took %v, want at least 1 ms per 7 bytes", el)
		}
		synctest.Wait()
		if ls := logLines(env, "node=1", "reason=upstream"); len(ls) > 0 {
			t.Errorf("connections to the slow broker were closed: %q", ls)
		}
	})
}

// A broker that resets the connection in the middle of a request (it got
// the first 10 bytes): the session closes, the producer retries on a new
// connection, and once the broker behaves its record is stored once.
func TestFaultResetMidWrite(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		env, faults := startFaultsInBubble(t)
		dev := env.App.DevCluster()
		victim := dev.ListenAddrs()[1]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		const topic = "reset"
		adm := kadm.NewClient(faultClient(t, env))
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		if err := dev.MoveTopicPartition(topic, 0, 1); err != nil {
			t.Fatal(err)
		}
		prod := faultClient(t, env, kgo.DefaultProduceTopic(topic))
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		faults.Set(victim, testkit.Fault{PartialWrite: 10, PartialReset: true})
		done := make(chan error, 1)
		prod.Produce(ctx, &kgo.Record{Value: []byte("reset")}, func(_ *kgo.Record, err error) { done <- err })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if len(logLines(env, "node=1", "reason=upstream_closed", "connection reset")) == 0 {
			t.Fatal("no session closed by the broker's reset")
		}
		faults.Clear(victim)
		if err := <-done; err != nil {
			t.Fatalf("the record sent into the resets: %v", err)
		}
		n := 0
		for v := range readAll(t, ctx, topic, kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(env.Net.DialContext)) {
			if v == "reset" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the record is stored %d times, want once", n)
		}
	})
}
