package quota

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/rate"
)

// How a tenant's ceiling C is held and shared, per key (docs/quotas.md):
//
//   - The ceiling is a token bucket T: refilled at C up to the tenant's
//     burst (Kafka's Q·(N−1)·W unless the tenant sets burst_seconds),
//     drained by every record of every principal of the tenant, whatever
//     byte-rate algorithm the client buckets use.
//   - Each principal ("member") has a share bucket S inside the tenant,
//     refilled at the fair share f = C ÷ active principals (active: a
//     record in the last (N−1)·W), starting empty, with a burst of a fifth
//     of a window W: room for the gaps of a client running at f (its round
//     trips), not a burst of its own.
//   - A record made while T has tokens borrows idle capacity: it is
//     charged to T only, and the tenant does not throttle it (the
//     principal's own quota still does). A record made while T is in
//     deficit — the tenant is over its ceiling — is charged to S as well
//     and throttled by S's deficit: a principal that stays within f is
//     never throttled by the tenant, one above f is held to f.
//   - So, while the ceiling binds, each active principal gets
//     min(own quota, f) at least and f at most from its share, the
//     shares add up to C, and T stays put; when some principals use
//     less, T refills and the others borrow what they leave. T's deficit
//     is bounded by the shares' bursts; beyond that slack T throttles
//     every principal itself (the ceiling as a hard bound, e.g. for usage
//     a cut-off instance of a Tollgate cluster cannot see).

// tenantTable is one configuration of tenants; it never changes once
// published.
type tenantTable struct {
	set    *TenantSet
	byName map[string]*tenantState
}

// tenantsState is the engine's part of the tenants.
type tenantsState struct {
	// gen counts SetTenants calls; 0: never set, nothing to do.
	gen   atomic.Uint64
	table atomic.Pointer[tenantTable]
	mu    sync.Mutex              // guards cache
	cache map[string]*tenantState // principal → its tenant (nil: none)
}

// maxTenantCache bounds the principal → tenant cache; it is cleared when
// full (a resolution costs a few map lookups and the tenants' rules).
const maxTenantCache = 1 << 16

// tenantState is one tenant's accounting.
type tenantState struct {
	e    *Engine
	name string
	// ceil are the ceilings' buckets, one per tenant key (quota
	// Unlimited where the tenant has none), nil for other keys.
	ceil [model.NumKeys]*bucket
	// shareBurst is a share's burst in seconds (shareBurstOf).
	shareBurst float64
	windowMs   int64 // the activity window, (N−1)·W

	active    atomic.Int32 // principals with a record in the window
	nextCount atomic.Int64 // when active is recounted (ms)

	mu         sync.Mutex // guards members and nextExpire
	members    map[string]*member
	nextExpire int64
	limited    [model.NumKeys]bool // keys with a ceiling, as members' shares were made
}

// member is one principal's part of a tenant.
type member struct {
	user   string
	share  [model.NumKeys]*bucket // nil for keys without a ceiling
	lastMs atomic.Int64           // last record, ms
	dead   atomic.Bool            // dropped from the tenant: resolve again
}

// tenantRef is a Client's cached tenant, good while gen is unchanged and
// the member lives.
type tenantRef struct {
	gen uint64
	ts  *tenantState
	m   *member
}

// SetTenants replaces the tenants, live. A tenant that stays (by name)
// keeps its buckets: a changed ceiling takes effect on its history, as a
// changed quota does; switching it between shadow and enforced starts its
// accounting afresh, as for a client bucket. A nil or empty set removes
// every tenant.
func (e *Engine) SetTenants(s *TenantSet, now time.Time) {
	nowMs := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.tn.table.Load()
	nt := &tenantTable{set: s, byName: make(map[string]*tenantState, s.Len())}
	for _, t := range s.Tenants() {
		var ts *tenantState
		if old != nil {
			ts = old.byName[t.Name]
		}
		if ts == nil {
			ts = e.newTenantState(t, nowMs)
		} else {
			e.updateTenantState(ts, t)
		}
		nt.byName[t.Name] = ts
	}
	if old != nil {
		for name, ts := range old.byName {
			if _, ok := nt.byName[name]; !ok {
				ts.drop()
			}
		}
	}
	e.tn.table.Store(nt)
	e.tn.mu.Lock()
	e.tn.cache = nil
	e.tn.mu.Unlock()
	// After the table: a Client that sees the new gen resolves against it.
	e.tn.gen.Add(1)
}

