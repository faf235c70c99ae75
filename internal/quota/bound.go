package quota

import (
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/rate"
)

// State keyed by strings a client chooses (its client-id, and with some
// authentication its user name) is bounded two ways, per key:
//
//   - idle expiry, as Kafka's sensors: a bucket or a cached route unused for
//     Expiry is dropped by a sweep that runs at most every 30 s, from
//     whichever call comes first once it is due;
//   - a count cap: at most MaxBuckets buckets and MaxRoutes routes. Adding
//     one more at the cap first evicts one, so the cap is never exceeded.
//
// Eviction is CLOCK (second chance), an approximation of least recently
// used that costs O(1) amortized per eviction instead of a pass over all
// entries: the buckets (and the routes) of a key sit in a ring in the order
// they were added, a new one takes the slot of the one it evicts, and a
// hand goes round; an entry used since the hand last passed it gets a
// second chance, the first one not used is evicted.
//
// A route is only a cache of the precedence resolution: evicting one costs
// the next request of that (user, client-id) a slow-path lookup and nothing
// else. A bucket is accounting state: an evicted bucket that comes back
// starts afresh, with Kafka's start-up burst. So the hand passes over
// throttled buckets (a throttle pending, a token deficit, a sampled rate over
// the quota, or requests in flight): one of them is evicted only when two
// turns of the hand found nothing else, and then the one whose throttle ends
// first, which forgives its client the rest of its throttle. MaxBuckets must
// be large enough that this does not happen; it is counted apart
// (EvictedThrottledBuckets), and it costs a pass over the buckets.

// Defaults of the caps.
const (
	DefaultMaxBuckets = 100_000
	DefaultMaxRoutes  = 200_000
)

// evictions counts what the caps and the sweep dropped from one manager.
// Guarded by Engine.mu.
type evictions struct {
	buckets, throttledBuckets, routes uint64
	expiredBuckets, expiredRoutes     uint64
}

// clock is the eviction ring of one manager. Guarded by Engine.mu.
type clock struct {
	ring   []*bucket // the buckets, in insertion order; b.slot is the index
	hand   int
	rring  []routeSlot // the routes of the authoritative route set (dirty, else view)
	rhand  int
	rholes []int // rring slots emptied out of the hand's way, reused first
}

// routeSlot is a route in the ring. What only eviction needs lives here,
// not in the route, which the hot path reads and should stay small.
type routeSlot struct {
	r    *route // nil: a hole
	id   ident  // its key in the route maps
	seen int64  // r.lastUse when the hand last passed
}

// KeyStats is the size of one key's state and what bounding it cost.
type KeyStats struct {
	Key model.Key
	// Buckets and Routes are held in memory now: buckets live or idle
	// until the next sweep, cached (user, client-id) resolutions.
	Buckets, Routes int
	// EvictedBuckets and EvictedRoutes were dropped by MaxBuckets and
	// MaxRoutes (a bucket's routes go with it); EvictedThrottledBuckets
	// (also in EvictedBuckets) were throttled or had requests in flight
	// when evicted, which lets their client off the rest of its throttle:
	// a sign MaxBuckets is too low.
	EvictedBuckets, EvictedThrottledBuckets, EvictedRoutes uint64
	// ExpiredBuckets and ExpiredRoutes were dropped after Expiry idle.
	ExpiredBuckets, ExpiredRoutes uint64
}

// Stats returns the size and the eviction and expiry counts of every key,
// in Keys() order; a byte rate's figures include its per-topic buckets and
// routes (bounded by the same caps, separately).
func (e *Engine) Stats() []KeyStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]KeyStats, model.NumKeys)
	for i := range e.mgr {
		m := &e.mgr[i]
		s := &out[m.key]
		s.Key = m.key
		s.Buckets += len(m.buckets)
		s.Routes += len(m.routes())
		s.EvictedBuckets += m.ev.buckets
		s.EvictedThrottledBuckets += m.ev.throttledBuckets
		s.EvictedRoutes += m.ev.routes
		s.ExpiredBuckets += m.ev.expiredBuckets
		s.ExpiredRoutes += m.ev.expiredRoutes
	}
	return out
}

