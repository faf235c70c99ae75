package usage

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// nShards spreads the keys over this many locks: two session goroutines
// of different keys rarely meet on one.
const nShards = 32

// maxPending bounds the minutes kept in memory while they cannot be
// written (a day): beyond it the oldest is dropped, with an error logged.
const maxPending = 24 * 60

// Options configure a Ledger.
type Options struct {
	// Dir holds the day files (<data_dir>/usage).
	Dir string
	// Instance is written with every minute (the instance id).
	Instance string
	// Retention is how long minutes are kept (default DefaultRetention).
	Retention time.Duration
	// MaxKeys bounds the distinct (user, client-id) pairs counted at once
	// (default DefaultMaxKeys).
	MaxKeys int
	Log     *slog.Logger
	// TenantOf names the tenant a principal belongs to ("" for none),
	// written with each row (the tenants in force when its minute is
	// written). Nil: no tenants.
	TenantOf func(user string) string
	// Written hears about each minute once it is written and fsync'd (the
	// upstream topic's publisher). It is called with the flush lock held:
	// it must not block.
	Written func(m *Minute, line []byte)
}

// Ledger counts usage per minute and writes each minute once.
type Ledger struct {
	o      Options
	seed   maphash.Seed
	keys   atomic.Int64 // cells in use, overflow cells included
	shards [nShards]shard

	flushMu   sync.Mutex
	out       appender
	last      int64 // the last minute written
	written   bool  // last is set
	pending   []*Minute
	lastPrune time.Time
	closed    bool
}

// key is what a row is counted by. A row's tenant is its user's when its
// minute is written (harvest).
type key struct {
	user, clientID string
	overflow       bool
	// topic names a per-topic row (RecordTopic): the topic's record
	// bytes, beside the (user, client-id) row that counts everything.
	topic string
}

// cell is one key's counters for its current minute.
type cell struct {
	minute int64
	c      Counters
}

// row is a closed minute of a cell, waiting for the flush.
type row struct {
	key    key
	minute int64
	c      Counters
}

type shard struct {
	mu sync.Mutex
	// floor is the first minute still open: counts for an earlier one
	// (a late clock, a restart within a written minute) go into it.
	floor int64
	cells map[key]*cell
	// topics are the per-topic cells by (user, client-id) then topic: a
	// topic arrives as the request's bytes, looked up without a copy.
	topics map[key]map[string]*cell
	closed []row // minutes a cell left before the flush took them
	_      [64]byte
}

// Open opens the ledger in o.Dir: it finds the last minute written there
// (cutting off a line a crash left incomplete) so that nothing is written
// for it or any earlier minute again, and removes the days past retention.
func Open(o Options, now time.Time) (*Ledger, error) {
	if o.Dir == "" || o.Instance == "" {
		return nil, errors.New("usage: a directory and an instance id are required")
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	l := &Ledger{o: o, seed: maphash.MakeSeed(), out: appender{dir: o.Dir}}
	last, found, err := recoverLast(o.Dir, o.Log.Warn)
	if err != nil {
		return nil, fmt.Errorf("usage ledger %s: %w", o.Dir, err)
	}
	l.last, l.written = last, found
	for i := range l.shards {
		s := &l.shards[i]
		s.cells = map[key]*cell{}
		s.topics = map[key]map[string]*cell{}
		if found {
			s.floor = last + 1
		}
	}
	l.prune(now)
	return l, nil
}

// Instance is the instance id written with every minute.
func (l *Ledger) Instance() string { return l.o.Instance }

// Dir is the ledger's directory.
func (l *Ledger) Dir() string { return l.o.Dir }

// LastWritten is the last minute written, if any.
func (l *Ledger) LastWritten() (time.Time, bool) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return minuteTime(l.last), l.written
}

// Record counts one request the gateway answered (or forwarded, for an
// acks=0 Produce): its request size for a Produce, its response size for a
// Fetch or ShareFetch, and the throttle it was given. It is called on the
// sessions' goroutines, per request: one shard lock, no allocation but for
// a key new in the last minute.
func (l *Ledger) Record(user, clientID string, apiKey int16, reqSize, respSize int, throttle time.Duration, now time.Time) {
	c := Counters{Requests: 1, ThrottleMs: throttle.Milliseconds()}
	switch apiKey {
	case int16(kmsg.Produce):
		c.ProduceBytes = int64(reqSize)
	case int16(kmsg.Fetch), int16(kmsg.ShareFetch):
		c.FetchBytes = int64(respSize)
	}
	l.add(user, clientID, c, now)
}