// Tenants returns the tenants in force (nil: none).
func (e *Engine) Tenants() *TenantSet {
	if t := e.tn.table.Load(); t != nil {
		return t.set
	}
	return nil
}

// TenantOf returns the tenant principal belongs to.
func (e *Engine) TenantOf(principal string) (string, bool) {
	return e.Tenants().Of(principal)
}

func (e *Engine) newTenantState(t Tenant, nowMs int64) *tenantState {
	ts := &tenantState{e: e, name: t.Name, members: map[string]*member{},
		windowMs: int64(e.cfg.WindowNum-1) * e.windowMs}
	for _, k := range TenantKeys {
		q, ok := t.Ceilings[k]
		if !ok {
			q = model.Unlimited
		}
		b := &bucket{key: k, quota: q, created: nowMs, lastActive: nowMs, rslot: -1,
			shadow: t.Options.Shadow, hasBurst: t.Options.HasBurst, burst: t.Options.Burst}
		b.share.exUser = t.Name
		e.initTenantAccounting(b, e.burstSeconds(b))
		ts.ceil[k] = b
		ts.limited[k] = ok
	}
	ts.shareBurst = ts.shareBurstOf(t.Options)
	return ts
}

// shareBurstOf is a share's burst: a fifth of a window W. A share starts
// empty and is charged only while the ceiling binds, so this is no burst
// a client can see: it is the gaps (round trips, pauses between batches)
// of a client running at its fair share, which a share without any would
// lose. It bounds how far below zero the shares together take the
// ceiling's bucket (slack).
func (ts *tenantState) shareBurstOf(model.Options) float64 {
	return float64(ts.e.windowMs) / 5000
}

// initTenantAccounting gives a tenant bucket (a ceiling or a share) a
// fresh token bucket of burstSec seconds, whatever the client buckets'
// algorithm, and the sampled rate its key's metrics use.
func (e *Engine) initTenantAccounting(b *bucket, burstSec float64) {
	if b.key.Counted() {
		b.rate = rate.NewSampled(e.cfg.ControllerWindowNum, e.ctlWindowMs)
	} else {
		b.rate = rate.NewSampled(e.cfg.WindowNum, e.windowMs)
	}
	b.tokens = rate.NewTokenBucket(b.quota, 1, 1000)
	b.tokens.SetBurst(burstSec)
	b.useTokens = true
}

// updateTenantState applies a changed definition to a tenant that stays.
// Engine.mu is held.
func (e *Engine) updateTenantState(ts *tenantState, t Tenant) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	keysChanged := false
	for _, k := range TenantKeys {
		q, ok := t.Ceilings[k]
		if !ok {
			q = model.Unlimited
		}
		if ok != ts.limited[k] {
			keysChanged = true
			ts.limited[k] = ok
		}
		b := ts.ceil[k]
		b.mu.Lock()
		o := t.Options
		reset := b.shadow != o.Shadow || (b.quota >= model.Unlimited) != (q >= model.Unlimited)
		burst := b.hasBurst != o.HasBurst || b.burst != o.Burst
		if b.quota != q {
			b.until = 0
		}
		b.quota = q
		b.shadow, b.hasBurst, b.burst = o.Shadow, o.HasBurst, o.Burst
		switch {
		case reset:
			e.initTenantAccounting(b, e.burstSeconds(b))
			b.until = 0
		default:
			b.tokens.SetQuota(q)
			if burst {
				b.tokens.SetBurst(e.burstSeconds(b))
			}
		}
		b.mu.Unlock()
	}
	sb := ts.shareBurstOf(t.Options)
	ts.shareBurst = sb
	if keysChanged {
		// Members' shares were made for other keys: start them again
		// (a share is short-lived state; its principal loses at most
		// one window of its fair share's history).
		for u, m := range ts.members {
			m.dead.Store(true)
			delete(ts.members, u)
		}
		ts.active.Store(0)
		return
	}
	for _, m := range ts.members {
		for _, k := range TenantKeys {
			s := m.share[k]
			if s == nil {
				continue
			}
			s.mu.Lock()
			if s.shadow != t.Options.Shadow {
				s.shadow = t.Options.Shadow
				e.initTenantAccounting(s, sb)
				s.until = 0
			} else {
				s.tokens.SetBurst(sb)
			}
			s.mu.Unlock()
		}
	}
}