// routes is the authoritative route set: the dirty map when there is one
// (it is then the view's superset but for evicted routes), else the view's.
// Engine.mu must be held.
func (m *manager) routes() map[ident]*route {
	if m.dirty != nil {
		return m.dirty
	}
	return m.view.Load().routes
}

// ensureDirty starts a dirty map from the view. Engine.mu must be held.
func (m *manager) ensureDirty() {
	if m.dirty != nil {
		return
	}
	v := m.view.Load()
	m.dirty = make(map[ident]*route, len(v.routes)+1)
	for k, r := range v.routes {
		m.dirty[k] = r
	}
}

// throttleLeft is how long the bucket would still throttle at nowMs: its
// shared deadline, its token deficit, or its sampled rate over the quota.
// b.mu must be held.
func (b *bucket) throttleLeft(nowMs int64) int64 {
	t := max(b.until-nowMs, 0)
	if b.level == model.LevelNone {
		return t
	}
	if b.useTokens || b.key.Counted() {
		if tok := b.tokens.Peek(nowMs); tok < 0 {
			t = max(t, rate.TokenThrottleTime(tok, b.tokens.Quota()))
		}
		return t
	}
	r, w := b.rate.Peek(nowMs)
	return max(t, int64(rate.ThrottleMs(r, b.quota, w, 0)))
}

// protected reports whether evicting b would forgive a throttle or lose
// requests in flight. A shadow bucket imposes no throttle to forgive: it
// is evicted like an idle one (its client loses only its shadow history).
// b.mu must be held.
func (b *bucket) protected(nowMs int64) bool {
	return b.inflight > 0 || (!b.shadow && b.throttleLeft(nowMs) > 0)
}

// addBucket puts a new bucket in m, evicting one first at MaxBuckets.
// m.dirty must not be nil (a bucket's routes leave it with the bucket).
// Engine.mu must be held.
func (e *Engine) addBucket(m *manager, b *bucket, nowMs int64) {
	b.seen = b.lastActive
	if len(m.buckets) >= e.cfg.MaxBuckets {
		slot := e.evictBucket(m, nowMs)
		m.clk.ring[slot], b.slot = b, int32(slot)
	} else {
		b.slot = int32(len(m.clk.ring))
		m.clk.ring = append(m.clk.ring, b)
	}
	m.buckets[b.tags()] = b
}

// evictBucket evicts one bucket of m and returns its ring slot. Engine.mu
// must be held.
func (e *Engine) evictBucket(m *manager, nowMs int64) int {
	ring := m.clk.ring
	for range 2 * len(ring) {
		slot := m.clk.hand
		m.clk.hand = (slot + 1) % len(ring)
		b := ring[slot]
		b.mu.Lock()
		switch {
		case nowMs-b.lastActive >= e.expiryMs:
			m.ev.expiredBuckets++
		case b.lastActive != b.seen:
			b.seen = b.lastActive // used since the hand last passed
			b.mu.Unlock()
			continue
		case b.protected(nowMs):
			b.mu.Unlock()
			continue
		default:
			m.ev.buckets++
		}
		e.dropBucket(m, b)
		b.mu.Unlock()
		return slot
	}
	// Every bucket is throttled (or in use at each pass): the one whose
	// throttle ends first.
	var victim *bucket
	var least int64
	for _, b := range ring {
		b.mu.Lock()
		if left := b.throttleLeft(nowMs); victim == nil || left < least {
			victim, least = b, left
		}
		b.mu.Unlock()
	}
	victim.mu.Lock()
	e.dropBucket(m, victim)
	victim.mu.Unlock()
	m.ev.buckets++
	m.ev.throttledBuckets++
	return int(victim.slot)
}

