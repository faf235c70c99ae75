package quota

import (
	"cmp"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/rate"
)

// Defaults of EngineConfig, Kafka's except MaxThrottle.
const (
	DefaultWindowNum   = 11          // quota.window.num: 10 whole windows + the current one
	DefaultWindowSize  = time.Second // quota.window.size.seconds
	DefaultMaxThrottle = 30 * time.Second
	DefaultExpiry      = time.Hour // Kafka's quota sensor expiry, 3600 s
)

// maxCap bounds MaxBuckets and MaxRoutes (ring slots are int32).
const maxCap = 1 << 30

// sweepEveryMs is how often the engine expires idle buckets and routes by
// itself, like Kafka's 30-second ExpireSensorTask, so that cardinality stays
// bounded even if the caller never calls Expire.
const sweepEveryMs = 30_000

// EngineConfig configures an Engine. Zero fields take the defaults.
type EngineConfig struct {
	// WindowNum is N for the byte-rate and request quotas (quota.window.num).
	WindowNum int
	// WindowSize is W, a whole number of milliseconds
	// (quota.window.size.seconds). It also caps request-quota throttles.
	WindowSize time.Duration
	// MaxThrottle caps byte-rate throttles (quota.max.throttle.ms). Kafka
	// has no such cap and can mute for minutes; Tollgate caps on purpose so
	// that a client is never muted longer than its request timeout. A
	// negative value disables the cap, which is Kafka's behaviour.
	MaxThrottle time.Duration
	// ControllerWindowNum and ControllerWindowSize are N and W of the
	// controller-mutation token bucket (controller.quota.window.*).
	ControllerWindowNum  int
	ControllerWindowSize time.Duration
	// Expiry drops a bucket after this long without a record, so that
	// bucket cardinality stays bounded. Its state is then lost, as in Kafka.
	// A cached route unused as long is dropped too.
	Expiry time.Duration
	// MaxBuckets bounds the buckets of each key (quota.max_buckets) and
	// MaxRoutes its cached (user, client-id) resolutions
	// (quota.max_routes): a client choosing a new client-id per request
	// cannot grow either. At the cap, the least valuable entries are
	// evicted first (see bound.go); zero takes DefaultMaxBuckets and
	// DefaultMaxRoutes.
	MaxBuckets, MaxRoutes int
	// SharedDeadline holds every record into a throttled bucket until the
	// bucket's throttle deadline, not just for its own formula. A gateway
	// sees one bucket through several connections (one per broker at
	// least): without it, the connections not yet throttled keep sending
	// while the first one waits and the cluster-wide rate settles above
	// the quota. Off, the engine is Kafka's arithmetic exactly (a broker
	// sees a client's traffic to it on one connection).
	SharedDeadline bool
	// ByteRate chooses how producer_byte_rate and consumer_byte_rate are
	// measured; the zero value is Kafka's sampled rate.
	ByteRate ByteRateAlgorithm
}

// ByteRateAlgorithm is how the byte-rate quotas measure a client.
type ByteRateAlgorithm int

const (
	// ByteRateSampled is Kafka's arithmetic exactly: the sampled rate over
	// N windows of W and the throttle (O−Q)/Q × window. A client at full
	// speed gets Q·(N−1)·W in one burst, then little until that burst's
	// sample leaves the window about N·W later, then the next burst:
	// right on average, in ~11-second bursts.
	ByteRateSampled ByteRateAlgorithm = iota
	// ByteRateTokenBucket measures bytes with the token bucket Kafka
	// itself uses for controller_mutation_rate (KIP-599): refilled at Q a
	// second up to a burst of Q·(N−1)·W (the burst a fresh Kafka client
	// gets), drained by each record, throttled for −tokens/Q. The start-up
	// burst is Kafka's; after it a client at full speed is held to a
	// steady Q instead of a burst per window.
	ByteRateTokenBucket
)

// String returns the configuration name: "sampled" or "token_bucket".
func (a ByteRateAlgorithm) String() string {
	if a == ByteRateTokenBucket {
		return "token_bucket"
	}
	return "sampled"
}