// RecordTopic counts one topic's record bytes of a Produce request
// (produce) or a Fetch or ShareFetch response, for the per-topic rows.
// The gateway counts them where per-topic quotas charge them, so topics
// with a per-topic quota have rows. One shard lock; no allocation but for
// a (user, client-id, topic) new in the last minute. Beyond
// usage.max_keys a new topic is not counted (the user's rows still are).
func (l *Ledger) RecordTopic(user, clientID string, topic []byte, produce bool, n int, now time.Time) {
	if n <= 0 || len(topic) == 0 {
		return
	}
	var c Counters
	if produce {
		c.ProduceBytes = int64(n)
	} else {
		c.FetchBytes = int64(n)
	}
	k := key{user: user, clientID: clientID}
	s := &l.shards[(maphash.String(l.seed, user)^maphash.String(l.seed, clientID)*31)%nShards]
	s.mu.Lock()
	byTopic := s.topics[k]
	ce := byTopic[string(topic)]
	if ce == nil {
		if l.keys.Add(1) > int64(l.o.MaxKeys) {
			l.keys.Add(-1)
			s.mu.Unlock()
			return
		}
		if byTopic == nil {
			byTopic = map[string]*cell{}
			s.topics[k] = byTopic
		}
		ce = &cell{minute: math.MinInt64}
		byTopic[string(topic)] = ce
	}
	s.countTopic(k, topic, ce, unixMinute(now), c)
	s.mu.Unlock()
}

// countTopic is count for a per-topic cell: the row's key gets the topic
// name only when its minute closes.
func (s *shard) countTopic(k key, topic []byte, ce *cell, m int64, c Counters) {
	m = max(m, s.floor)
	if m > ce.minute {
		if !ce.c.IsZero() {
			k.topic = string(topic)
			s.closed = append(s.closed, row{key: k, minute: ce.minute, c: ce.c})
		}
		ce.minute, ce.c = m, Counters{}
	}
	ce.c.Add(c)
}

// AddMutations counts partitions a mutation request created, added or
// deleted.
func (l *Ledger) AddMutations(user, clientID string, partitions int64, now time.Time) {
	if partitions > 0 {
		l.add(user, clientID, Counters{PartitionMutations: partitions}, now)
	}
}

func (l *Ledger) add(user, clientID string, c Counters, now time.Time) {
	k := key{user: user, clientID: clientID}
	s := &l.shards[(maphash.String(l.seed, user)^maphash.String(l.seed, clientID)*31)%nShards]
	s.mu.Lock()
	ce := s.cells[k]
	if ce == nil {
		if l.keys.Add(1) > int64(l.o.MaxKeys) {
			// Over the bound: the user's overflow row, in its own
			// shard (one per user; it counts as a key too).
			l.keys.Add(-1)
			s.mu.Unlock()
			k = key{user: user, overflow: true}
			s = &l.shards[maphash.String(l.seed, user)%nShards]
			s.mu.Lock()
			if ce = s.cells[k]; ce == nil {
				l.keys.Add(1)
			}
		}
		if ce == nil {
			ce = &cell{minute: math.MinInt64}
			s.cells[k] = ce
		}
	}
	s.count(k, ce, unixMinute(now), c)
	s.mu.Unlock()
}

// count adds c to a cell in minute m (or the shard's floor, or the cell's
// own minute if later: minutes only move on). s.mu is held.
func (s *shard) count(k key, ce *cell, m int64, c Counters) {
	m = max(m, s.floor)
	if m > ce.minute {
		if !ce.c.IsZero() {
			s.closed = append(s.closed, row{key: k, minute: ce.minute, c: ce.c})
		}
		ce.minute, ce.c = m, Counters{}
	}
	ce.c.Add(c)
}