// drop marks a removed tenant's buckets dead (a Tollgate cluster's
// exchange then forgets them). Engine.mu is held.
func (ts *tenantState) drop() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, b := range ts.ceil {
		if b != nil {
			b.mu.Lock()
			b.dead = true
			b.mu.Unlock()
		}
	}
	for u, m := range ts.members {
		m.dead.Store(true)
		for _, s := range m.share {
			if s != nil {
				s.mu.Lock()
				s.dead = true
				s.mu.Unlock()
			}
		}
		delete(ts.members, u)
	}
}

// tenantFor resolves user's tenant and member (creating the member).
func (e *Engine) tenantFor(user string, nowMs int64) (*tenantState, *member) {
	tb := e.tn.table.Load()
	if tb == nil || tb.set.Len() == 0 {
		return nil, nil
	}
	e.tn.mu.Lock()
	ts, ok := e.tn.cache[user]
	if !ok {
		if name, found := tb.set.Of(user); found {
			ts = tb.byName[name]
		}
		if e.tn.cache == nil || len(e.tn.cache) >= maxTenantCache {
			e.tn.cache = make(map[string]*tenantState)
		}
		e.tn.cache[strings.Clone(user)] = ts
	}
	e.tn.mu.Unlock()
	if ts == nil {
		return nil, nil
	}
	return ts, ts.member(user, nowMs)
}

// member returns (creating it) user's member of the tenant. At the cap
// (quota.max_buckets members) one idle member is dropped first, or, if
// none of those looked at is, any one of them.
func (ts *tenantState) member(user string, nowMs int64) *member {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if m, ok := ts.members[user]; ok {
		return m
	}
	if len(ts.members) >= ts.e.cfg.MaxBuckets {
		var victim string
		looked := 0
		for u, m := range ts.members { // map order: a random start
			victim = u
			if nowMs-m.lastMs.Load() >= ts.windowMs || looked >= 64 {
				break
			}
			looked++
		}
		ts.members[victim].dead.Store(true)
		delete(ts.members, victim)
	}
	m := &member{user: strings.Clone(user)}
	for _, k := range TenantKeys {
		if !ts.limited[k] {
			continue
		}
		c := ts.ceil[k]
		c.mu.Lock()
		s := &bucket{key: k, quota: c.quota, shadow: c.shadow, created: nowMs, lastActive: nowMs, rslot: -1}
		c.mu.Unlock()
		s.share.exUser = m.user
		ts.e.initTenantAccounting(s, ts.shareBurst)
		s.tokens.Empty(nowMs) // a share is no burst
		m.share[k] = s
	}
	ts.members[m.user] = m
	return m
}

// activeNow counts m as active at nowMs (it records now) and returns the
// number of active principals, at least 1. The count is kept up to date
// by recounting at most once a second; a principal that was idle counts
// at once.
func (ts *tenantState) activeNow(m *member, nowMs int64) int32 {
	if m != nil {
		last := m.lastMs.Load()
		if last != nowMs && m.lastMs.CompareAndSwap(last, nowMs) && nowMs-last >= ts.windowMs {
			ts.active.Add(1)
		}
	}
	if nowMs >= ts.nextCount.Load() {
		ts.recount(nowMs)
	}
	return max(ts.active.Load(), 1)
}

// recount counts the active principals and drops those idle for the
// engine's expiry (at most every 30 s), unless another call holds the
// lock: the hot path never waits for it.
func (ts *tenantState) recount(nowMs int64) {
	if !ts.mu.TryLock() {
		return
	}
	defer ts.mu.Unlock()
	if nowMs < ts.nextCount.Load() {
		return
	}
	expire := nowMs >= ts.nextExpire
	var n int32
	for u, m := range ts.members {
		idle := nowMs - m.lastMs.Load()
		switch {
		case idle < ts.windowMs:
			n++
		case expire && idle >= ts.e.expiryMs:
			m.dead.Store(true)
			delete(ts.members, u)
		}
	}
	if expire {
		ts.nextExpire = nowMs + sweepEveryMs
	}
	ts.active.Store(n)
	ts.nextCount.Store(nowMs + 1000)
}