// ParseByteRateAlgorithm reads "sampled" or "token_bucket".
func ParseByteRateAlgorithm(s string) (ByteRateAlgorithm, error) {
	switch s {
	case "sampled":
		return ByteRateSampled, nil
	case "token_bucket":
		return ByteRateTokenBucket, nil
	}
	return 0, fmt.Errorf("quota: byte-rate algorithm %q is neither sampled nor token_bucket", s)
}

func (c EngineConfig) normalize() (EngineConfig, error) {
	// Zero takes the default.
	c.WindowNum = cmp.Or(c.WindowNum, DefaultWindowNum)
	c.ControllerWindowNum = cmp.Or(c.ControllerWindowNum, DefaultWindowNum)
	c.WindowSize = cmp.Or(c.WindowSize, DefaultWindowSize)
	c.ControllerWindowSize = cmp.Or(c.ControllerWindowSize, DefaultWindowSize)
	c.MaxThrottle = cmp.Or(c.MaxThrottle, DefaultMaxThrottle)
	c.Expiry = cmp.Or(c.Expiry, DefaultExpiry)
	c.MaxBuckets = cmp.Or(c.MaxBuckets, DefaultMaxBuckets)
	c.MaxRoutes = cmp.Or(c.MaxRoutes, DefaultMaxRoutes)
	switch {
	case c.WindowNum < 1 || c.ControllerWindowNum < 1:
		return c, fmt.Errorf("quota: window numbers must be ≥ 1")
	case c.WindowSize < time.Millisecond || c.WindowSize%time.Millisecond != 0,
		c.ControllerWindowSize < time.Millisecond || c.ControllerWindowSize%time.Millisecond != 0:
		return c, fmt.Errorf("quota: window sizes must be a positive whole number of milliseconds")
	case c.ByteRate != ByteRateSampled && c.ByteRate != ByteRateTokenBucket:
		return c, fmt.Errorf("quota: unknown byte-rate algorithm %d", c.ByteRate)
	case c.Expiry < 0:
		return c, fmt.Errorf("quota: expiry must not be negative")
	case c.MaxBuckets < 0 || c.MaxRoutes < 0 || c.MaxBuckets > maxCap || c.MaxRoutes > maxCap:
		return c, fmt.Errorf("quota: max buckets and max routes must be from 1 to %d (0 takes the default)", maxCap)
	}
	return c, nil
}

// Engine enforces client quotas the way a Kafka broker does, for one
// gateway. It keeps one bucket per (key, user tag, client tag), the unit
// Kafka keeps one sensor for, and is safe for concurrent use.
//
// The hot path (RecordProduce, RecordFetch) is one lock-free map lookup and
// one bucket mutex: the (user, client-id) → bucket resolution is cached in a
// read-only map published through an atomic pointer and rebuilt, sync.Map
// style, from a locked dirty copy after enough misses. SetQuotas re-resolves
// that cache; buckets survive it, so a value change keeps their history.
// A Client handle skips even the map lookup.
type Engine struct {
	cfg           EngineConfig
	windowMs      int64
	ctlWindowMs   int64
	maxThrottleMs int64 // 0: no cap
	expiryMs      int64

	// mgr holds one manager per key for the client quotas, then one per
	// key for the per-topic quotas (mgr[numKeys+k]; only the byte rates
	// ever have entities there).
	mgr [2 * model.NumKeys]manager

	mu     sync.Mutex   // serializes everything but the hot path
	quotas model.Quotas // guarded by mu
	// nextSweepMs is when the expiry sweep is due; 0 until the first slow
	// path. Written under mu, read without it by the hot path.
	nextSweepMs atomic.Int64

	cl clusterState // the exchange with other instances (cluster.go)
	tn tenantsState // tenants over the buckets (tenantstate.go)
}

// manager is one Kafka quota manager: one key's buckets and route cache.
type manager struct {
	key   model.Key
	topic bool // the per-topic quotas of key
	view  atomic.Pointer[view]
	// gen counts the quota sets. A Client's cached bucket is good while
	// gen is unchanged: only SetQuotas can move a client to another bucket
	// (expiry is detected on the bucket itself).
	gen atomic.Uint64

	// Guarded by Engine.mu.
	dirty   map[ident]*route // superset of view.routes while not nil
	misses  int
	buckets map[model.Tags]*bucket
	clk     clock
	ev      evictions
}

