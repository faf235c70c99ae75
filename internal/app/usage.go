package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/usage"
)

// The usage ledger's wiring: the gateway's ServeHook counts every answered
// request, a filter at the end of the chain counts the partitions of the
// mutation requests the broker accepted, a loop writes each closed minute
// (usage.Ledger.Flush), and an optional publisher produces each written
// minute to usage.topic.

// usageFlushEvery is how often the loop looks for a closed minute: a
// minute is written within this much of its end.
const usageFlushEvery = time.Second

// usageRun is the running ledger and what feeds it.
type usageRun struct {
	l    *usage.Ledger
	mut  *usageMutations
	pub  *usagePublisher
	now  func() time.Time
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error
	// started: the loop and the publisher run (startUsage).
	started bool
	// paused: data_dir is released to a new process; the ledger is
	// closed and its loop stopped (handover.go).
	paused bool
}

// clock is the app's clock: Options.Now, or time.Now.
func (a *App) clock() func() time.Time {
	if a.opts.Now != nil {
		return a.opts.Now
	}
	return time.Now
}

// openUsage reads (or makes) the instance id and, unless usage.enabled is
// false, opens the ledger under <data_dir>/usage.
func (a *App) openUsage(upstream []string) error {
	id, err := usage.InstanceID(a.cfg.dataDir())
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if !a.cfg.Usage.On() {
		return nil
	}
	dir := filepath.Join(a.cfg.dataDir(), "usage")
	u := &usageRun{now: a.clock(), log: a.log, stop: make(chan struct{}), done: make(chan struct{})}
	var written func(*usage.Minute, []byte)
	if t := a.cfg.Usage.Topic; t != "" {
		pub, err := a.newUsagePublisher(upstream, dir, t, id)
		if err != nil {
			return fmt.Errorf("usage.topic: %w", err)
		}
		u.pub = pub
		written = pub.enqueue
	}
	l, err := usage.Open(usage.Options{
		Dir:       dir,
		Instance:  id,
		Retention: a.cfg.Usage.RetentionOrDefault(),
		MaxKeys:   a.cfg.Usage.MaxKeysOrDefault(),
		Log:       a.log,
		Written:   written,
		TenantOf: func(user string) string {
			t, _ := a.engine.TenantOf(user)
			return t
		},
	}, u.now())
	if err != nil {
		if u.pub != nil {
			u.pub.close(context.Background(), false)
		}
		return err
	}
	u.l = l
	u.mut = &usageMutations{l: l, now: u.now, log: a.log}
	if u.pub != nil {
		if err := u.pub.catchUp(); err != nil {
			a.log.Warn("usage.topic: cannot read the minutes left to produce", "err", err)
		}
	}
	a.usage = u
	if a.quotaFilter != nil {
		// Per-topic rows: the topics' record bytes as per-topic quotas
		// charge them.
		a.quotaFilter.TopicUsage = l.RecordTopic
	}
	if last, ok := l.LastWritten(); ok {
		a.log.Info("usage ledger opened", "dir", dir, "instance", id, "last_minute", last)
	} else {
		a.log.Info("usage ledger opened", "dir", dir, "instance", id)
	}
	return nil
}

// usageFilters is the mutation-counting filter, last in the chain (after
// the quota filter: it sees only what is forwarded).
func (a *App) usageFilters() []proxy.Filter {
	if a.usage == nil {
		return nil
	}
	return []proxy.Filter{a.usage.mut}
}

// usageHooks registers the ServeHook.
func (a *App) usageHooks() []proxy.Option {
	if a.usage == nil {
		return nil
	}
	return []proxy.Option{proxy.WithHooks(&usageObserver{l: a.usage.l, now: a.usage.now})}
}

// startUsage gives the mutation filter the gateway's topic lookups and
// starts the flush loop and the publisher. Call it before the gateway
// accepts.
func (a *App) startUsage(topics enforce.Topics) {
	u := a.usage
	if u == nil {
		return
	}
	u.mut.topics = topics
	u.started = true
	go u.loop()
	if u.pub != nil {
		go u.pub.run()
	}
}

func (u *usageRun) loop() {
	defer close(u.done)
	t := time.NewTicker(usageFlushEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-u.stop:
			return
		case <-t.C:
		}
		err := u.l.Flush(u.now())
		switch {
		case err != nil && !failing:
			u.log.Error("usage ledger: cannot write", "err", err)
		case err == nil && failing:
			u.log.Info("usage ledger: writing again")
		}
		failing = err != nil
	}
}

