package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
	// negative: none).
	Recent int
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// OnError, if set, hears about every sink failure, required or not.
	OnError func(sink string, err error)
}

// Logger fans events out to sinks. It is safe for concurrent use; events are
// written one at a time, so every sink sees them in the same order. A nil
// *Logger records nothing and never fails.
type Logger struct {
	cfg Config

	mu     sync.Mutex
	ring   []Event
	next   int // ring slot of the next event
	full   bool
	failed uint64 // sink failures
}

// NewLogger returns a Logger writing to cfg.Outputs.
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
	return &Logger{cfg: cfg, ring: make([]Event, n)}
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
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
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
func (l *Logger) Record(ctx context.Context, e Event) error {
	if l == nil {
		return nil
	}
	l.Prepare(&e)
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode event: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	write := func(o Output) error {
		err := ctx.Err()
		if err == nil {
			err = o.Sink.Write(ctx, &e, data)
		}
		if err != nil {
			l.failed++
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
	if len(l.ring) > 0 {
		l.ring[l.next] = e
		l.next++
		if l.next == len(l.ring) {
			l.next, l.full = 0, true
		}
	}
	return reqErr
}

// Recent returns up to n of the most recently recorded events, oldest
// first (n ≤ 0: all that are kept).
func (l *Logger) Recent(n int) []Event {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.next
	if l.full {
		held = len(l.ring)
	}
	if n <= 0 || n > held {
		n = held
	}
	out := make([]Event, 0, n)
	for i := n; i > 0; i-- {
		j := l.next - i
		if j < 0 {
			j += len(l.ring)
		}
		out = append(out, l.ring[j])
	}
	return out
}

// Close closes every sink.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, o := range l.cfg.Outputs {
		if err := o.Sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("audit: close %s: %w", o.Sink.Name(), err))
		}
	}
	return errors.Join(errs...)
}