// slack is how far below zero the fair shares may take the ceiling's
// bucket before it throttles every principal itself: their bursts, and a
// window more for requests in flight.
func (ts *tenantState) slack(c float64) float64 {
	return c * (ts.shareBurst + float64(ts.e.windowMs)/1000)
}

// tenant returns the Client's tenant and member, resolving them again
// after SetTenants or when the member was dropped. It costs two atomic
// loads when nothing changed, one when tenants were never set.
func (c *Client) tenant(nowMs int64) (*tenantState, *member) {
	g := c.e.tn.gen.Load()
	if g == 0 {
		return nil, nil
	}
	r := &c.tn
	if r.gen == g && (r.m == nil || !r.m.dead.Load()) {
		return r.ts, r.m
	}
	ts, m := c.e.tenantFor(c.user, nowMs)
	*r = tenantRef{gen: g, ts: ts, m: m}
	return ts, m
}

// lockCeil returns the tenant's bucket for k locked when k has a live
// ceiling, nil otherwise.
func (ts *tenantState) lockCeil(k model.Key) *bucket {
	if ts == nil || !k.Valid() {
		return nil
	}
	b := ts.ceil[k]
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.dead || b.quota >= model.Unlimited {
		b.mu.Unlock()
		return nil
	}
	return b
}

// lockShare returns m's share bucket for k locked, nil without one.
func (m *member) lockShare(k model.Key) *bucket {
	if m == nil {
		return nil
	}
	s := m.share[k]
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return nil
	}
	return s
}

// tenantLayer is the layer of the Client's tenant: the ceiling's bucket T
// and the principal's share S in it.
type tenantLayer struct {
	c      *Client
	ts     *tenantState
	T, S   *bucket // locked between lock and unlock; S nil without a share
	active int32   // the tenant's active principals, as of a recording lock
}

// lock locks the ceiling's bucket of k, then the member's share: the
// one order of the tenant's locks. A recording call counts its principal
// active first, even when k has no ceiling.
func (l *tenantLayer) lock(k model.Key, nowMs int64, record bool) bool {
	ts, m := l.c.tenant(nowMs)
	if ts == nil {
		return false
	}
	if record {
		if !tenantKey(k) {
			return false
		}
		l.active = ts.activeNow(m, nowMs)
	}
	T := ts.lockCeil(k)
	if T == nil {
		return false
	}
	l.ts, l.T, l.S = ts, T, m.lockShare(k)
	return true
}

func (l *tenantLayer) unlock() {
	if l.S != nil {
		l.S.mu.Unlock()
	}
	l.T.mu.Unlock()
	l.ts, l.T, l.S = nil, nil, nil
}

// record charges the ceiling, and, while it binds, the share, whose quota
// is the fair share of the ceiling among the active principals (0 for a
// shadow tenant, which counts it).
func (l *tenantLayer) record(v float64, nowMs, capMs int64) int64 {
	ts, T, S := l.ts, l.T, l.S
	e := ts.e
	inCluster := e.clusterOn()
	unseen := 0.0
	var lease int64
	if inCluster {
		// As a client bucket's: what the other instances took unseen, and
		// this instance's lease of the headroom (so that no instance
		// borrows the whole of it before the others' reports arrive).
		unseen = e.unseen(T, nowMs)
		lease = e.noteLocal(T, v, nowMs)
		if capMs > 0 {
			lease = min(lease, capMs)
		}
	}
	before := T.tokens.Tokens(nowMs) - T.inflight - unseen
	T.tokens.Record(v, nowMs)
	T.rate.Record(v, nowMs)
	T.lastActive = nowMs
	after := T.tokens.Balance() - unseen
	C := T.quota
	binding := before < 0
	// The ceiling itself, beyond the slack the shares may run it into,
	// holds every principal of the tenant until the same deadline.
	t := max(tokenThrottleMs(after+ts.slack(C), C, capMs), lease)
	if e.cfg.SharedDeadline {
		t = T.shareDeadline(t, nowMs, capMs)
	}
	if S == nil {
		if binding {
			t = max(t, tokenThrottleMs(after, C, capMs)) // no share: the ceiling alone
		}
		return T.apply(t)
	}
	if f := C / float64(l.active); S.quota != f {
		S.quota = f
		S.tokens.SetQuota(f)
	}
	S.lastActive = nowMs
	if binding {
		su := 0.0
		if inCluster {
			su = e.unseen(S, nowMs)
			S.share.local += v
		}
		S.tokens.Record(v, nowMs)
		S.rate.Record(v, nowMs)
		t = max(t, tokenThrottleMs(S.tokens.Balance()-su, S.quota, capMs))
	}
	if e.cfg.SharedDeadline {
		t = S.shareDeadline(t, nowMs, capMs)
	}
	if !T.shadow {
		S.noteThrottle(t)
	}
	return T.apply(t)
}

