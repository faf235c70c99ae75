package admission

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// ErrUnknownListener is returned (wrapped, with the name) by Admit for a
// listener that is not in the current Settings.
var ErrUnknownListener = errors.New("admission: unknown listener")

const (
	// ipSensorExpiryMs is Kafka's InactiveSensorExpirationTimeSeconds for ip
	// sensors (1 h). Gateway and listener sensors never expire.
	ipSensorExpiryMs = 3600 * 1000
	// sweepEveryMs matches Kafka's ExpireSensorTask period (30 s): the sweep is
	// O(tracked IPs) so it must not run on every accept.
	sweepEveryMs = 30 * 1000
	// maxFreeEntries bounds the recycled per-IP entries kept for reuse.
	maxFreeEntries = 1024
)

// Limiter is Kafka's ConnectionQuotas for one gateway: the counts, the rate
// sensors and the acceptor procedure of KIP-402 and KIP-612, without sockets.
// All methods are safe for concurrent use; one mutex guards everything, as
// Kafka's single `counts` monitor does, because the slot check and the count
// increment must be atomic across listeners.
type Limiter struct {
	mu sync.Mutex

	win    window
	gen    uint64 // bumped by Update; per-IP entries re-resolve limits lazily
	lastMs int64  // clock clamp: concurrent callers may pass slightly older times

	// wake is closed (and replaced lazily) whenever a slot may have freed or
	// the settings changed: Kafka's notifyAll. Nil while nobody waits, so the
	// hot path allocates no channel.
	wake chan struct{}
	// shed is closed when connections must be shed (total > max.connections
	// beyond those already handed out by Shed).
	shed chan struct{}

	gatewayRate sensor
	maxConns    int
	total       int

	listeners map[string]*listener
	order     []*listener // Settings order, for Stats

	maxPerIP       int
	perIPOverrides map[netip.Addr]int
	ipRates        ipRates

	ips         map[netip.Addr]*ipEntry
	free        []*ipEntry
	lastSweepMs int64

	conns       []*Conn // registry of accepted connections, for Shed
	shedPending int     // handed out by Shed, not yet released
	scratch     []*Conn

	top topIPs
}

type listener struct {
	name     string
	exempt   bool
	removed  bool
	maxConns int
	maxRate  int
	rate     sensor
	count    int

	blockedTickets int
	blockedSince   time.Time
	blockedTotal   time.Duration
	meter          meter

	c listenerCounters
}

type listenerCounters struct {
	accepted               uint64
	throttledGatewayRate   uint64
	throttledListenerRate  uint64
	blockedGatewayCount    uint64
	blockedListenerCount   uint64
	parkedIPRate           uint64
	rejectedIPCount        uint64
	acceptThrottle         ThrottleTime
	ipAcceptThrottle       ThrottleTime
	rejectedRemovedTickets uint64
}

// ipEntry is Kafka's per-address count plus its lazily created ip sensor.
type ipEntry struct {
	count     int
	hasSensor bool
	sensor    sensor
	gen       uint64 // settings generation of rateLimit and maxConns
	rateLimit int
	maxConns  int
}

// New returns a Limiter for s; now starts the listeners' blocked-time meters.
func New(s Settings, now time.Time) (*Limiter, error) {
	l := &Limiter{
		listeners: make(map[string]*listener),
		ips:       make(map[netip.Addr]*ipEntry),
	}
	if err := l.Update(s, now); err != nil {
		return nil, err
	}
	return l, nil
}