// Usage is the usage ledger, or nil when usage.enabled is false.
func (a *App) Usage() *usage.Ledger {
	if a.usage == nil {
		return nil
	}
	return a.usage.l
}

// usageDrain bounds how long a stop waits for the publisher.
const usageDrain = 5 * time.Second

// stopUsage writes every minute counted, the open one included, once the
// gateway has stopped serving, and gives the publisher up to usageDrain
// (within ctx) to produce what is left (the rest is produced after the
// next start).
func (a *App) stopUsage(ctx context.Context) error {
	u := a.usage
	if u == nil {
		return nil
	}
	u.once.Do(func() {
		if u.started && !u.paused {
			close(u.stop)
			<-u.done
		}
		u.err = u.l.Close()
		if u.pub != nil {
			ctx, cancel := context.WithTimeout(ctx, usageDrain)
			defer cancel()
			u.pub.close(ctx, u.started)
		}
	})
	return u.err
}

// usageSource answers GET /api/v1/usage from the ledger's files (nil when
// usage.enabled is false).
func (a *App) usageSource() func(usage.Query) (*usage.Report, error) {
	if a.usage == nil {
		return nil
	}
	dir := a.usage.l.Dir()
	return func(q usage.Query) (*usage.Report, error) { return usage.Read(dir, q) }
}

// usageObserver counts every request the gateway answered.
type usageObserver struct {
	l   *usage.Ledger
	now func() time.Time
}

// Served implements proxy.ServeHook.
func (o *usageObserver) Served(c *principal.ConnInfo, r *proxy.Request, respSize int, throttle time.Duration) {
	o.l.Record(c.Principal.Name, r.ClientID, r.Key, r.Size, respSize, throttle, o.now())
}

// usageMutations counts the partitions CreateTopics, CreatePartitions and
// DeleteTopics changed: at request time it notes what each topic asks
// (CreatePartitions and DeleteTopics need the topic's current partition
// count: one metadata request, as the quota filter makes); at response
// time it counts the topics the broker accepted (error 0; a validate-only
// request counts nothing). CreateTopics v5+ answers with the partitions
// created, which wins over the request (num_partitions -1).
type usageMutations struct {
	l      *usage.Ledger
	topics enforce.Topics
	now    func() time.Time
	log    *slog.Logger
}

func (f *usageMutations) Name() string { return "usage" }

func (f *usageMutations) Keys() []int16 {
	return []int16{int16(kmsg.CreateTopics), int16(kmsg.DeleteTopics), int16(kmsg.CreatePartitions)}
}

// ForConn implements proxy.ConnFilter: a connection's asks wait for their
// responses in its own map.
func (f *usageMutations) ForConn(proxy.Conn) proxy.Filter { return &usageMutConn{f: f} }

// OnRequest, OnResponse and Dropped of the shared instance are never
// called (every connection has its own), but declare the hooks.
func (f *usageMutations) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return proxy.Verdict{}
}
func (f *usageMutations) OnResponse(proxy.Conn, *proxy.Response) error { return nil }
func (f *usageMutations) Dropped(proxy.Conn, *proxy.Request)           {}

type usageMutConn struct {
	f  *usageMutations
	mu sync.Mutex
	// asks are the partitions per topic of the mutation requests in
	// flight, by correlation id (bounded by socket.max_in_flight).
	asks map[int32]map[string]int32
}

func (q *usageMutConn) Name() string  { return q.f.Name() }
func (q *usageMutConn) Keys() []int16 { return q.f.Keys() }

// OnRequest notes what the forwarded request asks.
func (q *usageMutConn) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	req, err := r.Decode()
	if err != nil {
		return proxy.Verdict{} // the broker answers it
	}
	ask := q.f.ask(req)
	if len(ask) == 0 {
		return proxy.Verdict{}
	}
	q.mu.Lock()
	if q.asks == nil {
		q.asks = map[int32]map[string]int32{}
	}
	q.asks[r.CorrelationID] = ask
	q.mu.Unlock()
	return proxy.Verdict{}
}