// unrecord takes back v (a fetch answered empty).
func (l *tenantLayer) unrecord(v float64, nowMs int64) {
	T := l.T
	T.tokens.Record(-v, nowMs)
	T.rate.Record(-v, nowMs)
	T.until = 0
	if l.ts.e.clusterOn() {
		T.share.local -= v
	}
	if l.S != nil {
		l.S.until = 0
	}
}

// hold is the member's and the ceiling's deadlines (0 for a shadow
// tenant).
func (l *tenantLayer) hold(nowMs int64) int64 {
	if l.T.shadow {
		return 0
	}
	until := l.T.until
	if l.S != nil {
		until = max(until, l.S.until)
	}
	return max(until-nowMs, 0)
}

// join is the wait a Produce of size must make for the tenant counting
// the produce requests in flight, which it joins.
func (l *tenantLayer) join(size float64, nowMs, capMs int64) (int64, bool) {
	if l.T.shadow || !l.ts.e.cfg.SharedDeadline {
		return 0, false
	}
	hold, _ := l.wait(nowMs, capMs)
	hold = max(hold, l.ts.e.leaseHold(l.T, size, nowMs))
	l.addInflight(size)
	return hold, true
}

// wait is, for a request of the member's at nowMs, how long it must wait
// for the tenant and how much the tenant lets a fetch reserve (+Inf when
// the ceiling does not bind), counting what is in flight.
func (l *tenantLayer) wait(nowMs, capMs int64) (int64, float64) {
	ts, T, s := l.ts, l.T, l.S
	e := ts.e
	unseen := 0.0
	if e.clusterOn() {
		unseen = e.unseen(T, nowMs)
	}
	C := T.quota
	tok := T.tokens.Peek(nowMs) - T.inflight - unseen
	hold := max(T.until-nowMs, 0, tokenThrottleMs(tok+ts.slack(C), C, capMs))
	room := tok + ts.slack(C)
	if tok >= 0 {
		room = math.Inf(1) // idle capacity: borrow it
	}
	if s != nil {
		hold = max(hold, s.until-nowMs)
		if tok < 0 {
			su := 0.0
			if e.clusterOn() {
				su = e.unseen(s, nowMs)
			}
			st := s.tokens.Peek(nowMs) - s.inflight - su
			hold = max(hold, tokenThrottleMs(st, s.quota, capMs))
			room = min(room, st)
		}
	} else if tok < 0 {
		room = min(room, tok)
		hold = max(hold, tokenThrottleMs(tok, C, capMs))
	}
	return hold, room
}

// fetchMax is the most a consumer fetch may carry for the tenant: what
// its ceiling's bucket may hold, and, while the ceiling binds, what the
// member's share has room for; at least 1 byte (one batch).
// math.MaxInt32 when the tenant does not limit fetches.
func (l *tenantLayer) fetchMax(nowMs int64) float64 {
	T, e := l.T, l.ts.e
	if T.shadow {
		return math.MaxInt32
	}
	static := T.quota * max(e.burstSeconds(T), float64(e.windowMs)/1000)
	_, room := l.wait(nowMs, 0)
	v := min(static, max(min(room, e.leaseRoom(T, nowMs)), 1))
	if v >= math.MaxInt32 {
		return math.MaxInt32
	}
	return math.Floor(max(v, 1))
}

