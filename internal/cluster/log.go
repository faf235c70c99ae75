package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/store"
)

// Cache is where the shared log's records land: the local store, which
// keeps enforcing the last state it applied while the upstream is away.
type Cache interface {
	// ReplaceLog makes the cache hold exactly recs (the topic's state
	// read from its start; tombstones already removed) and remembers the
	// topic and next, the next offset to apply.
	ReplaceLog(topic string, recs []store.LogRecord, next int64) error
	// ApplyLog applies recs in order (nil value: delete) in one
	// transaction and remembers next.
	ApplyLog(recs []store.LogRecord, next int64) error
	// LogSeed returns the cache's whole state as records when it has
	// never been attached to topic (an instance that ran alone and now
	// starts a Tollgate cluster), nil otherwise.
	LogSeed(topic string) ([]store.LogRecord, error)
}

// LogConfig configures the shared configuration log.
type LogConfig struct {
	// Opts reach the upstream: seeds, dialer, TLS, SASL. The log adds what
	// it needs to produce and consume its topic.
	Opts  []kgo.Opt
	Topic string
	// ReplicationFactor of the topic when the log creates it; 0: 3, or the
	// number of brokers when there are fewer (logged as a warning).
	ReplicationFactor int16
	// MinInsyncReplicas of the topic when the log creates it; 0: 2, at
	// most the replication factor.
	MinInsyncReplicas int
	Cache             Cache
	// Timeout bounds one append (produce and read-back); 0: 10 s.
	Timeout time.Duration
	Logger  *slog.Logger
	// Keys sign every record this log writes and check every record it
	// reads (seal.go); nil: records are neither signed nor checked, and a
	// signed record is refused (its Tollgate cluster has a secret this
	// instance lacks).
	Keys *Keyring
	// Secret reports whether a record's value holds a secret (a SCRAM
	// credential, an API key's hash): with Keys, it is stored encrypted.
	Secret func(key []byte) bool
	// MaxSkew: with Keys, a record the broker appended more than this
	// from its signed time is refused as a copy; 0: DefaultMaxSkew.
	MaxSkew time.Duration
}

// ErrNotReady is returned by Append and CatchUp while the log has not read
// its topic to the end since the process started: the cache's state may be
// stale, so a change computed from it could undo someone else's.
var ErrNotReady = errors.New("cluster: the shared configuration topic has not been read yet (is the upstream reachable?)")

// errReseeded makes Run read the topic again after seeding it.
var errReseeded = errors.New("cluster: topic seeded")

// maxAppendBytes bounds one append: it must fit one record batch, which the
// broker writes atomically, under the default max.message.bytes (1 MiB).
const maxAppendBytes = 900 << 10

// Log is the shared configuration log: a compacted, single-partition topic
// on the upstream that every instance of a Tollgate cluster writes its
// durable changes to and applies from, in the topic's order (the pattern of
// Schema Registry's _schemas and Kafka Connect's config topic).
//
// Run reads the topic from its start into the cache, then follows it.
// Append writes one change (all its records in one batch, which the broker
// appends atomically) with acks=all through an idempotent producer and
// returns once this instance has applied it: read-your-writes.
type Log struct {
	cfg LogConfig
	cl  *kgo.Client
	adm *kadm.Client
	log *slog.Logger

	appendMu sync.Mutex // one append at a time: one batch per append

	mu      sync.Mutex
	closed  bool
	reader  *kgo.Client // the current follow's consumer
	next    int64       // next offset to apply; -1 until the replay is done
	changed chan struct{}
	lastErr error
	applied time.Time

	// What the signature checks keep (under mu): the signed time of the
	// latest record applied per key, to refuse an older one copied back
	// in; the plain values whose latest record was not signed with the
	// current secret, to sign again; the refusals by reason.
	signedMs map[string]int64
	resign   map[string][]byte
	resignCh chan struct{}
	refused  map[string]uint64
	warned   map[string]time.Time
	// refusedAt: the offsets and reasons of the latest refusals, so that
	// an append learns its own record was refused (a concurrent change of
	// the same key from an instance whose clock is ahead).
	refusedAt [64]refusal
	refusedN  int
}

