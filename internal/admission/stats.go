package admission

import (
	"net/netip"
	"slices"
	"time"
)

// Stats is a snapshot of the Limiter's metrics as plain numbers; exporting
// them (Prometheus or otherwise) is the caller's business.
type Stats struct {
	Generation     uint64
	Active         int // connections counted gateway-wide, exempt ones included
	MaxConnections int
	ShedPending    int // named by Shed, not yet released
	TrackedIPs     int // per-IP entries: connected, with a live ip sensor, or idle < 30 s
	// ConnectionAcceptRate is Kafka's broker-connection-accept-rate: the
	// gateway-wide sensor's rate (connections/s), net of un-records.
	ConnectionAcceptRate float64
	Listeners            []ListenerStats // in Settings order
	// TopIPs are the addresses with the most parks and rejects, most first.
	TopIPs []IPStats
}

// ListenerStats are one listener's counters. The "by" counters count
// connections, not retries: a ticket that waits for a slot is counted once.
type ListenerStats struct {
	Name      string
	Exempt    bool // as configured
	Protected bool // exempt and in effect (more than one listener)
	Active    int

	MaxConnections            int
	MaxConnectionCreationRate int
	// ConnectionAcceptRate is Kafka's connection-accept-rate{listener}.
	ConnectionAcceptRate float64

	Accepted uint64
	// Step 1: connections whose arrival violated a rate (the acceptor was
	// delayed), by sensor; one connection can count in both.
	ThrottledByGatewayRate  uint64
	ThrottledByListenerRate uint64
	// Step 1: connections that had to wait for a slot, by the limit that was
	// full when the wait started.
	BlockedByGatewayCount  uint64
	BlockedByListenerCount uint64
	// Step 2: connections parked and closed for their ip's rate.
	ParkedByIPRate uint64
	// Step 4: connections closed at once for their ip's count.
	RejectedByIPCount uint64
	// Tickets rejected because Update removed the listener.
	RejectedListenerRemoved uint64

	// AcceptThrottle and IPAcceptThrottle are the data behind Kafka's
	// connection-accept-throttle-time and ip-connection-accept-throttle-time
	// (averages of the non-zero throttles), as cumulative count and sum.
	AcceptThrottle   ThrottleTime
	IPAcceptThrottle ThrottleTime

	// Blocked is AcceptorBlockedPercent.
	Blocked BlockedStats
}

// ThrottleTime accumulates non-zero throttle times.
type ThrottleTime struct {
	Count uint64
	Total time.Duration
}

func (t *ThrottleTime) add(d time.Duration) {
	t.Count++
	t.Total += d
}

// Average is the mean throttle, 0 if there was none.
func (t ThrottleTime) Average() time.Duration {
	if t.Count == 0 {
		return 0
	}
	return t.Total / time.Duration(t.Count)
}

// BlockedStats is Kafka's AcceptorBlockedPercent{listener}: the rates are
// fractions of time (blocked ns per ns, normally 0..1 despite the name) from
// a Yammer Meter marked with each wait's length when it ends.
type BlockedStats struct {
	// Since is when the current wait began; zero when not blocked.
	Since time.Time
	// Total is all blocked time marked so far (Yammer's count, as a duration).
	Total time.Duration
	// MeanRate is Total over the listener's lifetime; the others are Yammer's
	// 1, 5 and 15 minute exponentially weighted rates (5 s ticks).
	MeanRate          float64
	OneMinuteRate     float64
	FiveMinuteRate    float64
	FifteenMinuteRate float64
}

// IPStats counts the parks (per-IP rate) and rejects (per-IP count) of one
// address. Cardinality is bounded with the Space-Saving algorithm (Metwally
// et al.): at most Settings.TopIPs addresses are kept; a new address replaces
// the one with the fewest events and inherits its count. Any address with more
// than total/K events is guaranteed to be present. Events is therefore an
// upper bound, overstated by at most Overcount; Parked and Rejected are exact
// since the address entered the table.
type IPStats struct {
	Addr      netip.Addr
	Events    uint64
	Overcount uint64
	Parked    uint64
	Rejected  uint64
}