// Flush writes every minute that closed before now's minute, oldest
// first, each in one fsync'd line. A minute that cannot be written (disk
// full) is kept and retried at the next flush, before later ones.
func (l *Ledger) Flush(now time.Time) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.closed {
		return errors.New("usage ledger closed")
	}
	l.harvest(unixMinute(now))
	err := l.writePending()
	if now.Sub(l.lastPrune) >= time.Hour {
		l.prune(now)
	}
	return err
}

// Close writes every minute counted, the open one included (a restart
// then counts the rest of that minute into the next), and closes the
// file. Call it once nothing records any more.
func (l *Ledger) Close() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.harvest(math.MaxInt64)
	err := l.writePending()
	if n := len(l.pending); n > 0 {
		err = errors.Join(err, fmt.Errorf("usage ledger: %d minutes could not be written and are lost", n))
	}
	return errors.Join(err, l.out.close())
}

// Reopen resumes writing after Close, when the directory comes back to
// this process (a handover to a new process that failed: another process
// may have written minutes meanwhile). It reads the last minute written
// again; what was counted since Close, and from now on, goes into the
// minute after it or later, and is written by the next Flush.
func (l *Ledger) Reopen(now time.Time) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if !l.closed {
		return nil
	}
	last, found, err := recoverLast(l.o.Dir, l.o.Log.Warn)
	if err != nil {
		return fmt.Errorf("usage ledger %s: %w", l.o.Dir, err)
	}
	if found && (!l.written || last > l.last) {
		l.last, l.written = last, true
	}
	if l.written {
		floor := l.last + 1
		// Minutes Close could not write go back into the counts: the
		// other process may have written their minutes since.
		s0 := &l.shards[0]
		s0.mu.Lock()
		for _, m := range l.pending {
			for _, r := range m.Rows {
				s0.closed = append(s0.closed, row{key: key{user: r.User, clientID: r.ClientID, overflow: r.Overflow, topic: r.Topic}, minute: floor, c: r.Counters})
			}
		}
		s0.mu.Unlock()
		clear(l.pending)
		l.pending = l.pending[:0]
		for i := range l.shards {
			s := &l.shards[i]
			s.mu.Lock()
			s.floor = max(s.floor, floor)
			for j := range s.closed {
				s.closed[j].minute = max(s.closed[j].minute, floor)
			}
			for _, ce := range s.cells {
				ce.minute = max(ce.minute, floor)
			}
			for _, byTopic := range s.topics {
				for _, ce := range byTopic {
					ce.minute = max(ce.minute, floor)
				}
			}
			s.mu.Unlock()
		}
	}
	l.out = appender{dir: l.o.Dir}
	l.closed = false
	l.prune(now)
	return nil
}

// harvest moves every count of a minute before cur out of the shards into
// pending minutes; from then on counts go to cur or later. flushMu is
// held.
func (l *Ledger) harvest(cur int64) {
	byMinute := harvested{}
	for i := range l.shards {
		l.harvestShard(&l.shards[i], cur, byMinute)
	}
	minutes := make([]int64, 0, len(byMinute))
	for m := range byMinute {
		minutes = append(minutes, m)
	}
	slices.Sort(minutes)
	for _, m := range minutes {
		l.pend(m, byMinute[m])
	}
	for len(l.pending) > maxPending {
		l.o.Log.Error("usage ledger: a minute that could not be written for a day is dropped", "minute", l.pending[0].Minute)
		l.pending[0] = nil
		l.pending = l.pending[1:]
	}
}

// harvested is what a harvest took: minute → key → counts.
type harvested map[int64]map[key]Counters

func (h harvested) take(m int64, k key, c Counters) {
	rows := h[m]
	if rows == nil {
		rows = map[key]Counters{}
		h[m] = rows
	}
	r := rows[k]
	r.Add(c)
	rows[k] = r
}