// OnResponse counts the accepted topics.
func (q *usageMutConn) OnResponse(c proxy.Conn, resp *proxy.Response) error {
	q.mu.Lock()
	ask, ok := q.asks[resp.Req.CorrelationID]
	delete(q.asks, resp.Req.CorrelationID)
	q.mu.Unlock()
	if !ok {
		return nil
	}
	kr, ok := resp.Decode()
	if !ok {
		return nil
	}
	var n int64
	switch r := kr.(type) {
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				continue
			}
			if r.Version >= 5 && t.NumPartitions > 0 {
				n += int64(t.NumPartitions)
			} else {
				n += int64(ask[t.Topic])
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == 0 {
				n += int64(ask[t.Topic])
			}
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				continue
			}
			if c, ok := ask[idKey(t.TopicID)]; ok && t.TopicID != ([16]byte{}) {
				n += int64(c)
			} else if t.Topic != nil {
				n += int64(ask[*t.Topic])
			}
		}
	}
	q.f.l.AddMutations(c.Info().Principal.Name, resp.Req.ClientID, n, q.f.now())
	return nil
}

// Dropped forgets a request that will not be answered.
func (q *usageMutConn) Dropped(c proxy.Conn, r *proxy.Request) {
	q.mu.Lock()
	delete(q.asks, r.CorrelationID)
	q.mu.Unlock()
}

// idKey is the key of a topic named by id alone in an ask: no topic name
// starts with a NUL byte.
func idKey(id [16]byte) string { return "\x00" + string(id[:]) }

// ask is the partitions each topic of a mutation request would change.
func (f *usageMutations) ask(req kmsg.Request) map[string]int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]int32{}
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		if r.ValidateOnly {
			return nil
		}
		var dflt int32
		for _, t := range r.Topics {
			n := t.NumPartitions
			if len(t.ReplicaAssignment) > 0 {
				n = int32(len(t.ReplicaAssignment))
			} else if n < 0 {
				if r.Version >= 5 {
					n = 0 // the response says
				} else {
					if dflt == 0 {
						dflt = 1
						if f.topics != nil {
							dflt = f.topics.DefaultPartitions(ctx)
						}
					}
					n = dflt
				}
			}
			out[t.Topic] = n
		}
	case *kmsg.CreatePartitionsRequest:
		if r.ValidateOnly {
			return nil
		}
		names := make([]string, len(r.Topics))
		for i, t := range r.Topics {
			names[i] = t.Topic
		}
		cur := f.partitions(ctx, names)
		for _, t := range r.Topics {
			if c, ok := cur[t.Topic]; ok && t.Count > c {
				out[t.Topic] = t.Count - c
			}
		}
	case *kmsg.DeleteTopicsRequest:
		names := r.TopicNames
		var ids [][16]byte
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			} else {
				ids = append(ids, t.TopicID)
			}
		}
		for name, n := range f.partitions(ctx, names) {
			out[name] = n
		}
		if len(ids) > 0 && f.topics != nil {
			// Named by id alone (v6+): counted by id.
			m, err := f.topics.TopicPartitionsByID(ctx, ids)
			if err != nil {
				f.log.Warn("usage ledger: cannot read partition counts by topic id; the request's partition mutations are not counted", "err", err)
			}
			for id, n := range m {
				out[idKey(id)] = n
			}
		}
	}
	return out
}

func (f *usageMutations) partitions(ctx context.Context, topics []string) map[string]int32 {
	if f.topics == nil || len(topics) == 0 {
		return nil
	}
	m, err := f.topics.TopicPartitions(ctx, topics)
	if err != nil {
		f.log.Warn("usage ledger: cannot read partition counts; the request's partition mutations are not counted", "err", err)
	}
	return m
}

// usagePublisher produces each written minute to usage.topic, in order,
// with acks=all, keyed "<instance>/<minute>" so that a compacted topic
// keeps one record per minute. <dir>/topic-published holds the last minute
// produced: a minute not produced before a stop is produced after the next
// start (a minute produced twice has the same key).
type usagePublisher struct {
	cl       *kgo.Client
	topic    string
	instance string
	dir      string
	log      *slog.Logger

	mu    sync.Mutex
	queue []usageRecord
	full  bool // records were left out of the queue (produced after a restart)
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	// ctx ends when close gives up waiting: an in-flight produce stops.
	ctx    context.Context
	cancel context.CancelFunc
}

type usageRecord struct {
	minute time.Time
	value  []byte
}