type refusal struct {
	offset int64
	reason string
}

// NewLog returns a log; nothing is contacted until Run.
func NewLog(cfg LogConfig) (*Log, error) {
	if cfg.Topic == "" || cfg.Cache == nil {
		return nil, errors.New("cluster: log needs a topic and a cache")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = DefaultMaxSkew
	}
	opts := append([]kgo.Opt{}, cfg.Opts...)
	opts = append(opts,
		kgo.ClientID("tollgate-cluster-config"),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Records of one append are flushed together, as one batch.
		kgo.ManualFlushing(),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.RecordRetries(5),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &Log{cfg: cfg, cl: cl, adm: kadm.NewClient(cl), log: cfg.Logger, next: -1, changed: make(chan struct{}),
		signedMs: map[string]int64{}, resign: map[string][]byte{}, resignCh: make(chan struct{}, 1),
		refused: map[string]uint64{}, warned: map[string]time.Time{}}, nil
}

// Close stops the producer; Run returns.
func (l *Log) Close() {
	l.mu.Lock()
	l.closed = true
	r := l.reader
	l.reader = nil
	l.mu.Unlock()
	if r != nil {
		r.Close()
	}
	l.cl.Close()
}

// LogStatus is what the log reports about itself.
type LogStatus = api.ConfigLogStatus

// Status returns the log's state.
func (l *Log) Status() LogStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LogStatus{Topic: l.cfg.Topic, Ready: l.next >= 0, Next: l.next, Applied: l.applied, Signed: l.cfg.Keys != nil}
	if len(l.refused) > 0 {
		s.Refused = make(map[string]uint64, len(l.refused))
		for r, n := range l.refused {
			s.Refused[r] = n
		}
	}
	if l.lastErr != nil {
		s.Error = l.lastErr.Error()
	}
	return s
}

func (l *Log) setErr(err error) {
	l.mu.Lock()
	l.lastErr = err
	l.mu.Unlock()
}