// Update applies new settings live, with Kafka's §5.6 semantics: new limits
// apply to the next check; the bounds of live ip sensors change at once; a
// wait already in progress keeps its T; blocked acceptors are woken (Wake),
// and if max.connections is now below the total, ShedSignal fires and Shed
// names the connections to close. Lowered listener or per-IP counts close
// nothing. Listeners missing from s are removed: their outstanding tickets
// are rejected, their connections stay counted until released. Changing the
// quota window restarts every rate sensor (Kafka would need a restart).
func (l *Limiter) Update(s Settings, now time.Time) error {
	if err := s.Validate(); err != nil {
		return err
	}
	rates := newIPRates(s.DefaultIPConnectionRate, s.IPConnectionRates)
	overrides := make(map[netip.Addr]int, len(s.MaxConnectionsPerIPOverrides))
	for a, n := range s.MaxConnectionsPerIPOverrides {
		overrides[a] = n
	}
	win := window{samples: s.QuotaWindowNum, sizeMs: int64(s.QuotaWindowSizeSeconds) * 1000}
	topK := s.TopIPs
	if topK == 0 {
		topK = DefaultTopIPs
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	if win != l.win {
		l.win = win
		l.gatewayRate.restart(win)
		for _, ln := range l.listeners {
			ln.rate.restart(win)
		}
		for _, e := range l.ips {
			if e.hasSensor {
				e.sensor.restart(win)
			}
		}
	}
	l.gatewayRate.bound = float64(s.MaxConnectionCreationRate)
	l.maxConns = s.MaxConnections
	l.maxPerIP = s.MaxConnectionsPerIP
	l.perIPOverrides = overrides
	l.ipRates = rates
	l.gen++

	keep := make(map[string]bool, len(s.Listeners))
	l.order = l.order[:0]
	for _, ls := range s.Listeners {
		ln := l.listeners[ls.Name]
		if ln == nil {
			ln = &listener{name: ls.Name, meter: newMeter(now)}
			ln.rate.restart(win)
			l.listeners[ls.Name] = ln
		}
		ln.exempt = ls.Exempt
		ln.maxConns = orUnlimited(ls.MaxConnections)
		ln.maxRate = orUnlimited(ls.MaxConnectionCreationRate)
		ln.rate.bound = float64(ln.maxRate)
		keep[ls.Name] = true
		l.order = append(l.order, ln)
	}
	for name, ln := range l.listeners {
		if !keep[name] {
			ln.removed = true
			delete(l.listeners, name)
		}
	}
	l.top.resize(topK)

	l.signalWake()
	l.maybeSignalShed()
	return nil
}

func orUnlimited(v int) int {
	if v == 0 {
		return Unlimited
	}
	return v
}

// Generation counts applied Updates (starting at 1 after New).
func (l *Limiter) Generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen
}

// Wake returns a channel that is closed the next time a slot may free up or
// the settings change, like Kafka's notifyAll on the counts monitor.
func (l *Limiter) Wake() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wakeChan()
}

func (l *Limiter) wakeChan() chan struct{} {
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

func (l *Limiter) signalWake() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// ShedSignal returns a channel closed the next time the gateway-wide count
// exceeds max.connections by more than the connections Shed already named
// (after an exempt listener's accept or a lowered max.connections). A shedding
// goroutine loops: Shed, close what it names, wait on ShedSignal.
func (l *Limiter) ShedSignal() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shed == nil {
		l.shed = make(chan struct{})
	}
	c := l.shed
	l.maybeSignalShed() // an excess that already exists closes it at once
	return c
}

func (l *Limiter) maybeSignalShed() {
	if l.shed != nil && l.total-l.maxConns-l.shedPending > 0 {
		close(l.shed)
		l.shed = nil
	}
}

// protected is Kafka's protectedListener: exempt, and more than one listener.
func (l *Limiter) protected(ln *listener) bool {
	return ln.exempt && !ln.removed && len(l.listeners) > 1
}

// slotFree is connectionSlotAvailable.
func (l *Limiter) slotFree(ln *listener, protected bool) (bool, Reason) {
	if ln.count >= ln.maxConns {
		return false, ReasonListenerCount
	}
	if protected || l.total < l.maxConns {
		return true, ReasonNone
	}
	return false, ReasonGatewayCount
}

// ms converts to Kafka's millisecond clock, never letting it run backwards.
func (l *Limiter) ms(now time.Time) int64 {
	m := now.UnixMilli()
	if m < l.lastMs {
		return l.lastMs
	}
	l.lastMs = m
	return m
}

// Admit is §5.2 step 1 up to the wait, at the moment the connection arrives
// (after the OS accepted it): record 1 into the gateway rate (unless the
// listener is protected) and into the listener rate; T = max of the two
// throttles, each capped at quota.window.size.seconds. The connection stays
// recorded whatever happens next, except for the per-IP un-record in AdmitIP.
// Then call AdmitIP with the ticket.
func (l *Limiter) Admit(listenerName string, now time.Time) (Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.listeners[listenerName]
	if ln == nil {
		return Ticket{}, fmt.Errorf("%w %q", ErrUnknownListener, listenerName)
	}
	nowMs := l.ms(now)
	protected := l.protected(ln)
	var tg int64
	if !protected {
		tg = l.gatewayRate.recordThrottle(l.win, nowMs)
	}
	tl := ln.rate.recordThrottle(l.win, nowMs)
	t := Ticket{ln: ln, start: now, until: now}
	if tg > 0 {
		ln.c.throttledGatewayRate++
	}
	if tl > 0 {
		ln.c.throttledListenerRate++
	}
	if th := max(tg, tl); th > 0 {
		t.throttle = time.Duration(th) * time.Millisecond
		t.until = now.Add(t.throttle)
		t.rateReason = ReasonGatewayRate
		if tl > tg {
			t.rateReason = ReasonListenerRate
		}
		ln.c.acceptThrottle.add(t.throttle)
		l.beginBlock(&t, now)
	} else if free, _ := l.slotFree(ln, protected); !free {
		l.beginBlock(&t, now)
	}
	return t, nil
}

