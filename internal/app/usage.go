package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/usage"
	"github.com/tollgate/tollgate/internal/wire"
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
	pub  *usage.Publisher
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
		written = pub.Written
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
			u.pub.Close(context.Background())
		}
		return err
	}
	u.l = l
	u.mut = &usageMutations{l: l, now: u.now, log: a.log}
	if u.pub != nil {
		if err := u.pub.CatchUp(); err != nil {
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
		u.pub.Start()
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
			u.pub.Close(ctx)
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
	return []int16{wire.KeyCreateTopics, wire.KeyDeleteTopics, wire.KeyCreatePartitions}
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

func (a *App) newUsagePublisher(upstream []string, dir, topic, instance string) (*usage.Publisher, error) {
	opts, err := a.upstreamClientOpts(upstream, "tollgate-usage")
	if err != nil {
		return nil, err
	}
	return usage.NewPublisher(usage.PublisherOptions{Dir: dir, Topic: topic, Instance: instance, Client: opts, Log: a.log})
}