// harvestShard moves s's counts of the minutes before cur into h, and
// forgets the keys idle since the last harvest.
func (l *Ledger) harvestShard(s *shard, cur int64, h harvested) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur != math.MaxInt64 {
		s.floor = max(s.floor, cur)
	}
	keep := s.closed[:0]
	for _, r := range s.closed {
		if r.minute < cur {
			h.take(r.minute, r.key, r.c)
		} else {
			keep = append(keep, r)
		}
	}
	clear(s.closed[len(keep):])
	s.closed = keep
	for k, ce := range s.cells {
		if ce.minute >= cur {
			continue
		}
		if ce.c.IsZero() {
			// Idle since the last flush took it: forget the key
			// (memory follows the keys of the last minute or two).
			delete(s.cells, k)
			l.keys.Add(-1)
			continue
		}
		h.take(ce.minute, k, ce.c)
		ce.c = Counters{}
	}
	for k, byTopic := range s.topics {
		for t, ce := range byTopic {
			if ce.minute >= cur {
				continue
			}
			if ce.c.IsZero() {
				delete(byTopic, t)
				l.keys.Add(-1)
				continue
			}
			tk := k
			tk.topic = t
			h.take(ce.minute, tk, ce.c)
			ce.c = Counters{}
		}
		if len(byTopic) == 0 {
			delete(s.topics, k)
		}
	}
}

// pend queues the rows harvested for minute m, after the minutes pending
// before it: a minute already written or pending is never queued twice
// (its rows fold into the last pending one).
func (l *Ledger) pend(m int64, rows map[key]Counters) {
	if l.written && m <= l.last {
		// Cannot happen: the floors keep counts out of written
		// minutes. Never write a minute twice: fold it forward.
		l.o.Log.Error("usage ledger: counts for a minute already written moved to the next", "minute", minuteTime(m))
		m = l.last + 1
	}
	if len(l.pending) > 0 && unixMinute(l.pending[len(l.pending)-1].Minute) >= m {
		// Merge into the pending minute it was folded into.
		last := l.pending[len(l.pending)-1]
		for _, r := range last.Rows {
			k := key{user: r.User, clientID: r.ClientID, overflow: r.Overflow, topic: r.Topic}
			rows[k] = addC(rows[k], r.Counters)
		}
		l.pending = l.pending[:len(l.pending)-1]
		m = unixMinute(last.Minute)
	}
	out := &Minute{V: FormatVersion, Minute: minuteTime(m), Instance: l.o.Instance, Rows: make([]Row, 0, len(rows))}
	tenants := map[string]string{} // per user, once per minute
	for k, c := range rows {
		r := Row{User: k.user, ClientID: k.clientID, Overflow: k.overflow, Topic: k.topic, Counters: c}
		if l.o.TenantOf != nil {
			t, ok := tenants[k.user]
			if !ok {
				t = l.o.TenantOf(k.user)
				tenants[k.user] = t
			}
			r.Tenant = t
		}
		out.Rows = append(out.Rows, r)
	}
	slices.SortFunc(out.Rows, compareRows)
	l.pending = append(l.pending, out)
}

// compareRows orders a minute's rows: by user, its overflow row after its
// client-ids, by client-id, and the user's row before its topics.
func compareRows(a, b Row) int {
	if c := strings.Compare(a.User, b.User); c != 0 {
		return c
	}
	if a.Overflow != b.Overflow {
		if a.Overflow {
			return 1
		}
		return -1
	}
	if c := strings.Compare(a.ClientID, b.ClientID); c != 0 {
		return c
	}
	return strings.Compare(a.Topic, b.Topic) // the user's row, then its topics
}

func addC(a, b Counters) Counters { a.Add(b); return a }

// writePending writes the pending minutes in order, stopping at the first
// that fails. flushMu is held.
func (l *Ledger) writePending() error {
	for len(l.pending) > 0 {
		m := l.pending[0]
		line, err := l.out.append(m)
		if err != nil {
			return fmt.Errorf("usage ledger: minute %s not written yet (kept, retried at the next flush): %w", m.Minute.Format(time.RFC3339), err)
		}
		l.pending[0] = nil
		l.pending = l.pending[1:]
		l.last, l.written = unixMinute(m.Minute), true
		if l.o.Written != nil {
			l.o.Written(m, line)
		}
	}
	return nil
}

func (l *Ledger) prune(now time.Time) {
	l.lastPrune = now
	removed, err := prune(l.o.Dir, now, l.o.Retention)
	for _, p := range removed {
		l.o.Log.Info("usage ledger: day past retention removed", "file", p, "retention", l.o.Retention)
	}
	if err != nil {
		l.o.Log.Error("usage ledger: cannot remove a day past retention", "err", err)
	}
}