// AdmitIP finishes §5.2 for the connection of ticket t, from peer ip, to be
// registered as c if accepted:
//
//   - until t.Until() has passed and a slot is free (listener count below its
//     max, and, unless protected, total below max.connections) it returns
//     Wait, changing nothing; retry after Until or when Wake closes;
//   - step 2, if the ip's rate is not Unlimited: record 1 into its sensor; on
//     a throttle T_ip, un-record 1 from the ip, gateway (unless protected) and
//     listener sensors and return Park with Until = now + T_ip;
//   - step 3: count the connection (ip, total, listener);
//   - step 4: if the ip already had its maximum, uncount it and return Reject
//     (the rates keep it: Kafka does not un-record these);
//   - otherwise register c (last activity = now) and return Accept.
//
// The time spent waiting since Admit is added to the listener's blocked-time
// meter when the wait ends. c must be unregistered (new or released) and is
// only touched on Accept.
func (l *Limiter) AdmitIP(t *Ticket, ip netip.Addr, c *Conn, now time.Time) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.ln == nil || t.done {
		panic("admission: AdmitIP with a zero or finished Ticket")
	}
	if c.ln != nil {
		panic("admission: AdmitIP with a Conn that is still registered")
	}
	ln := t.ln
	if ln.removed {
		l.endBlock(t, now)
		t.done = true
		ln.c.rejectedRemovedTickets++
		return Decision{Verdict: Reject, Reason: ReasonListenerRemoved}
	}
	if now.Before(t.until) {
		l.beginBlock(t, now)
		return Decision{Verdict: Wait, Reason: t.rateReason, Until: t.until, Delay: t.throttle}
	}
	protected := l.protected(ln)
	if free, why := l.slotFree(ln, protected); !free {
		l.beginBlock(t, now)
		if !t.waitedCount {
			t.waitedCount = true
			if why == ReasonListenerCount {
				ln.c.blockedListenerCount++
			} else {
				ln.c.blockedGatewayCount++
			}
		}
		return Decision{Verdict: Wait, Reason: why, Wake: l.wakeChan()}
	}
	l.endBlock(t, now)
	t.done = true

	ip = normalizeAddr(ip)
	nowMs := l.ms(now)
	l.maybeSweep(nowMs)
	e := l.entry(ip)

	// Step 2: per-IP rate.
	if d := l.ipRateThrottle(e, ln, protected, nowMs); d > 0 {
		ln.c.ipAcceptThrottle.add(d)
		ln.c.parkedIPRate++
		l.top.add(ip, true)
		return Decision{Verdict: Park, Reason: ReasonIPRate, Until: now.Add(d), Delay: d}
	}

	// Step 3: count.
	prev := e.count
	e.count++
	l.total++
	ln.count++

	// Step 4: per-IP count, checked against the count before step 3.
	if prev >= e.maxConns {
		e.count--
		l.total--
		ln.count--
		ln.c.rejectedIPCount++
		l.top.add(ip, false)
		return Decision{Verdict: Reject, Reason: ReasonIPCount}
	}

	l.register(c, ln, e, ip, now)
	return Decision{Verdict: Accept}
}

// ipRateThrottle is step 2 of §5.2: unless the ip's rate is Unlimited, it
// records the connection into the ip's sensor; on a throttle it un-records
// it from the ip, gateway (unless protected) and listener sensors and
// returns the throttle. Zero means the ip's rate lets the connection pass.
func (l *Limiter) ipRateThrottle(e *ipEntry, ln *listener, protected bool, nowMs int64) time.Duration {
	if e.rateLimit == Unlimited {
		return 0
	}
	if !e.hasSensor {
		e.hasSensor = true
		e.sensor.restart(l.win)
	}
	e.sensor.bound = float64(e.rateLimit)
	tip := e.sensor.recordThrottle(l.win, nowMs)
	if tip <= 0 {
		return 0
	}
	e.sensor.unrecord(nowMs)
	if !protected {
		l.gatewayRate.unrecord(nowMs)
	}
	ln.rate.unrecord(nowMs)
	return time.Duration(tip) * time.Millisecond
}