// advance records that everything before next is applied and wakes the
// waiters.
func (l *Log) advance(next int64) {
	l.mu.Lock()
	l.next = next
	l.lastErr = nil
	l.applied = time.Now()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// waitApplied waits until every offset below next is applied.
func (l *Log) waitApplied(ctx context.Context, next int64) error {
	for {
		l.mu.Lock()
		n, ch := l.next, l.changed
		l.mu.Unlock()
		if n >= next {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the shared configuration topic to be read to offset %d: %w", next, ctx.Err())
		case <-ch:
		}
	}
}

// Run creates the topic if it is missing, reads it from its start into the
// cache and then follows it, until ctx ends or the log is closed. Errors
// (an unreachable upstream) are retried with a backoff; the cache keeps its
// last state meanwhile.
func (l *Log) Run(ctx context.Context) {
	if l.cfg.Keys != nil {
		go l.resignLoop(ctx)
	}
	backoff := 250 * time.Millisecond
	for {
		err := l.ensureTopic(ctx)
		if err == nil {
			err = l.follow(ctx)
		}
		if ctx.Err() != nil || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		if errors.Is(err, errReseeded) {
			continue
		}
		l.setErr(err)
		l.log.Warn("shared configuration topic unavailable; retrying", "topic", l.cfg.Topic, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// ensureTopic creates the topic compacted with the configured replication,
// and warns when an existing one is not compacted.
func (l *Log) ensureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	topics, err := l.adm.ListTopics(ctx, l.cfg.Topic)
	if err != nil {
		return err
	}
	if td, ok := topics[l.cfg.Topic]; ok && td.Err == nil {
		if len(td.Partitions) != 1 {
			return fmt.Errorf("cluster: topic %s has %d partitions; the shared configuration log needs exactly one", l.cfg.Topic, len(td.Partitions))
		}
		rc, err := l.adm.DescribeTopicConfigs(ctx, l.cfg.Topic)
		if err == nil {
			if c, err := rc.On(l.cfg.Topic, nil); err == nil {
				for _, kv := range c.Configs {
					if kv.Key == "cleanup.policy" && kv.Value != nil && *kv.Value != "compact" {
						l.log.Warn("the shared configuration topic is not compacted; set cleanup.policy=compact or it will lose records to retention", "topic", l.cfg.Topic, "cleanup.policy", *kv.Value)
					}
					if kv.Key == "message.timestamp.type" && kv.Value != nil && *kv.Value != "LogAppendTime" && l.cfg.Keys != nil {
						l.log.Warn("the shared configuration topic keeps its producers' timestamps; set message.timestamp.type=LogAppendTime so that a signed record copied back into it later is refused", "topic", l.cfg.Topic)
					}
				}
			}
		}
		return nil
	}
	rf, isr, err := l.replication(ctx)
	if err != nil {
		return err
	}
	resp, err := l.adm.CreateTopic(ctx, 1, rf, map[string]*string{
		"cleanup.policy":      kadm.StringPtr("compact"),
		"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr)),
		// Tombstones are kept a day, so an instance down for less than
		// that still learns of a deletion when it reads the topic again.
		"delete.retention.ms": kadm.StringPtr(strconv.Itoa(24 * 3600 * 1000)),
		// The broker stamps each batch: a signed record appended long
		// after it was signed is a copy (LogConfig.MaxSkew).
		"message.timestamp.type": kadm.StringPtr("LogAppendTime"),
	}, l.cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: create topic %s: %w", l.cfg.Topic, err)
	}
	l.log.Info("created the shared configuration topic", "topic", l.cfg.Topic, "replication_factor", rf, "min_insync_replicas", isr)
	return nil
}

// replication returns the replication factor and min.insync.replicas to
// create a topic with: the configured values, or 3 and 2 capped to what
// the cluster has.
func (l *Log) replication(ctx context.Context) (int16, int, error) {
	return replicationFor(ctx, l.adm, l.cfg.ReplicationFactor, l.cfg.MinInsyncReplicas, l.cfg.Topic, l.log)
}

func replicationFor(ctx context.Context, adm *kadm.Client, rf int16, isr int, topic string, log *slog.Logger) (int16, int, error) {
	if rf <= 0 {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return 0, 0, err
		}
		rf = 3
		if n := len(md.Brokers); n < 3 {
			rf = int16(max(n, 1))
			log.Warn("the upstream has fewer than 3 brokers; creating a Tollgate cluster topic with less replication", "topic", topic, "brokers", n, "replication_factor", rf)
		}
	}
	if isr <= 0 {
		isr = min(2, int(rf))
	}
	return rf, min(isr, int(rf)), nil
}

// follow reads the topic from its start to its end into the cache in one
// replacement, then applies every later batch as it arrives.
func (l *Log) follow(ctx context.Context) error {
	hwm, err := l.endOffset(ctx)
	if err != nil {
		return err
	}
	reader, err := l.openReader()
	if err != nil {
		return err
	}
	defer l.closeReader(reader)

	state := map[string][]byte{}
	var pos int64
	replaying := true
	if hwm == 0 {
		if err := l.startEmpty(ctx); err != nil {
			return err
		}
		replaying, state = false, nil
	}
	l.mu.Lock()
	clear(l.signedMs)
	clear(l.resign)
	l.mu.Unlock()
	var batch []store.LogRecord
	for {
		fs := reader.PollFetches(ctx)
		if fs.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.noteFetchError(fs)
		batch = batch[:0]
		var resign bool
		pos, batch, resign = l.collect(fs, pos, state, batch)
		switch {
		case replaying && pos < hwm:
			continue
		case replaying:
			if err := l.replace(state, pos); err != nil {
				return err
			}
			replaying, state = false, nil
		case len(batch) > 0:
			if err := l.cfg.Cache.ApplyLog(batch, pos); err != nil {
				return err
			}
			l.advance(pos)
		case pos > l.Status().Next:
			l.advance(pos) // only refused records: nothing to apply
		}
		if resign {
			l.wakeResign()
		}
	}
}

// collect checks a poll's records and keeps those that pass: in state
// while replaying (state non-nil), in batch otherwise. It returns the next
// offset, the batch, and whether records wait to be signed again.
func (l *Log) collect(fs kgo.Fetches, pos int64, state map[string][]byte, batch []store.LogRecord) (int64, []store.LogRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs.EachRecord(func(r *kgo.Record) {
		pos = r.Offset + 1
		rec, ok := l.checkLocked(r)
		switch {
		case !ok:
		case state == nil:
			batch = append(batch, rec)
		case rec.Value == nil:
			delete(state, string(rec.Key))
		default:
			state[string(rec.Key)] = rec.Value
		}
	})
	return pos, batch, len(l.resign) > 0
}

// endOffset is the topic's end offset now: where reading from the start
// has read it all.
func (l *Log) endOffset(ctx context.Context) (int64, error) {
	tctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	ends, err := l.adm.ListEndOffsets(tctx, l.cfg.Topic)
	cancel()
	if err != nil {
		return 0, err
	}
	end, ok := ends.Lookup(l.cfg.Topic, 0)
	if !ok {
		return 0, fmt.Errorf("cluster: no end offset for %s", l.cfg.Topic)
	}
	if end.Err != nil {
		return 0, end.Err
	}
	return end.Offset, nil
}

// openReader makes the client that reads the topic from its start, and
// makes it the one Close closes.
//
// Reading has its own client, made afresh for every read from the start:
// the producer's idempotence state must never be reset with it (a
// producer whose sequence numbers restart under the same producer id has
// its next batch taken for a duplicate and dropped).
func (l *Log) openReader() (*kgo.Client, error) {
	reader, err := kgo.NewClient(append(append([]kgo.Opt{}, l.cfg.Opts...),
		kgo.ClientID("tollgate-cluster-config"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.cfg.Topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(time.Second))...)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		reader.Close()
		return nil, kgo.ErrClientClosed
	}
	l.reader = reader
	l.mu.Unlock()
	return reader, nil
}

// closeReader closes reader unless Close has: exactly one of the two
// does (kgo's Close must not run twice at once).
func (l *Log) closeReader(reader *kgo.Client) {
	l.mu.Lock()
	mine := l.reader == reader
	if mine {
		l.reader = nil
	}
	l.mu.Unlock()
	if mine {
		reader.Close()
	}
}

// startEmpty begins a new Tollgate cluster, whose topic is empty: the
// first instance's state seeds it (errReseeded: read it again), or, with
// nothing stored, the cache starts empty.
func (l *Log) startEmpty(ctx context.Context) error {
	seed, err := l.cfg.Cache.LogSeed(l.cfg.Topic)
	if err != nil {
		return err
	}
	if len(seed) > 0 {
		if err := l.produce(ctx, seed); err != nil {
			return fmt.Errorf("cluster: seeding %s with this instance's %d stored records: %w", l.cfg.Topic, len(seed), err)
		}
		l.log.Info("seeded the shared configuration topic with this instance's stored state", "topic", l.cfg.Topic, "records", len(seed))
		return errReseeded
	}
	if err := l.cfg.Cache.ReplaceLog(l.cfg.Topic, nil, 0); err != nil {
		return err
	}
	l.advance(0)
	l.log.Info("shared configuration topic read", "topic", l.cfg.Topic, "records", 0)
	return nil
}

// noteFetchError keeps and logs the first error of a poll, if any.
func (l *Log) noteFetchError(fs kgo.Fetches) {
	var ferr error
	fs.EachError(func(_ string, _ int32, err error) {
		if ferr == nil {
			ferr = err
		}
	})
	if ferr != nil && !errors.Is(ferr, context.Canceled) {
		l.setErr(ferr)
		l.log.Warn("reading the shared configuration topic", "topic", l.cfg.Topic, "err", ferr)
	}
}

// replace makes the cache what the topic read from its start says (state,
// key → value), next to read at pos.
func (l *Log) replace(state map[string][]byte, pos int64) error {
	recs := make([]store.LogRecord, 0, len(state))
	for k, v := range state {
		recs = append(recs, store.LogRecord{Key: []byte(k), Value: v})
	}
	if err := l.cfg.Cache.ReplaceLog(l.cfg.Topic, recs, pos); err != nil {
		return err
	}
	l.advance(pos)
	l.log.Info("shared configuration topic read", "topic", l.cfg.Topic, "records", len(recs), "next_offset", pos)
	return nil
}

// Append writes recs as one batch and returns once this instance applied
// it. It fails (and nothing is written) when the log has not been read
// since the start, or when the upstream does not acknowledge the batch in
// time; after an acknowledgement the only failure is the read-back timing
// out, in which case the change is durable and every instance applies it.
func (l *Log) Append(ctx context.Context, recs []store.LogRecord) error {
	if len(recs) == 0 {
		return nil
	}
	size := 0
	for _, r := range recs {
		size += len(r.Key) + len(r.Value) + 16
	}
	if size > maxAppendBytes {
		return fmt.Errorf("cluster: a change of %d bytes is more than the %d one shared configuration record batch may hold; split it", size, maxAppendBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if !l.Status().Ready {
		return ErrNotReady
	}
	l.appendMu.Lock()
	first, last, err := l.produceBatch(ctx, recs)
	l.appendMu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: the shared configuration topic did not take the change: %w", err)
	}
	if err := l.waitApplied(ctx, last+1); err != nil {
		return err
	}
	if reason := l.refusedIn(first, last); reason != "" {
		// Every instance refused it alike: the change is not in force.
		return fmt.Errorf("cluster: the change was written to the shared configuration topic but refused by its check (%s); try again", reason)
	}
	return nil
}

// CatchUp waits until this instance has applied everything the topic held
// when it was called, so that a change computed next starts from the
// latest state any instance acknowledged.
func (l *Log) CatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if !l.Status().Ready {
		return ErrNotReady
	}
	ends, err := l.adm.ListEndOffsets(ctx, l.cfg.Topic)
	if err != nil {
		return fmt.Errorf("cluster: the shared configuration topic is unreachable: %w", err)
	}
	end, ok := ends.Lookup(l.cfg.Topic, 0)
	if !ok || end.Err != nil {
		return fmt.Errorf("cluster: the shared configuration topic is unreachable: %v", end.Err)
	}
	return l.waitApplied(ctx, end.Offset)
}

// produceBatch produces recs flushed together, as one batch, and returns
// the first and last records' offsets. The caller holds appendMu.
func (l *Log) produceBatch(ctx context.Context, recs []store.LogRecord) (int64, int64, error) {
	var mu sync.Mutex
	var last int64 = -1
	first := int64(-1)
	var perr error
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for _, r := range recs {
		l.cl.Produce(ctx, l.record(r), func(r *kgo.Record, err error) {
			mu.Lock()
			if err != nil && perr == nil {
				perr = err
			}
			last = max(last, r.Offset)
			if err == nil && (first < 0 || r.Offset < first) {
				first = r.Offset
			}
			mu.Unlock()
			wg.Done()
		})
	}
	ferr := l.cl.Flush(ctx)
	wg.Wait()
	if perr == nil {
		perr = ferr
	}
	return first, last, perr
}

// produce writes recs in batches of at most maxAppendBytes (seeding: each
// record stands alone, so a seed split over batches is still consistent).
func (l *Log) produce(ctx context.Context, recs []store.LogRecord) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+len(recs[n].Key)+len(recs[n].Value)+16 <= maxAppendBytes) {
			size += len(recs[n].Key) + len(recs[n].Value) + 16
			n++
		}
		if _, _, err := l.produceBatch(ctx, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}
