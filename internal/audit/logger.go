package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sink stores events. A Kafka-topic sink implements it like the file sink.
type Sink interface {
	// Name identifies the sink in errors and logs, e.g. "file:/var/log/x".
	Name() string
	// Write stores one event. data is its JSON encoding: one line, without
	// the newline. A nil error means the event is as durable as the sink
	// can make it (the file sink: fsync'd). e must not be modified.
	Write(ctx context.Context, e *Event, data []byte) error
	// Close releases the sink.
	Close() error
}

// Output is a sink and whether it is required.
type Output struct {
	Sink Sink
	// Required makes the Logger fail closed on this sink: Record returns
	// an error when it cannot write, and the caller must refuse the
	// alteration. An optional sink's failures go to OnError only.
	Required bool
}

// DefaultRecent is the ring size when Config.Recent is 0.
const DefaultRecent = 1000

// Config configures a Logger.
type Config struct {
	Outputs []Output
	// Recent bounds the events kept in memory for Recent (0: DefaultRecent,
	// negative: none). Denials are kept in a ring of their own of the
	// same size, so that no flood of them pushes the changes out.
	Recent int
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// OnError, if set, hears about every sink failure, required or not.
	OnError func(sink string, err error)
	// AggregateInterval, when positive, aggregates denials (Outcome
	// Denied): per action, principal, source address (without the port)
	// and listener, the first denial of an interval is written as it
	// comes and the others are counted and written as one event
	// (Event.Aggregate) once the interval is over. 0: every denial is
	// written as it comes, like any event.
	AggregateInterval time.Duration
	// AggregateKeys caps the keys tracked at once (0:
	// DefaultAggregateKeys); denials of further keys are counted together
	// per action.
	AggregateKeys int
}

// Logger fans events out to sinks. It is safe for concurrent use; events are
// written one at a time, so every sink sees them in the same order. A nil
// *Logger records nothing and never fails.
//
// Denials never hold up the other events: with aggregation they are
// counted in memory, and those that are written (the first of a key in an
// interval, and the summaries) take turns among themselves before they
// queue for the sinks, so a change waits for at most the one denial being
// written, however many are being refused at the same time.
type Logger struct {
	cfg Config

	// turn serialises the writes to the sinks, the other events before
	// the denials.
	turn    turnstile
	failed  atomic.Uint64 // sink failures
	mu      sync.Mutex    // the rings
	changes ring          // every event but denials
	denials ring
	seq     uint64 // events written, for the rings' order

	amu     sync.Mutex // the aggregator and the flusher's life
	agg     *aggregator
	running bool // the flusher goroutine
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// NewLogger returns a Logger writing to cfg.Outputs. With aggregation, a
// goroutine writes the summaries from the first denial on; Close stops it.
func NewLogger(cfg Config) *Logger {
	n := cfg.Recent
	if n == 0 {
		n = DefaultRecent
	}
	if n < 0 {
		n = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Logger{cfg: cfg, changes: newRing(n), denials: newRing(n)}
	if cfg.AggregateInterval > 0 {
		l.agg = newAggregator(cfg.AggregateInterval, cfg.AggregateKeys)
	}
	return l
}

// Required reports whether any output is required.
func (l *Logger) Required() bool {
	if l == nil {
		return false
	}
	for _, o := range l.cfg.Outputs {
		if o.Required {
			return true
		}
	}
	return false
}

// Failures returns how many sink writes have failed so far.
func (l *Logger) Failures() uint64 {
	if l == nil {
		return 0
	}
	return l.failed.Load()
}

// Aggregated returns how many denials were counted into summary events
// instead of being written one by one, and how many of them into the
// "others" events of keys beyond the cap.
func (l *Logger) Aggregated() (summed, overflowed uint64) {
	if l == nil || l.agg == nil {
		return 0, 0
	}
	l.amu.Lock()
	defer l.amu.Unlock()
	return l.agg.summed, l.agg.overflowed
}

// Prepare fills in the event's ID and Time if they are empty and converts
// Time to UTC. Record calls it; callers that need the id before recording
// (to refer to the event) may call it first.
func (l *Logger) Prepare(e *Event) {
	now := time.Now
	if l != nil {
		now = l.cfg.Now
	}
	if e.Time.IsZero() {
		e.Time = now()
	}
	e.Time = e.Time.UTC()
	if e.ID == "" {
		e.ID = NewID(e.Time)
	}
}

// Record writes e to every sink and returns once they all have it (or
// failed). It returns an error if the event could not be encoded or a
// required sink failed; the caller must then refuse the alteration the
// event describes.
//
// Required sinks are written first, in order, and the first failure stops
// them. A success (Applied, Validated) that a required sink refused goes no
// further: optional sinks and the ring never show an alteration that was
// refused for want of an audit trail. (With several required sinks, those
// before the failing one do have it; the caller's follow-up event, which
// supersedes it, corrects them.) Any other event still goes to the optional
// sinks and the ring: that is how the refusal itself reaches stdout and the
// HTTP API while the required sink is down.
//
// With aggregation, a denial that is counted rather than written returns
// nil at once.
func (l *Logger) Record(ctx context.Context, e Event) error {
	if l == nil {
		return nil
	}
	l.Prepare(&e)
	if e.Outcome != Denied {
		return l.write(ctx, e)
	}
	if l.agg != nil {
		l.amu.Lock()
		write := l.closed || l.agg.observe(&e, e.Time)
		if !l.running && !l.closed {
			l.running = true
			l.stop, l.done = make(chan struct{}), make(chan struct{})
			go l.flusher(l.stop, l.done)
		}
		l.amu.Unlock()
		if !write {
			return nil
		}
	}
	return l.write(ctx, e)
}

// write sends a prepared event to the sinks and keeps it in its ring. A
// denial waits for its turn behind every other event waiting.
func (l *Logger) write(ctx context.Context, e Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode event: %w", err)
	}
	l.turn.enter(e.Outcome == Denied)
	defer l.turn.leave()
	write := func(o Output) error {
		err := ctx.Err()
		if err == nil {
			err = o.Sink.Write(ctx, &e, data)
		}
		if err != nil {
			l.failed.Add(1)
			if l.cfg.OnError != nil {
				l.cfg.OnError(o.Sink.Name(), err)
			}
		}
		return err
	}
	var reqErr error
	for _, o := range l.cfg.Outputs {
		if o.Required {
			if err := write(o); err != nil {
				reqErr = fmt.Errorf("audit: required sink %s: %w", o.Sink.Name(), err)
				break
			}
		}
	}
	if reqErr != nil && e.Outcome.Success() {
		return reqErr
	}
	for _, o := range l.cfg.Outputs {
		if !o.Required {
			write(o)
		}
	}
	l.mu.Lock()
	l.seq++
	if e.Outcome == Denied {
		l.denials.add(e, l.seq)
	} else {
		l.changes.add(e, l.seq)
	}
	l.mu.Unlock()
	return reqErr
}

// turnstile lets one writer through at a time. When it is released, the
// longest-waiting event that is not a denial goes next, and a denial only
// when no other event waits: however many denials queue, a change waits
// for at most the one being written.
type turnstile struct {
	mu      sync.Mutex
	busy    bool
	changes []chan struct{} // waiting, oldest first
	denials []chan struct{}
}

func (t *turnstile) enter(denial bool) {
	t.mu.Lock()
	if !t.busy {
		t.busy = true
		t.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	if denial {
		t.denials = append(t.denials, ch)
	} else {
		t.changes = append(t.changes, ch)
	}
	t.mu.Unlock()
	<-ch // handed over by leave, still busy
}

func (t *turnstile) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case len(t.changes) > 0:
		close(t.changes[0])
		t.changes = t.changes[1:]
	case len(t.denials) > 0:
		close(t.denials[0])
		t.denials = t.denials[1:]
	default:
		t.busy = false
	}
}