// dropBucket removes b from m, with the route it was created with (if that
// route's slot still leads to it); other routes to it are dropped lazily
// (see slowBucket). Both Engine.mu and b.mu must be held; the caller reuses
// b's ring slot.
func (e *Engine) dropBucket(m *manager, b *bucket) {
	b.dead = true
	delete(m.buckets, b.tags())
	if i := int(b.rslot); m.dirty != nil && i >= 0 && i < len(m.clk.rring) {
		if rs := m.clk.rring[i]; rs.r != nil && rs.r.b == b && m.dirty[rs.id] == rs.r {
			m.removeRoute(rs.r)
			m.ev.routes++
		}
	}
	b.rslot = -1
}

// addRoute puts r in the dirty map under id, replacing a stale route and
// evicting one first at MaxRoutes, and returns its ring slot. Engine.mu
// must be held and m.dirty must not be nil.
func (e *Engine) addRoute(m *manager, id ident, r *route) int {
	if old := m.dirty[id]; old != nil {
		m.removeRoute(old)
	}
	c := &m.clk
	rs := routeSlot{r: r, id: id, seen: r.lastUse.Load()}
	switch {
	case len(m.dirty) >= e.cfg.MaxRoutes:
		r.slot = e.evictRoute(m)
		c.rring[r.slot] = rs
	case len(c.rholes) > 0:
		r.slot = c.rholes[len(c.rholes)-1]
		c.rholes = c.rholes[:len(c.rholes)-1]
		c.rring[r.slot] = rs
	default:
		r.slot = len(c.rring)
		c.rring = append(c.rring, rs)
	}
	m.dirty[id] = r
	return r.slot
}

// evictRoute evicts one route of the dirty map and returns its ring slot:
// one to a dead bucket at once, else the first not used since the hand last
// passed (after two turns, whichever is under the hand). Engine.mu must be
// held.
func (e *Engine) evictRoute(m *manager) int {
	c := &m.clk
	for turn := 0; ; turn++ {
		if turn > 3*len(c.rring) {
			// The ring holds every route of the dirty map, which is full.
			panic("quota: route ring out of step with the route map")
		}
		slot := c.rhand
		c.rhand = (slot + 1) % len(c.rring)
		rs := &c.rring[slot]
		if rs.r == nil {
			continue
		}
		if use := rs.r.lastUse.Load(); use != rs.seen && !rs.r.b.dead && turn < 2*len(c.rring) {
			rs.seen = use
			continue
		}
		delete(m.dirty, rs.id)
		*rs = routeSlot{}
		m.ev.routes++
		// The slot is reused by the caller, not left as a hole.
		return slot
	}
}

// removeRoute takes r out of the dirty map and its ring, leaving a hole.
// Engine.mu must be held.
func (m *manager) removeRoute(r *route) {
	if c := &m.clk; r.slot < len(c.rring) && c.rring[r.slot].r == r {
		delete(m.dirty, c.rring[r.slot].id)
		c.rring[r.slot] = routeSlot{}
		c.rholes = append(c.rholes, r.slot)
	}
}

// rebuildRoutes publishes routes as the view (the dirty map is dropped) and
// rebuilds the route ring: the routes of order first, in that order, then
// any others. Engine.mu must be held.
func (m *manager) rebuildRoutes(enabled bool, tt *model.TopicTable, routes map[ident]*route, order []routeSlot) {
	ring := make([]routeSlot, 0, len(routes))
	for _, rs := range order {
		if rs.r != nil && routes[rs.id] == rs.r {
			rs.r.slot = len(ring)
			ring = append(ring, rs)
		}
	}
	if len(ring) < len(routes) {
		for id, r := range routes {
			if r.slot >= len(ring) || ring[r.slot].r != r {
				r.slot = len(ring)
				ring = append(ring, routeSlot{r: r, id: id, seen: r.lastUse.Load()})
			}
		}
	}
	// The slots moved: a bucket now knows the slot of one of its routes.
	for _, b := range m.clk.ring {
		b.rslot = -1
	}
	for i, rs := range ring {
		rs.r.b.rslot = int32(i)
	}
	m.clk.rring, m.clk.rhand, m.clk.rholes = ring, 0, nil
	m.view.Store(&view{enabled: enabled, tt: tt, routes: routes})
	m.dirty, m.misses = nil, 0
}