// Stats returns a snapshot; now advances the meters and the rate windows.
func (l *Limiter) Stats(now time.Time) Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	nowMs := l.ms(now)
	rate := l.gatewayRate.measure(nowMs)
	s := Stats{
		Generation:           l.gen,
		Active:               l.total,
		MaxConnections:       l.maxConns,
		ShedPending:          l.shedPending,
		TrackedIPs:           len(l.ips),
		ConnectionAcceptRate: rate,
		Listeners:            make([]ListenerStats, 0, len(l.order)),
		TopIPs:               l.top.snapshot(),
	}
	for _, ln := range l.order {
		r := ln.rate.measure(nowMs)
		mean, m1, m5, m15 := ln.meter.snapshot(now)
		s.Listeners = append(s.Listeners, ListenerStats{
			Name:                      ln.name,
			Exempt:                    ln.exempt,
			Protected:                 l.protected(ln),
			Active:                    ln.count,
			MaxConnections:            ln.maxConns,
			MaxConnectionCreationRate: ln.maxRate,
			ConnectionAcceptRate:      r,
			Accepted:                  ln.c.accepted,
			ThrottledByGatewayRate:    ln.c.throttledGatewayRate,
			ThrottledByListenerRate:   ln.c.throttledListenerRate,
			BlockedByGatewayCount:     ln.c.blockedGatewayCount,
			BlockedByListenerCount:    ln.c.blockedListenerCount,
			ParkedByIPRate:            ln.c.parkedIPRate,
			RejectedByIPCount:         ln.c.rejectedIPCount,
			RejectedListenerRemoved:   ln.c.rejectedRemovedTickets,
			AcceptThrottle:            ln.c.acceptThrottle,
			IPAcceptThrottle:          ln.c.ipAcceptThrottle,
			Blocked: BlockedStats{
				Since:             ln.blockedSince,
				Total:             ln.blockedTotal,
				MeanRate:          mean,
				OneMinuteRate:     m1,
				FiveMinuteRate:    m5,
				FifteenMinuteRate: m15,
			},
		})
	}
	return s
}

// IPConnectionAcceptRate is Kafka's connection-accept-rate{ip}: the rate of
// the address's ip sensor, false if it has none (its rate is Unlimited, it
// never connected, or the sensor expired).
func (l *Limiter) IPConnectionAcceptRate(ip netip.Addr, now time.Time) (float64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.ips[normalizeAddr(ip)]
	if e == nil || !e.hasSensor {
		return 0, false
	}
	return e.sensor.measure(l.ms(now)), true
}

// IPConnections is the number of counted connections from ip.
func (l *Limiter) IPConnections(ip netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.ips[normalizeAddr(ip)]; e != nil {
		return e.count
	}
	return 0
}

// topIPs is a Space-Saving summary: a min-heap on Events plus an index.
type topIPs struct {
	k    int
	heap []IPStats
	pos  map[netip.Addr]int
}

// resize changes K; shrinking keeps the heaviest entries.
func (t *topIPs) resize(k int) {
	if t.pos == nil {
		t.pos = make(map[netip.Addr]int, k)
	}
	if k == t.k {
		return
	}
	t.k = k
	if len(t.heap) <= k {
		return
	}
	keep := t.snapshot()[:k]
	t.heap = t.heap[:0]
	clear(t.pos)
	for _, e := range keep {
		t.heap = append(t.heap, e)
		t.pos[e.Addr] = len(t.heap) - 1
		t.up(len(t.heap) - 1)
	}
}

func (t *topIPs) add(a netip.Addr, parked bool) {
	if t.k == 0 {
		return
	}
	i, ok := t.pos[a]
	appended := false
	switch {
	case ok:
	case len(t.heap) < t.k:
		t.heap = append(t.heap, IPStats{Addr: a})
		i = len(t.heap) - 1
		t.pos[a] = i
		appended = true
	default: // evict the minimum; the newcomer inherits its count as overcount
		low := t.heap[0]
		delete(t.pos, low.Addr)
		t.heap[0] = IPStats{Addr: a, Events: low.Events, Overcount: low.Events}
		t.pos[a] = 0
		i = 0
	}
	e := &t.heap[i]
	e.Events++
	if parked {
		e.Parked++
	} else {
		e.Rejected++
	}
	if appended { // a new leaf with 1 event may be below its parent
		t.up(i)
	} else { // an increment can only push an entry down a min-heap
		t.down(i)
	}
}

func (t *topIPs) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.pos[t.heap[i].Addr] = i
	t.pos[t.heap[j].Addr] = j
}

func (t *topIPs) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if t.heap[p].Events <= t.heap[i].Events {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *topIPs) down(i int) {
	for {
		m, l, r := i, 2*i+1, 2*i+2
		if l < len(t.heap) && t.heap[l].Events < t.heap[m].Events {
			m = l
		}
		if r < len(t.heap) && t.heap[r].Events < t.heap[m].Events {
			m = r
		}
		if m == i {
			return
		}
		t.swap(i, m)
		i = m
	}
}

func (t *topIPs) snapshot() []IPStats {
	out := slices.Clone(t.heap)
	slices.SortFunc(out, func(a, b IPStats) int {
		switch {
		case a.Events > b.Events:
			return -1
		case a.Events < b.Events:
			return 1
		}
		return a.Addr.Compare(b.Addr)
	})
	return out
}