// usageQueueMax bounds the minutes waiting for the topic (a week).
const usageQueueMax = 7 * 24 * 60

const usageMarker = "topic-published"

func (a *App) newUsagePublisher(upstream []string, dir, topic, instance string) (*usagePublisher, error) {
	opts, err := a.upstreamClientOpts(upstream, "tollgate-usage")
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &usagePublisher{cl: cl, topic: topic, instance: instance, dir: dir, log: a.log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}, nil
}

// enqueue is the ledger's Written hook: it must not block.
func (p *usagePublisher) enqueue(m *usage.Minute, line []byte) {
	p.mu.Lock()
	// Once full, nothing more is queued until a restart: the marker must
	// not move past a minute left out (the next start reads the files
	// from the marker on, in order).
	if p.full || len(p.queue) >= usageQueueMax {
		if !p.full {
			p.log.Warn("usage.topic: too many minutes waiting for the topic; the rest are produced after a restart", "waiting", len(p.queue))
		}
		p.full = true
		p.mu.Unlock()
		return
	}
	p.queue = append(p.queue, usageRecord{minute: m.Minute, value: bytes.Clone(bytes.TrimSuffix(line, []byte("\n")))})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// catchUp queues the minutes written after the last one produced.
func (p *usagePublisher) catchUp() error {
	after := time.Time{}
	b, err := os.ReadFile(filepath.Join(p.dir, usageMarker))
	if err == nil {
		if after, err = time.Parse(time.RFC3339, strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("%s: %w", usageMarker, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return usage.Minutes(p.dir, after, func(m *usage.Minute, line []byte) error {
		p.enqueue(m, line)
		return nil
	})
}

func (p *usagePublisher) run() {
	defer close(p.done)
	p.ensureTopic()
	backoff := time.Second
	failing := false
	for {
		p.mu.Lock()
		var next *usageRecord
		if len(p.queue) > 0 {
			next = &p.queue[0]
		}
		p.mu.Unlock()
		stopping := false
		select {
		case <-p.stop:
			stopping = true
		default:
		}
		if next == nil {
			if stopping {
				return
			}
			select {
			case <-p.stop:
			case <-p.wake:
			}
			continue
		}
		err := p.produce(next)
		switch {
		case err != nil && stopping:
			return // produced after the next start
		case err != nil:
			if !failing {
				p.log.Error("usage.topic: cannot produce; retrying", "topic", p.topic, "minute", next.minute, "err", err)
			}
			failing = true
			select {
			case <-p.stop:
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		case failing:
			p.log.Info("usage.topic: producing again", "topic", p.topic)
			failing, backoff = false, time.Second
		}
	}
}

// produce sends one minute and moves the marker past it.
func (p *usagePublisher) produce(r *usageRecord) error {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	key := p.instance + "/" + r.minute.Format(time.RFC3339)
	if err := p.cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: r.value}).FirstErr(); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(p.dir, usageMarker), []byte(r.minute.Format(time.RFC3339)+"\n")); err != nil {
		p.log.Warn("usage.topic: cannot record the last minute produced (it may be produced again after a restart)", "err", err)
	}
	p.mu.Lock()
	p.queue[0] = usageRecord{}
	p.queue = p.queue[1:]
	p.mu.Unlock()
	return nil
}

// ensureTopic creates the topic compacted if it does not exist; a broker
// that refuses (no permission) leaves it to the operator. A stop that
// cannot wait cuts it short (p.ctx).
func (p *usagePublisher) ensureTopic() {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	compact := "compact"
	resp, err := kadm.NewClient(p.cl).CreateTopic(ctx, -1, -1, map[string]*string{"cleanup.policy": &compact}, p.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		p.log.Warn("usage.topic: cannot create the topic; create it with cleanup.policy=compact", "topic", p.topic, "err", err)
	}
}

// close stops the publisher once it has produced what is queued, or when
// ctx ends (what is left is produced after the next start).
func (p *usagePublisher) close(ctx context.Context, started bool) {
	if started {
		close(p.stop)
		select {
		case <-p.done:
		case <-ctx.Done():
			p.cancel()
			<-p.done
		}
	}
	p.cancel()
	p.cl.Close()
}

// writeFileSync replaces path's content with data durably (a temporary
// file, fsync, rename, fsync of the directory).
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