// ident is a (user, client-id) pair, the key of a route; with a topic, for
// the per-topic managers.
type ident struct{ user, client, topic string }

// view is what the hot path reads; it is never modified once published.
type view struct {
	enabled bool              // some entity has this key (Kafka's E ≠ 0)
	tt      *model.TopicTable // a per-topic manager's entities (never modified)
	routes  map[ident]*route
}

// route caches the bucket of one (user, client-id).
type route struct {
	b       *bucket
	lastUse atomic.Int64 // ms, updated at most once a second to avoid cache-line traffic
	slot    int          // index in the route ring; guarded by Engine.mu
}

func (r *route) touch(nowMs int64) {
	if nowMs-r.lastUse.Load() >= 1000 {
		r.lastUse.Store(nowMs)
	}
}

// cacheLinePad keeps a bucket's hot fields off cache lines shared with
// neighbouring allocations: two cores recording into two adjacent buckets
// would otherwise slow each other down (false sharing).
type cacheLinePad [64]byte

// bucket is the accounting state of one metric-tag pair: Kafka's quota
// sensor.
type bucket struct {
	_            cacheLinePad
	mu           sync.Mutex
	key          model.Key
	user, client string // tags; user is raw, Kafka's tag is Sanitize(user)
	prefix       bool   // a client-id prefix group: client is the prefix
	topic        string // a per-topic bucket's topic (or topic prefix)
	topicPrefix  bool   // topic is a prefix shared by its topics
	shadow       bool   // measured, never enforced (Options.Shadow)
	hasBurst     bool   // Options.HasBurst: burst is the entity's
	burst        float64
	sh           shadowCounters
	level        model.Level
	entity       model.Entity
	quota        float64
	rate         rate.Sampled
	tokens       rate.TokenBucket // ControllerMutationRate; byte rates under ByteRateTokenBucket
	useTokens    bool             // a byte-rate bucket throttled by tokens, not by rate
	created      int64
	lastActive   int64 // last record, ms
	throttles    int64
	throttleMs   int64
	// until is when the bucket's current throttle ends (ms). A gateway
	// sees one bucket through many connections (one per broker at least);
	// every response of the bucket is throttled until the same deadline,
	// or the connections not yet throttled would keep sending while the
	// first one waits, and the cluster-wide rate would settle above Q.
	until int64
	// inflight is bytes of requests forwarded but not yet answered:
	// fetch reservations (ReserveFetch) or produce requests (HoldProduce).
	inflight float64
	dead     bool        // expired or evicted; written with both Engine.mu and mu held
	slot     int32       // index in the bucket ring; guarded by Engine.mu
	rslot    int32       // route ring slot of one of its routes, -1: none; Engine.mu
	seen     int64       // lastActive when the eviction hand last passed; mu
	share    bucketShare // the exchange with other instances; mu
	_        cacheLinePad
}

// tags returns the bucket's tags, its key in the manager's bucket map.
func (b *bucket) tags() model.Tags {
	return model.Tags{User: b.user, Client: b.client, Prefix: b.prefix, Topic: b.topic, TopicPrefix: b.topicPrefix}
}

func (b *bucket) noteThrottle(t int64) {
	if t > 0 {
		b.throttles++
		b.throttleMs += t
	}
}

// NewEngine returns an engine with no quotas: nothing is recorded or
// throttled until SetQuotas configures some.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:         cfg,
		windowMs:    cfg.WindowSize.Milliseconds(),
		ctlWindowMs: cfg.ControllerWindowSize.Milliseconds(),
		expiryMs:    cfg.Expiry.Milliseconds(),
	}
	if cfg.MaxThrottle > 0 {
		e.maxThrottleMs = max(cfg.MaxThrottle.Milliseconds(), 1)
	}
	for i := range e.mgr {
		m := &e.mgr[i]
		m.key = model.Key(i % int(model.NumKeys))
		m.topic = i >= int(model.NumKeys)
		m.buckets = make(map[model.Tags]*bucket)
		m.view.Store(&view{})
	}
	return e, nil
}