// room clamps a fetch to fetchMax and reserves it (not for a shadow
// tenant).
func (l *tenantLayer) room(requested float64, nowMs int64) (float64, bool) {
	if l.T.shadow {
		return requested, false
	}
	return min(requested, l.fetchMax(nowMs)), true
}

func (l *tenantLayer) addInflight(v float64) {
	l.T.inflight = max(l.T.inflight+v, 0)
	if l.S != nil {
		l.S.inflight = max(l.S.inflight+v, 0)
	}
}

// refuses reports, for a strict mutation request, whether the tenant
// refuses a mutation now, and the throttle: while the ceiling binds and
// the member has used its share, or beyond the slack. A shadow tenant
// refuses nothing (it counts the refusal).
func (l *tenantLayer) refuses(nowMs int64) (int64, bool) {
	ts, T, s := l.ts, l.T, l.S
	tok := T.tokens.Tokens(nowMs)
	if ts.e.clusterOn() {
		tok -= ts.e.unseen(T, nowMs)
	}
	t := tokenThrottleMs(tok+ts.slack(T.quota), T.quota, 0)
	if tok < 0 && s != nil {
		t = max(t, tokenThrottleMs(s.tokens.Tokens(nowMs), s.quota, 0))
	} else if tok < 0 {
		t = max(t, tokenThrottleMs(tok, T.quota, 0))
	}
	if t == 0 {
		return 0, false
	}
	if T.shadow {
		return 0, false // the record that follows counts what it would do
	}
	T.noteThrottle(t)
	return t, true
}

// drainTenants is DrainUsage for the tenants' buckets: each ceiling's and
// each share's local usage since the last drain. Engine.mu is held.
func (e *Engine) drainTenants(dst []Delta, dt float64) []Delta {
	tb := e.tn.table.Load()
	if tb == nil {
		return dst
	}
	for _, ts := range tb.byName {
		for _, k := range TenantKeys {
			b := ts.ceil[k]
			b.mu.Lock()
			if v, ok := b.drain(dt); ok {
				dst = append(dst, Delta{Key: k, Tenant: ts.name, Value: v, Total: b.share.total})
			}
			b.mu.Unlock()
		}
		ts.mu.Lock()
		for _, m := range ts.members {
			for _, k := range TenantKeys {
				s := m.share[k]
				if s == nil {
					continue
				}
				s.mu.Lock()
				if v, ok := s.drain(dt); ok {
					dst = append(dst, Delta{Key: k, Tenant: ts.name, User: m.user, Value: v, Total: s.share.total})
				}
				s.mu.Unlock()
			}
		}
		ts.mu.Unlock()
	}
	return dst
}

// applyTenantRemote records another instance's usage of a tenant's
// ceiling or of one principal's share in it. A tenant or key this
// instance has no ceiling for is skipped (its configuration differs, or
// is being changed).
func (e *Engine) applyTenantRemote(d Delta, nowMs int64) {
	tb := e.tn.table.Load()
	if tb == nil || !tenantKey(d.Key) || d.Client != "" {
		return
	}
	ts := tb.byName[d.Tenant]
	if ts == nil {
		return
	}
	var b *bucket
	if d.User == "" {
		b = ts.lockCeil(d.Key)
	} else {
		m := ts.member(d.User, nowMs)
		ts.activeNow(m, nowMs) // active anywhere counts everywhere
		if b = m.share[d.Key]; b != nil {
			b.mu.Lock()
			if b.dead {
				b.mu.Unlock()
				b = nil
			}
		}
	}
	if b == nil {
		return
	}
	e.recordRemote(b, d.Value, nowMs)
}

// TenantsLimit reports whether some tenant has a ceiling for k (the quota
// filter skips decoding mutations when nothing limits them).
func (e *Engine) TenantsLimit(k model.Key) bool {
	for _, t := range e.Tenants().Tenants() {
		if _, ok := t.Ceilings[k]; ok {
			return true
		}
	}
	return false
}
