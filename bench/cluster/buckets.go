package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
	"github.com/tollgate/tollgate/internal/cluster"
)

// Many client-ids, each with its own bucket: a default client-id quota
// gives every client-id one (as Kafka keeps a sensor per client). A
// connection's client-id is whatever each request's header says — the
// gateway accounts every request to the bucket of its header's client-id —
// so a few raw connections cycle through all of them: one small Produce
// request (acks=1) per client-id per period, client-id i always through
// instance i mod 3.

const bucketTopic = "bench-buckets"

// produceVersion: the last Produce version with the plain response header
// (a correlation id and nothing else).
const produceVersion = 8

type bucketRun struct {
	clustered bool
	measure   time.Duration
	// per instance, over the measured window
	sent, acked, failed [3]uint64
	throttled           [3]uint64
	cpu                 [3]time.Duration
	x0, x1              [3]cluster.ExchangeStats
	buckets             [3]float64 // tollgate_quota_buckets{quota="producer_byte_rate"} at the end
	rssKiB              [3]int64
}

// rawConn is one connection to an instance's port for a partition's
// leader, cycling through its client-ids.
type rawConn struct {
	inst      int
	addr      string
	partition int32
	fmts      []*kmsg.RequestFormatter // one per client-id
	sent      atomic.Uint64
	acked     atomic.Uint64
	failed    atomic.Uint64
	throttled atomic.Uint64
}

func runBuckets(o options, clustered bool) (*bucketRun, error) {
	run := &bucketRun{clustered: clustered, measure: o.bucketMeasure}
	return run, onTrio(o, clustered, run.produce)
}

func (run *bucketRun) produce(t *trio, o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.bucketWarmup+o.bucketMeasure+2*time.Minute)
	defer cancel()
	const partitions = 3
	if err := t.createTopic(ctx, bucketTopic, partitions); err != nil {
		return err
	}
	if err := t.setQuota(ctx, nil, "producer_byte_rate", o.bucketQ); err != nil {
		return err
	}
	// Every instance's gateway port for each partition's leader.
	var conns []*rawConn
	for i, in := range t.inst {
		leaders, err := leaderAddrs(ctx, in, bucketTopic)
		if err != nil {
			return err
		}
		for c := range o.bucketConns {
			p := int32(c % partitions)
			conns = append(conns, &rawConn{inst: i, addr: leaders[p], partition: p})
		}
	}
	// Client-id k goes through instance k mod 3, on that instance's
	// connections in turn.
	perInst := [3]int{}
	for k := range o.buckets {
		i := k % 3
		c := conns[i*o.bucketConns+perInst[i]%o.bucketConns]
		perInst[i]++
		c.fmts = append(c.fmts, kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("bench-bucket-%05d", k))))
	}
	runCtx, stop := context.WithTimeout(ctx, o.bucketWarmup+o.bucketMeasure)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, len(conns))
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.run(runCtx, o.bucketRate, o.bucketRecord); err != nil && runCtx.Err() == nil {
				errc <- fmt.Errorf("instance %s, %s: %w", names[c.inst], c.addr, err)
				stop()
			}
		}()
	}
	var sent0, acked0, failed0, thr0 [3]uint64
	var cpu0 [3]time.Duration
	snapshot := func(sent, acked, failed, thr *[3]uint64, x *[3]cluster.ExchangeStats) error {
		*sent, *acked, *failed, *thr = [3]uint64{}, [3]uint64{}, [3]uint64{}, [3]uint64{}
		for _, c := range conns {
			sent[c.inst] += c.sent.Load()
			acked[c.inst] += c.acked.Load()
			failed[c.inst] += c.failed.Load()
			thr[c.inst] += c.throttled.Load()
		}
		if !run.clustered {
			return nil
		}
		for i, in := range t.inst {
			st, err := in.status()
			if err != nil {
				return err
			}
			x[i] = st.Exchange
		}
		return nil
	}
	select {
	case <-runCtx.Done():
	case <-time.After(o.bucketWarmup):
	}
	if runCtx.Err() != nil {
		wg.Wait()
		return firstErr(errc, runCtx)
	}
	for i, in := range t.inst {
		cpu0[i] = in.cpu()
	}
	t0 := time.Now()
	if err := snapshot(&sent0, &acked0, &failed0, &thr0, &run.x0); err != nil {
		stop()
		wg.Wait()
		return err
	}
	fmt.Fprintf(os.Stderr, "  warm-up done: %d requests sent, %d acknowledged; measuring %v\n", sum3(sent0), sum3(acked0), o.bucketMeasure)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(t0) < o.bucketMeasure && runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
		for _, in := range t.inst {
			if err := in.alive(); err != nil {
				stop()
				wg.Wait()
				return err
			}
		}
	}
	// CPU first, then the counters: the status requests are not measured.
	var cpu1 [3]time.Duration
	for i, in := range t.inst {
		cpu1[i] = in.cpu()
	}
	el := time.Since(t0)
	var sent1, acked1, failed1, thr1 [3]uint64
	if err := snapshot(&sent1, &acked1, &failed1, &thr1, &run.x1); err != nil {
		stop()
		wg.Wait()
		return err
	}
	run.measure = el
	for i, in := range t.inst {
		run.cpu[i] = cpu1[i] - cpu0[i]
		run.sent[i], run.acked[i] = sent1[i]-sent0[i], acked1[i]-acked0[i]
		run.failed[i], run.throttled[i] = failed1[i]-failed0[i], thr1[i]-thr0[i]
		if ms, err := benchkit.Scrape(in.admin); err == nil {
			run.buckets[i] = ms[`tollgate_quota_buckets{quota="producer_byte_rate"}`]
		}
		run.rssKiB[i], _ = benchkit.RSSKiB(in.cmd.Process.Pid)
	}
	stop()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	return nil
}