// Config returns the configuration with defaults filled in.
func (e *Engine) Config() EngineConfig { return e.cfg }

// Quotas returns a copy of the quota set in force.
func (e *Engine) Quotas() model.Quotas {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.quotas.Clone()
}

// SetQuotas replaces the whole quota set, live. Existing buckets keep their
// history and take their new bound in place, so a lowered quota can throttle
// at once on past traffic. When the change alters which level applies to a
// client, its tags change and it moves to a fresh bucket, exactly like Kafka
// ("Metrics tags changed, restart counter"). The old bucket lingers until it
// expires.
func (e *Engine) SetQuotas(q model.Quotas) {
	c := q.Clone()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.quotas = c
	for i := range e.mgr {
		m := &e.mgr[i]
		for _, b := range m.buckets {
			lvl, ent, v := e.limitLocked(m, b.tags())
			b.mu.Lock()
			if b.quota != v {
				b.until = 0 // a new bound gives a new throttle
			}
			b.level, b.entity, b.quota = lvl, ent, v
			b.tokens.SetQuota(v)
			e.setOptions(b, c.Options(ent))
			b.mu.Unlock()
		}
		routes, order := e.reroute(m)
		if m.topic {
			tt := c.TopicTable(m.key)
			m.rebuildRoutes(tt.Enabled(), tt, routes, order)
		} else {
			m.rebuildRoutes(c.Enabled(m.key), nil, routes, order)
		}
		// After the view: a Client that sees the new gen resolves against
		// the new view.
		m.gen.Add(1)
	}
}

// resolveLocked names the bucket of id in m under the quotas in force;
// false when m is a per-topic manager and no per-topic quota applies.
// Engine.mu must be held.
func (e *Engine) resolveLocked(m *manager, id ident) (model.Tags, bool) {
	if m.topic {
		return e.quotas.TopicTable(m.key).Tags(id.user, id.client, id.topic)
	}
	return e.quotas.Tags(m.key, id.user, id.client), true
}

// limitLocked is the bound of m's bucket with tags tg. Engine.mu must be
// held.
func (e *Engine) limitLocked(m *manager, tg model.Tags) (model.Level, model.Entity, float64) {
	if m.topic {
		return e.quotas.TopicTable(m.key).Limit(tg)
	}
	return e.quotas.Limit(m.key, tg)
}

// reroute re-resolves every cached route of m under the quotas in force,
// keeping those whose bucket already exists, in eviction-ring order.
// Value-only changes thus keep the whole cache and do not send every client
// through the slow path at once; routes that need a new bucket are dropped
// and rebuilt lazily, so that idle clients do not get buckets. Engine.mu
// must be held.
func (e *Engine) reroute(m *manager) (map[ident]*route, []routeSlot) {
	src := m.routes()
	if len(src) == 0 {
		return nil, nil
	}
	if m.topic && !e.quotas.TopicTable(m.key).Enabled() || !m.topic && !e.quotas.Enabled(m.key) {
		return nil, nil
	}
	routes := make(map[ident]*route, len(src))
	order := make([]routeSlot, 0, len(src))
	for _, rs := range m.clk.rring {
		if rs.r == nil || src[rs.id] != rs.r {
			continue
		}
		tg, ok := e.resolveLocked(m, rs.id)
		if !ok {
			continue
		}
		b := m.buckets[tg]
		if b == nil {
			continue
		}
		nr := &route{b: b}
		nr.lastUse.Store(rs.r.lastUse.Load())
		routes[rs.id] = nr
		order = append(order, routeSlot{r: nr, id: rs.id, seen: rs.seen})
	}
	return routes, order
}