// flusher writes the summaries whose interval is over, checking four times
// an interval, until stop is closed.
func (l *Logger) flusher(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(max(l.cfg.AggregateInterval/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			l.flush(false)
		}
	}
}

// Flush writes the summaries of every denial counted so far, whether or
// not their interval is over. Close does it too.
func (l *Logger) Flush() {
	if l == nil || l.agg == nil {
		return
	}
	l.flush(true)
}

func (l *Logger) flush(all bool) {
	l.amu.Lock()
	evs := l.agg.due(l.cfg.Now(), all)
	l.amu.Unlock()
	for _, e := range evs {
		l.Prepare(&e)
		l.write(context.Background(), e)
	}
}

// Recent returns up to n of the most recently recorded events, oldest
// first (n ≤ 0: all that are kept). Denials take at most half of the n
// when there are more recent changes than that to show, so a flood of
// refusals never hides the changes.
func (l *Logger) Recent(n int) []Event {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	ch, dn := l.changes.held(), l.denials.held()
	if n > 0 {
		d := min(dn, max(n/2, n-ch))
		ch, dn = min(ch, n-d), d
	}
	held := append(l.changes.last(ch), l.denials.last(dn)...)
	l.mu.Unlock()
	slices.SortFunc(held, func(a, b kept) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Event, len(held))
	for i := range held {
		out[i] = held[i].Event
	}
	return out
}

// Close writes the pending summaries and closes every sink.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.amu.Lock()
	wasClosed := l.closed
	l.closed = true
	stop, done := l.stop, l.done
	l.amu.Unlock()
	if stop != nil && !wasClosed {
		close(stop)
		<-done
	}
	l.Flush()
	l.turn.enter(false)
	defer l.turn.leave()
	var errs []error
	for _, o := range l.cfg.Outputs {
		if err := o.Sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("audit: close %s: %w", o.Sink.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// ring keeps the last events added.
type ring struct {
	buf  []kept
	next int // slot of the next event
	full bool
}

// kept is an event in a ring, with its place in the order of writing.
type kept struct {
	Event
	seq uint64
}

func newRing(n int) ring { return ring{buf: make([]kept, n)} }

func (r *ring) add(e Event, seq uint64) {
	if len(r.buf) == 0 {
		return
	}
	r.buf[r.next] = kept{e, seq}
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *ring) held() int {
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// last returns the n most recent events, oldest first (n ≤ held).
func (r *ring) last(n int) []kept {
	out := make([]kept, 0, n)
	for i := n; i > 0; i-- {
		j := r.next - i
		if j < 0 {
			j += len(r.buf)
		}
		out = append(out, r.buf[j])
	}
	return out
}