// Expire drops every bucket idle (no record) for Expiry or longer at now,
// and every cached resolution idle as long, and returns how many buckets it
// dropped. A dropped bucket's history is lost: the client starts afresh, as
// when Kafka expires a sensor. The engine also does this by itself at most
// every 30 s, from the first call after the sweep is due.
func (e *Engine) Expire(now time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.expireLocked(now.UnixMilli())
}

// maybeSweep runs the expiry sweep when it is due, unless another call holds
// the engine lock: the hot path never waits for it.
func (e *Engine) maybeSweep(nowMs int64) {
	if next := e.nextSweepMs.Load(); next == 0 || nowMs < next {
		return
	}
	if !e.mu.TryLock() {
		return
	}
	if next := e.nextSweepMs.Load(); next != 0 && nowMs >= next {
		e.expireLocked(nowMs)
	}
	e.mu.Unlock()
}

// sweepLocked starts the sweep clock at the first slow path and sweeps when
// due. Engine.mu must be held.
func (e *Engine) sweepLocked(nowMs int64) {
	if next := e.nextSweepMs.Load(); next == 0 {
		e.nextSweepMs.Store(nowMs + sweepEveryMs)
	} else if nowMs >= next {
		e.expireLocked(nowMs)
	}
}

func (e *Engine) expireLocked(nowMs int64) int {
	e.nextSweepMs.Store(nowMs + sweepEveryMs)
	dropped := 0
	for k := range e.mgr {
		m := &e.mgr[k]
		ring := m.clk.ring[:0]
		hand := 0
		for i, b := range m.clk.ring {
			if i == m.clk.hand {
				hand = len(ring)
			}
			b.mu.Lock()
			if nowMs-b.lastActive >= e.expiryMs {
				b.dead = true
				delete(m.buckets, b.tags())
				dropped++
				m.ev.expiredBuckets++
			} else {
				b.slot = int32(len(ring))
				ring = append(ring, b)
			}
			b.mu.Unlock()
		}
		clear(m.clk.ring[len(ring):])
		m.clk.ring = ring
		m.clk.hand = 0
		if hand < len(ring) {
			m.clk.hand = hand
		}
		// Routes to buckets evicted or expired go, and idle ones.
		src := m.routes()
		var orphaned, idle int
		for _, r := range src {
			switch {
			case r.b.dead:
				orphaned++
			case nowMs-r.lastUse.Load() >= e.expiryMs:
				idle++
			}
		}
		if orphaned+idle == 0 {
			continue
		}
		routes := make(map[ident]*route, len(src)-orphaned-idle)
		for id, r := range src {
			if !r.b.dead && nowMs-r.lastUse.Load() < e.expiryMs {
				routes[id] = r
			}
		}
		m.ev.routes += uint64(orphaned)
		m.ev.expiredRoutes += uint64(idle)
		v := m.view.Load()
		m.rebuildRoutes(v.enabled, v.tt, routes, m.clk.rring)
	}
	return dropped
}

// smallest keeps the n smallest values offered, by less, in a max-heap: a
// selection in O(offers · log n) time and O(n) memory.
type smallest[T any] struct {
	n     int
	less  func(a, b T) bool
	items []T
}

func newSmallest[T any](n int, less func(a, b T) bool) *smallest[T] {
	return &smallest[T]{n: n, less: less, items: make([]T, 0, max(n, 0))}
}

func (s *smallest[T]) offer(x T) {
	if s.n <= 0 {
		return
	}
	h := s.items
	if len(h) < s.n {
		h = append(h, x)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !s.less(h[p], h[i]) {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		s.items = h
		return
	}
	if !s.less(x, h[0]) {
		return
	}
	h[0] = x
	for i := 0; ; {
		l, r, big := 2*i+1, 2*i+2, i
		if l < len(h) && s.less(h[big], h[l]) {
			big = l
		}
		if r < len(h) && s.less(h[big], h[r]) {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}