func firstErr(errc chan error, ctx context.Context) error {
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

func sum3(v [3]uint64) uint64 { return v[0] + v[1] + v[2] }

// leaderAddrs returns, through instance in, the gateway address of each
// partition's leader.
func leaderAddrs(ctx context.Context, in *instance, topic string) (map[int32]string, error) {
	adm, err := in.adminClient()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	brokers := map[int32]string{}
	for _, b := range md.Brokers {
		brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("metadata of %s through %s: %v", topic, in.name, td.Err)
	}
	out := map[int32]string{}
	for p, pd := range td.Partitions {
		addr, ok := brokers[pd.Leader]
		if !ok {
			return nil, fmt.Errorf("partition %d has no known leader through %s", p, in.name)
		}
		out[p] = addr
	}
	return out, nil
}

// recordBatch is a v2 batch of one record of the given size, built with
// kmsg (the length and CRC fields are filled in after encoding, as
// producers do).
func recordBatch(size int) []byte {
	rec := kmsg.Record{Value: make([]byte, size)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // Length 0 takes one byte
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: rec.AppendTo(nil)}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// maxInFlight stays under the gateway's socket.max_in_flight (256).
const maxInFlight = 128

// run sends one request per client-id every 1/rate seconds, in turn,
// paced every 5 ms, with at most maxInFlight unanswered; a reader counts
// the answers. It returns when ctx ends or the connection fails.
func (c *rawConn) run(ctx context.Context, rate float64, recSize int) error {
	if len(c.fmts) == 0 {
		return nil
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	req := kmsg.NewPtrProduceRequest()
	req.Version = produceVersion
	req.Acks = 1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = bucketTopic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = c.partition
	rp.Records = recordBatch(recSize)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	slots := make(chan struct{}, maxInFlight)
	readErr := make(chan error, 1)
	go func() { readErr <- c.read(conn, slots) }()
	w := bufio.NewWriterSize(conn, 64<<10)
	perSec := rate * float64(len(c.fmts))
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var buf []byte
	var corr int32
	next := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			return err
		case <-tick.C:
		}
		due := int64(time.Since(start).Seconds()*perSec) - int64(c.sent.Load())
	send:
		for ; due > 0; due-- {
			select {
			case slots <- struct{}{}:
			default:
				break send // the connection is behind: what is due waits
			}
			buf = c.fmts[next].AppendRequest(buf[:0], req, corr)
			corr++
			next = (next + 1) % len(c.fmts)
			if _, err := w.Write(buf); err != nil {
				return err
			}
			c.sent.Add(1)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// read counts the Produce responses and frees a slot for each.
func (c *rawConn) read(conn net.Conn, slots chan struct{}) error {
	r := bufio.NewReaderSize(conn, 64<<10)
	var size [4]byte
	var body []byte
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = produceVersion
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return err
		}
		n := int(int32(binary.BigEndian.Uint32(size[:])))
		if n < 4 || n > 1<<20 {
			return fmt.Errorf("response of %d bytes", n)
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		kr := kbin.Reader{Src: body}
		kr.Int32() // correlation id: answers come in order
		if err := resp.ReadFrom(kr.Src); err != nil {
			return fmt.Errorf("produce response: %w", err)
		}
		ok := true
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					ok = false
					if c.failed.Load() == 0 {
						fmt.Fprintf(os.Stderr, "  instance %s: first failed produce: %v\n", names[c.inst], err)
					}
				}
			}
		}
		if ok {
			c.acked.Add(1)
		} else {
			c.failed.Add(1)
		}
		if resp.ThrottleMillis > 0 {
			c.throttled.Add(1)
		}
		select {
		case <-slots:
		default:
			return errors.New("an answer for no request")
		}
	}
}
