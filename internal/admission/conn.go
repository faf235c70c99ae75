package admission

import (
	"net/netip"
	"sync/atomic"
	"time"
)

// Conn is an accepted connection as the Limiter tracks it. The network code
// owns the memory: embed a Conn in its own connection type (or allocate one),
// set ID, and pass its address to AdmitIP; on Accept it is registered. That
// keeps admission allocation-free and lets Touch be a lock-free store. A Conn
// must not be copied once passed to AdmitIP.
type Conn struct {
	// ID is the caller's identifier; Shed reports connections by it.
	ID uint64

	lastActive atomic.Int64 // Unix ns; written by Touch without the mutex

	// Guarded by Limiter.mu.
	ln       *listener // nil while not registered
	entry    *ipEntry
	ip       netip.Addr
	slot     int // index in Limiter.conns
	shedding bool
}

// Touch records activity (a request read, a response written). Shed closes the
// least recently touched connections first. Safe to call concurrently with
// everything, including before registration or after Release.
func (c *Conn) Touch(now time.Time) { c.lastActive.Store(now.UnixNano()) }

// Release is the close of a registered connection (Kafka's dec): it uncounts
// it from its ip, its listener and the total, unregisters it, and wakes
// acceptors waiting for a slot. Releasing an unregistered Conn does nothing,
// so it is safe to call on every close path. After Release the Conn may be
// passed to AdmitIP again.
func (l *Limiter) Release(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := c.ln
	if ln == nil {
		return
	}
	// An entry with a count is never swept, so the pointer is still the
	// map's; an emptied entry is left for the sweep, which keeps a client
	// that reconnects at once from churning the map.
	c.entry.count--
	l.total--
	ln.count--
	last := len(l.conns) - 1
	l.conns[c.slot] = l.conns[last]
	l.conns[c.slot].slot = c.slot
	l.conns[last] = nil
	l.conns = l.conns[:last]
	if c.shedding {
		l.shedPending--
	}
	c.ln, c.entry, c.ip, c.slot, c.shedding = nil, nil, netip.Addr{}, 0, false
	l.signalWake()
}

// Shed implements §5.2 step 6 and the §5.6 effect of lowering max.connections:
// while the total exceeds max.connections it names connections to close, least
// recently active first, only from listeners that are not protected (a
// protected listener's excess is compensated by the others, as in KIP-402).
// The IDs are appended to dst. Named connections stay counted until Release;
// they are not named again, and they count against the excess, so calling
// Shed repeatedly before they are closed returns nothing new.
//
// Kafka's processors each close one LRU connection of their own per poll;
// this picks the globally least recently used ones at once, which converges
// to the same count.
func (l *Limiter) Shed(dst []uint64) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	need := l.total - l.maxConns - l.shedPending
	if need <= 0 {
		return dst
	}
	cand := l.scratch[:0]
	for _, c := range l.conns {
		if !c.shedding && !l.protected(c.ln) {
			cand = append(cand, c)
		}
	}
	sortConns(cand)
	if need > len(cand) {
		need = len(cand)
	}
	for _, c := range cand[:need] {
		c.shedding = true
		l.shedPending++
		dst = append(dst, c.ID)
	}
	clear(cand)
	l.scratch = cand[:0]
	return dst
}