// register makes c the accepted connection of ip on ln, active now.
func (l *Limiter) register(c *Conn, ln *listener, e *ipEntry, ip netip.Addr, now time.Time) {
	c.ln, c.entry, c.ip, c.shedding = ln, e, ip, false
	c.lastActive.Store(now.UnixNano())
	c.slot = len(l.conns)
	l.conns = append(l.conns, c)
	ln.c.accepted++
	l.maybeSignalShed()
}

// Cancel abandons a ticket that AdmitIP has not finished (e.g. the listener
// is shutting down): its blocked time is accounted, its rate recordings stay,
// nothing is counted. Cancelling a finished ticket does nothing.
func (l *Limiter) Cancel(t *Ticket, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.ln == nil || t.done {
		return
	}
	l.endBlock(t, now)
	t.done = true
}

// MarkBlocked adds time the accept loop spent blocked outside this package
// (Kafka's step 5: every processor queue full) to the listener's
// AcceptorBlockedPercent meter. Unknown listeners are ignored.
func (l *Limiter) MarkBlocked(listenerName string, d time.Duration, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ln := l.listeners[listenerName]; ln != nil && d > 0 {
		ln.meter.mark(now, d)
		ln.blockedTotal += d
	}
}

func (l *Limiter) beginBlock(t *Ticket, at time.Time) {
	if t.blocked {
		return
	}
	t.blocked = true
	t.blockStart = at
	if t.ln.blockedTickets == 0 {
		t.ln.blockedSince = at
	}
	t.ln.blockedTickets++
}

// endBlock marks the whole wait at its end, as Kafka does after its wait loop.
func (l *Limiter) endBlock(t *Ticket, now time.Time) {
	if !t.blocked {
		return
	}
	t.blocked = false
	ln := t.ln
	if d := now.Sub(t.blockStart); d > 0 {
		ln.meter.mark(now, d)
		ln.blockedTotal += d
	}
	ln.blockedTickets--
	if ln.blockedTickets == 0 {
		ln.blockedSince = time.Time{}
	}
}

// entry returns the ip's entry, creating it, with limits resolved for the
// current settings generation.
func (l *Limiter) entry(ip netip.Addr) *ipEntry {
	e := l.ips[ip]
	if e == nil {
		if n := len(l.free); n > 0 {
			e = l.free[n-1]
			l.free = l.free[:n-1]
		} else {
			e = new(ipEntry)
		}
		l.ips[ip] = e
	}
	if e.gen != l.gen {
		e.gen = l.gen
		e.rateLimit = l.ipRates.lookup(ip)
		e.maxConns = l.maxPerIP
		if n, ok := l.perIPOverrides[ip]; ok {
			e.maxConns = n
		}
	}
	return e
}

// dropIfIdle removes an entry with neither connections nor a sensor. Only
// the sweep calls it, so the hot path never deletes from the map.
func (l *Limiter) dropIfIdle(ip netip.Addr, e *ipEntry) {
	if e.count > 0 || e.hasSensor {
		return
	}
	delete(l.ips, ip)
	if len(l.free) < maxFreeEntries {
		r := e.sensor.rate // keeps its slots for the next address
		r.Reset()
		*e = ipEntry{}
		e.sensor.rate = r
		l.free = append(l.free, e)
	}
}

// maybeSweep expires ip sensors idle for over an hour (Kafka's Sensor.hasExpired
// is strictly greater) and drops entries with nothing left in them, so an
// address without connections or sensor is forgotten within 30 s.
func (l *Limiter) maybeSweep(nowMs int64) {
	if nowMs-l.lastSweepMs < sweepEveryMs {
		return
	}
	l.lastSweepMs = nowMs
	for ip, e := range l.ips {
		if e.hasSensor && nowMs-e.sensor.lastRecord > ipSensorExpiryMs {
			e.hasSensor = false
			e.sensor.rate.Reset()
		}
		l.dropIfIdle(ip, e)
	}
}

// MaxConnectionsExceeded is Kafka's maxConnectionsExceeded: the total is
// strictly above max.connections and the listener is not protected.
func (l *Limiter) MaxConnectionsExceeded(listenerName string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.listeners[listenerName]
	return ln != nil && l.total > l.maxConns && !l.protected(ln)
}

// sortConns orders shedding candidates least recently active first; the ID
// breaks ties so results are deterministic.
func sortConns(cs []*Conn) {
	slices.SortFunc(cs, func(a, b *Conn) int {
		x, y := a.lastActive.Load(), b.lastActive.Load()
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// MaxConnectionsPerIP returns the per-address limit in force (Unlimited
// when none): in a Tollgate cluster, this instance's part.
func (l *Limiter) MaxConnectionsPerIP() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxPerIP
}
