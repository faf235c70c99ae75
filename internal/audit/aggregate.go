package audit

import (
	"net/netip"
	"slices"
	"time"
)

// Aggregation of denials.
//
// A denied event (a failed login, an alteration the initiator may not make)
// is something anyone who can reach a port can cause as fast as they can
// send requests. Written one by one, each is an fsync'd line: a client that
// never authenticates could fill the disk, push every change out of the
// recent-events ring and keep the audit file's lock busy ahead of the
// changes that must be recorded before they are applied. So denials are
// aggregated per (action, principal, source address, listener): the first
// of an interval is written as it comes, the rest of the interval are
// counted and written as one event carrying the count and the first and
// last times (Event.Aggregate). The map of keys is capped; denials of keys
// beyond the cap are counted together, per action, in an "others" event.

// DefaultAggregateKeys caps the (action, principal, source, listener) keys
// tracked when Config.AggregateKeys is 0.
const DefaultAggregateKeys = 4096

// Aggregate is what an event that sums several denials says about them.
type Aggregate struct {
	// Count is how many denials the event stands for: those after the
	// key's last written event, up to this one.
	Count uint64 `json:"count"`
	// First and Last are the times of the first and last of them.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Interval is the aggregation interval in force.
	Interval string `json:"interval"`
	// Others marks the event that sums the denials of keys beyond the
	// cap: their principals and sources are not recorded.
	Others bool `json:"others,omitempty"`
}

// aggKey is who was denied what, from where. The source is the address
// without the port: every connection has a new port.
type aggKey struct {
	action, principal, source, listener string
}

// sourceHost is a source "host:port" without the port ("" stays "").
func sourceHost(s string) string {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().String()
	}
	return s
}

func keyOf(e *Event) aggKey {
	return aggKey{action: e.Action, principal: e.Initiator.Principal, source: sourceHost(e.Initiator.Source), listener: e.Initiator.Listener}
}

// aggEntry is one key's state: the denials counted since its last written
// event.
type aggEntry struct {
	tmpl        Event     // what the summary says besides the count
	count       uint64    // denials counted since the last written event
	first, last time.Time // of those
	due         time.Time // when the next summary may be written
}

func (x *aggEntry) add(now time.Time) {
	if x.count == 0 {
		x.first = now
	}
	x.count++
	x.last = now
}

// aggregator is the pure part: it decides which denials are written and
// which summed, with time passed in. Not safe for concurrent use.
type aggregator struct {
	interval time.Duration
	max      int
	keys     map[aggKey]*aggEntry
	others   map[string]*aggEntry // by action
	// Statistics: denials summed instead of written one by one, and
	// those of them that went to an "others" event.
	summed, overflowed uint64
}

func newAggregator(interval time.Duration, max int) *aggregator {
	if max <= 0 {
		max = DefaultAggregateKeys
	}
	return &aggregator{interval: interval, max: max, keys: map[aggKey]*aggEntry{}, others: map[string]*aggEntry{}}
}

// template is what a summary of e's key carries: e's action, outcome,
// error and initiator (the source without its port), no target or changes
// (they may differ from one denial to the next).
func template(e *Event, src string) Event {
	t := Event{Action: e.Action, Outcome: e.Outcome, ErrorCode: e.ErrorCode, ErrorMessage: e.ErrorMessage, Initiator: e.Initiator}
	t.Initiator.Source = src
	t.Initiator.ClientID = ""
	return t
}

// observe takes a denial at now and reports whether it is to be written
// as it is (the first of its key in an interval); otherwise it is counted.
func (a *aggregator) observe(e *Event, now time.Time) bool {
	k := keyOf(e)
	if x, ok := a.keys[k]; ok {
		x.add(now)
		a.summed++
		return false
	}
	if len(a.keys) >= a.max {
		o, ok := a.others[e.Action]
		if !ok {
			t := Event{Action: e.Action, Outcome: e.Outcome, ErrorCode: e.ErrorCode,
				ErrorMessage: "denials of more principals and sources than the audit log tracks in one interval, counted together"}
			o = &aggEntry{tmpl: t, due: now.Add(a.interval)}
			a.others[e.Action] = o
		}
		o.add(now)
		a.summed++
		a.overflowed++
		return false
	}
	a.keys[k] = &aggEntry{tmpl: template(e, k.source), due: now.Add(a.interval)}
	return true
}

// due returns the summaries whose interval has ended by now (all of them
// with flush), oldest first, and forgets the keys that saw no denial for a
// whole interval (their next denial is written as it comes).
func (a *aggregator) due(now time.Time, flush bool) []Event {
	var out []Event
	emit := func(x *aggEntry, others bool) {
		ev := x.tmpl
		ev.Time = now
		ev.Aggregate = &Aggregate{Count: x.count, First: x.first.UTC(), Last: x.last.UTC(), Interval: a.interval.String(), Others: others}
		out = append(out, ev)
		x.count = 0
		x.due = now.Add(a.interval)
	}
	for k, x := range a.keys {
		if !flush && now.Before(x.due) {
			continue
		}
		if x.count == 0 {
			delete(a.keys, k)
			continue
		}
		emit(x, false)
	}
	for act, o := range a.others {
		if !flush && now.Before(o.due) {
			continue
		}
		emit(o, true)
		delete(a.others, act)
	}
	slices.SortFunc(out, func(x, y Event) int { return x.Aggregate.First.Compare(y.Aggregate.First) })
	return out
}

// pending reports whether anything is counted and not yet written.
func (a *aggregator) pending() bool {
	for _, x := range a.keys {
		if x.count > 0 {
			return true
		}
	}
	return len(a.others) > 0
}