// bucketFor returns the bucket of id for m, or nil when the manager is
// disabled (or, per topic, no per-topic quota applies to id's topic). This
// is the hot path's only shared read.
func (e *Engine) bucketFor(m *manager, id ident, nowMs int64) *bucket {
	v := m.view.Load()
	if !v.enabled {
		return nil
	}
	if r, ok := v.routes[id]; ok {
		r.touch(nowMs)
		return r.b
	}
	if m.topic {
		if _, ok := v.tt.Tags(id.user, id.client, id.topic); !ok {
			return nil // no quota: no bucket, and no lock taken
		}
	}
	return e.slowBucket(m, id, nowMs)
}

// slowBucket resolves id under the engine lock, creating the route and, if
// needed, the bucket.
func (e *Engine) slowBucket(m *manager, id ident, nowMs int64) *bucket {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweepLocked(nowMs)
	v := m.view.Load()
	if !v.enabled {
		return nil
	}
	// A route may lead to a bucket evicted since (dead is stable under
	// e.mu); it is then replaced like a missing one.
	if r, ok := v.routes[id]; ok && !r.b.dead {
		r.touch(nowMs)
		return r.b
	}
	if r, ok := m.dirty[id]; ok && !r.b.dead {
		m.miss(v)
		r.touch(nowMs)
		return r.b
	}
	tg, ok := e.resolveLocked(m, id)
	if !ok {
		return nil
	}
	m.ensureDirty()
	b := m.buckets[tg]
	if b == nil {
		b = e.newBucket(m, tg, nowMs)
		b.share.exUser, b.share.exClient = strings.Clone(id.user), strings.Clone(id.client)
		b.share.exTopic = strings.Clone(id.topic)
		e.learnBucket(b, nowMs)
		e.addBucket(m, b, nowMs)
	}
	r := &route{b: b}
	r.lastUse.Store(nowMs)
	// Clone the strings: callers may hand in views of request buffers.
	id = ident{strings.Clone(id.user), strings.Clone(id.client), strings.Clone(id.topic)}
	b.rslot = int32(e.addRoute(m, id, r))
	m.miss(v)
	return b
}

// miss counts a lookup the read-only view could not answer and publishes
// the dirty map once misses reach an eighth of it, which bounds the copying
// to about eight entries per miss.
func (m *manager) miss(v *view) {
	m.misses++
	if m.misses >= max(len(m.dirty)/8, 1) {
		m.view.Store(&view{enabled: v.enabled, tt: v.tt, routes: m.dirty})
		m.dirty, m.misses = nil, 0
	}
}

func (e *Engine) newBucket(m *manager, tg model.Tags, nowMs int64) *bucket {
	lvl, ent, v := e.limitLocked(m, tg)
	b := &bucket{
		key:         m.key,
		user:        strings.Clone(tg.User),
		client:      strings.Clone(tg.Client),
		prefix:      tg.Prefix,
		topic:       strings.Clone(tg.Topic),
		topicPrefix: tg.TopicPrefix,
		level:       lvl,
		entity:      ent,
		quota:       v,
		created:     nowMs,
		rslot:       -1,
		lastActive:  nowMs,
	}
	o := e.quotas.Options(ent)
	b.shadow, b.hasBurst, b.burst = o.Shadow, o.HasBurst, o.Burst
	e.initAccounting(b)
	return b
}

// initAccounting gives b the accounting state of a new bucket of its key
// and quota: an empty window, and a token bucket that fills at first use.
func (e *Engine) initAccounting(b *bucket) {
	if b.key.Counted() {
		b.rate = rate.NewSampled(e.cfg.ControllerWindowNum, e.ctlWindowMs)
		b.tokens = rate.NewTokenBucket(b.quota, e.cfg.ControllerWindowNum, e.ctlWindowMs)
	} else {
		b.rate = rate.NewSampled(e.cfg.WindowNum, e.windowMs)
		if e.cfg.ByteRate == ByteRateTokenBucket && b.key.ByteRate() {
			// Kafka's first-burst allowance, Q·(N−1)·W, as the burst.
			b.tokens = rate.NewTokenBucket(b.quota, e.cfg.WindowNum-1, e.windowMs)
			b.useTokens = true
		}
	}
	if b.hasBurst {
		b.tokens.SetBurst(b.burst) // before the first use fills it
	}
}
