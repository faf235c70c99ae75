package quota

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// Delta is usage one instance of a Tollgate cluster recorded for one bucket
// since its last report: the bucket's key, one (user, client-id) whose
// bucket it is — every instance resolves it with its own quotas, so equal
// quotas find the same bucket everywhere — and the amount (bytes, requests'
// milliseconds or mutations; negative when more was un-recorded than
// recorded).
//
// A tenant's buckets are named by the tenant instead (Tenant set): its
// ceiling (User and Client empty) or one principal's fair share in it
// (User the principal).
type Delta struct {
	Key    model.Key
	User   string
	Client string
	// Topic names a per-topic bucket by one topic of it ("" for a client
	// quota's bucket); every instance resolves (User, Client, Topic) with
	// its own per-topic quotas.
	Topic  string
	Tenant string
	Value  float64
	// Total is everything the bucket recorded here since it was created:
	// a receiver that saw the bucket's previous Total applies the
	// difference, so that the usage of a lost report is not lost with it;
	// one that did not (or sees Total go back: the bucket was created
	// anew) applies Value.
	Total float64
}

// How a bucket measures a Tollgate cluster (docs/cluster.md):
//
//   - Every instance records what its own connections do, as alone, and
//     every exchange interval reports, per bucket with traffic, what it
//     recorded since its last report (DrainUsage). What the other instances
//     report is recorded into the same bucket (ApplyRemote), so each
//     instance's bucket measures the whole Tollgate cluster's traffic, a
//     report's delay late, and Kafka's throttle formula applied to it holds
//     the cluster to Q.
//   - The delay matters when a bucket's headroom is spent faster than
//     reports travel, as in the start-up burst with connections on several
//     instances. So each instance takes, between two ticks, at most a lease
//     of the headroom — the bytes the bucket may still take before its rate
//     exceeds Q — divided by the live instances, and never less than two
//     intervals of Q (so that one instance carrying the whole load at Q is
//     not held back). A request past its lease waits for the next tick.
//   - Cut off from the exchange, an instance cannot learn what the others
//     do: for every bucket it records, in their place, the remote rate it
//     last saw, decaying toward Q·(N−1)/N with N the last live count, so
//     that its own share moves to Q/N (CockroachDB's fallback). It never
//     becomes unlimited.

// ClusterTick is what the exchange tells the engine every interval.
type ClusterTick struct {
	// Live instances, this one included.
	Live int
	// Connected: this instance still hears the exchange (false: cut off,
	// fall back).
	Connected bool
	// Learning: this instance (re)started into a Tollgate cluster that
	// was running before it, and its buckets cannot know what the client
	// spent in the last window: a bucket it creates now starts with its
	// burst spent (Doorman's learning mode).
	Learning bool
	// Decided: the instance has run long enough to have heard every live
	// instance, so Learning is known; until then it is assumed.
	Decided bool
}

// clusterState is the engine's part of the exchange. Zero: not in a
// cluster, nothing changes.
type clusterState struct {
	on         atomic.Bool
	tick       atomic.Uint64 // ticks so far; a lease belongs to one tick
	nextTickMs atomic.Int64  // when the current lease period ends
	intervalMs atomic.Int64
	live       atomic.Int32 // live instances, this one included
	lastLive   atomic.Int32 // live instances when last connected
	cutSinceMs atomic.Int64 // 0: connected
	learning   atomic.Bool
	ticked     atomic.Bool // the first Tick has happened

	mu         sync.Mutex
	undecided  []*bucket // made learning before the first Tick said whether to
	drainMs    int64     // last DrainUsage
	lastTickMs int64     // last Tick
	remote     map[*bucket]struct{}
}

// fallbackTau is how fast a cut-off instance's stand-in for the others'
// rate moves from what it last saw toward Q·(N−1)/N.
const fallbackTau = 10 * time.Second

// leaseFloorIntervals is the least an instance may take between two ticks,
// in intervals of Q.
const leaseFloorIntervals = 2

// bucketShare is a bucket's part of the exchange.
type bucketShare struct {
	// exUser and exClient are the (user, client-id) that created the
	// bucket: what reports name it by.
	exUser, exClient string
	exTopic          string  // a per-topic bucket's: the topic that created it
	local            float64 // recorded here since the last drain
	total            float64 // drained since the bucket was created
	localRate        float64 // per second, smoothed over drains
	remote           float64 // recorded from reports since the last tick
	remoteRate       float64 // per second, smoothed over ticks
	tick             uint64  // the tick the lease below belongs to
	lease            float64 // what this instance may take in that tick
	taken            float64 // what it took
	synthMs          int64   // until when the fallback stand-in is recorded
	remoteAtMs       int64   // when a report last added to the bucket
}

// unseen estimates what the other instances took of b since their last
// report reached this one — their rate times the time since — so that a
// throttle decided now allows for what is on its way. It is at most two
// intervals of their rate. b.mu is held.
func (e *Engine) unseen(b *bucket, nowMs int64) float64 {
	if b.share.remoteRate <= 0 || e.cl.cutSinceMs.Load() != 0 {
		return 0
	}
	age := min(nowMs-b.share.remoteAtMs, 2*e.cl.intervalMs.Load())
	if age <= 0 {
		return 0
	}
	return b.share.remoteRate * float64(age) / 1000
}

// clusterOn reports whether the engine is part of a Tollgate cluster.
func (e *Engine) clusterOn() bool { return e.cl.on.Load() }

// noteLocal accounts v recorded by this instance's own traffic and returns
// how long the request must wait for the next tick because this instance
// took more than its lease (0 outside a cluster). b.mu is held.
func (e *Engine) noteLocal(b *bucket, v float64, nowMs int64) int64 {
	if !e.cl.on.Load() {
		return 0
	}
	b.share.local += v
	if e.cl.cutSinceMs.Load() != 0 {
		e.standIn(b, nowMs)
	}
	e.renewLease(b, nowMs)
	b.share.taken += v
	if b.share.taken <= b.share.lease {
		return 0
	}
	return e.untilNextTick(nowMs)
}

// untilNextTick is how long to wait for the next lease period. It may be
// late (it ends when every instance has reported), so never less than a
// tenth of an interval.
func (e *Engine) untilNextTick(nowMs int64) int64 {
	return max(e.cl.nextTickMs.Load()-nowMs, e.cl.intervalMs.Load()/10, 1)
}

// renewLease starts b's lease over at the first use in a new period.
// b.mu is held.
func (e *Engine) renewLease(b *bucket, nowMs int64) {
	if tick := e.cl.tick.Load(); b.share.tick != tick {
		b.share.tick = tick
		b.share.taken = 0
		b.share.lease = e.leaseFor(b, nowMs)
	}
}

// leaseHold is how long a request of size must wait before it is
// forwarded because, with what is already in flight, it would take this
// instance past its lease (0 outside a cluster, and for the first request
// of a period, so that one larger than a lease still passes). b.mu is
// held.
func (e *Engine) leaseHold(b *bucket, size float64, nowMs int64) int64 {
	if !e.cl.on.Load() {
		return 0
	}
	e.renewLease(b, nowMs)
	used := b.share.taken + b.inflight
	if used <= 0 || used+size <= b.share.lease {
		return 0
	}
	return e.untilNextTick(nowMs)
}

// leaseRoom is what is left of b's lease for a fetch to reserve
// (+Inf outside a cluster). b.mu is held.
func (e *Engine) leaseRoom(b *bucket, nowMs int64) float64 {
	if !e.cl.on.Load() {
		return math.Inf(1)
	}
	e.renewLease(b, nowMs)
	return b.share.lease - b.share.taken - b.inflight
}

// leaseFor is what one instance may take of b before the next tick: the
// headroom split over the live instances, at least leaseFloorIntervals of
// Q. b.mu is held.
func (e *Engine) leaseFor(b *bucket, nowMs int64) float64 {
	q := b.quota
	if q <= 0 || math.IsInf(q, 1) || q >= math.MaxFloat64/4 {
		return math.Inf(1)
	}
	var headroom float64
	if b.useTokens || b.key.Counted() {
		headroom = b.tokens.Peek(nowMs)
	} else {
		r, w := b.rate.Peek(nowMs)
		headroom = (q - r) * float64(w) / 1000
	}
	live := max(float64(e.cl.live.Load()), 1)
	// The floor is this instance's part of two intervals of Q, by its
	// part of the bucket's recent traffic (a newcomer's part starts at a
	// twentieth), so that the floors of all instances add up to about two
	// intervals of Q.
	local, remote := b.share.localRate, b.share.remoteRate
	part := (local + q/20) / (local + remote + q/20)
	floor := leaseFloorIntervals * q * part * float64(e.cl.intervalMs.Load()) / 1000
	return max(headroom/live, floor)
}

// standIn records, while cut off, what the other instances are assumed to
// take of b since it was last done: the rate last seen from them, decaying
// toward Q·(N−1)/N. At most one window is recorded at once — older usage
// would have left the window anyway. b.mu is held.
func (e *Engine) standIn(b *bucket, nowMs int64) {
	cut := e.cl.cutSinceMs.Load()
	n := float64(e.cl.lastLive.Load())
	if cut == 0 || n <= 1 {
		b.share.synthMs = nowMs
		return
	}
	from := max(b.share.synthMs, cut)
	if from >= nowMs {
		return
	}
	q := b.quota
	if q <= 0 || math.IsInf(q, 1) || q >= math.MaxFloat64/4 {
		b.share.synthMs = nowMs
		return
	}
	target := q * (n - 1) / n
	elapsed := float64(nowMs-cut) / 1000
	r := target + (b.share.remoteRate-target)*math.Exp(-elapsed/fallbackTau.Seconds())
	span := min(nowMs-from, int64(b.rate.Samples())*b.rate.SampleMs())
	v := r * float64(span) / 1000
	b.rate.Record(v, nowMs)
	if b.useTokens || b.key.Counted() {
		b.tokens.Record(v, nowMs)
	}
	b.share.synthMs = nowMs
}

// DrainUsage appends what every bucket recorded from this instance's own
// traffic since the previous call, and starts counting again.
func (e *Engine) DrainUsage(dst []Delta, now time.Time) []Delta {
	nowMs := now.UnixMilli()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cl.mu.Lock()
	dt := float64(nowMs-e.cl.drainMs) / 1000
	if e.cl.drainMs == 0 || dt <= 0 {
		dt = float64(max(e.cl.intervalMs.Load(), 1)) / 1000
	}
	e.cl.drainMs = nowMs
	e.cl.mu.Unlock()
	for i := range e.mgr {
		for _, b := range e.mgr[i].buckets {
			b.mu.Lock()
			if v, ok := b.drain(dt); ok {
				dst = append(dst, Delta{Key: b.key, User: b.share.exUser, Client: b.share.exClient, Topic: b.share.exTopic,
					Value: v, Total: b.share.total})
			}
			b.mu.Unlock()
		}
	}
	return e.drainTenants(dst, dt)
}

// drain takes what b recorded locally since the last drain (ok false:
// nothing) and smooths its local rate over drains dt seconds apart. b.mu
// is held.
func (b *bucket) drain(dt float64) (float64, bool) {
	v := b.share.local
	if v != 0 {
		b.share.total += v
		b.share.local = 0
		b.share.localRate = (b.share.localRate + v/dt) / 2
		return v, true
	}
	if b.share.localRate != 0 {
		b.share.localRate /= 2
		if b.share.localRate < 1e-9 {
			b.share.localRate = 0
		}
	}
	return 0, false
}

// ApplyRemote records usage another instance reported into the buckets
// this instance resolves its identities to (creating them: a client whose
// traffic has so far gone elsewhere starts here with its history); a delta
// with a Topic into the per-topic bucket of that topic. Keys (and topics)
// this instance has no quota for are skipped.
func (e *Engine) ApplyRemote(ds []Delta, now time.Time) {
	nowMs := now.UnixMilli()
	for _, d := range ds {
		if !d.Key.Valid() {
			continue
		}
		if d.Tenant != "" {
			e.applyTenantRemote(d, nowMs)
			continue
		}
		m := &e.mgr[d.Key]
		id := ident{d.User, d.Client, ""}
		if d.Topic != "" {
			m, id.topic = &e.mgr[model.NumKeys+d.Key], d.Topic
		}
		b := e.bucketFor(m, id, nowMs)
		for b != nil {
			b.mu.Lock()
			if !b.dead {
				break
			}
			b.mu.Unlock()
			b = e.slowBucket(m, id, nowMs)
		}
		if b == nil {
			continue
		}
		e.recordRemote(b, d.Value, nowMs)
	}
}

// recordRemote records v reported by another instance into b, locked,
// and unlocks it.
func (e *Engine) recordRemote(b *bucket, v float64, nowMs int64) {
	b.rate.Record(v, nowMs)
	if b.useTokens || b.key.Counted() {
		b.tokens.Record(v, nowMs)
	}
	b.lastActive = nowMs
	b.share.remote += v
	b.share.remoteAtMs = nowMs
	b.mu.Unlock()
	e.cl.mu.Lock()
	if e.cl.remote == nil {
		e.cl.remote = map[*bucket]struct{}{}
	}
	e.cl.remote[b] = struct{}{}
	e.cl.mu.Unlock()
}

// Tick ends one exchange interval: leases start over, the live count and
// connectivity take effect, and the remote rates the fallback starts from
// are updated.
func (e *Engine) Tick(ct ClusterTick, now time.Time) {
	nowMs := now.UnixMilli()
	live, connected := ct.Live, ct.Connected
	e.cl.learning.Store(ct.Learning)
	e.cl.mu.Lock()
	defer e.cl.mu.Unlock()
	if !ct.Decided {
		e.cl.learning.Store(true)
	} else if !e.cl.ticked.Swap(true) {
		// Buckets made before it was known started spent, in case this
		// instance joined a running cluster; if it did not, they get
		// their burst.
		for _, b := range e.cl.undecided {
			if !ct.Learning {
				e.unlearnBucket(b, nowMs)
			}
		}
		e.cl.undecided = nil
	}
	interval := max(e.cl.intervalMs.Load(), 1)
	// dt: the period that ends now, between half and four intervals.
	dt := float64(interval) / 1000
	if e.cl.lastTickMs != 0 {
		dt = float64(min(max(nowMs-e.cl.lastTickMs, interval/2), 4*interval)) / 1000
	}
	e.cl.lastTickMs = nowMs
	e.cl.live.Store(int32(max(live, 1)))
	switch {
	case connected:
		e.cl.lastLive.Store(int32(max(live, 1)))
		e.cl.cutSinceMs.Store(0)
	case e.cl.cutSinceMs.Load() == 0:
		e.cl.cutSinceMs.Store(nowMs)
	}
	for b := range e.cl.remote {
		b.mu.Lock()
		if connected {
			b.share.remoteRate = (b.share.remoteRate + b.share.remote/dt) / 2
		}
		b.share.remote = 0
		if b.dead || (connected && b.share.remoteRate < 1e-9) {
			b.share.remoteRate = 0
			delete(e.cl.remote, b)
		}
		b.mu.Unlock()
	}
	e.cl.nextTickMs.Store(nowMs + interval)
	e.cl.tick.Add(1)
	e.cl.on.Store(true)
}

// JoinCluster puts the engine in cluster mode before the first tick, with
// the exchange's interval.
// Until a tick says it is decided the engine is learning: it cannot yet
// tell a new Tollgate cluster from a running one it joins. Buckets made
// meanwhile get their burst back then if it was a new one.
func (e *Engine) JoinCluster(interval time.Duration, now time.Time) {
	e.cl.learning.Store(true)
	e.cl.intervalMs.Store(interval.Milliseconds())
	e.cl.live.Store(1)
	e.cl.lastLive.Store(1)
	e.cl.nextTickMs.Store(now.UnixMilli() + interval.Milliseconds())
	e.cl.on.Store(true)
}

// learnBucket starts a bucket created while learning with its burst spent:
// a token bucket empty, a sampled rate as if the client had used its quota
// over the whole window. b.mu need not be held: b is not yet shared.
func (e *Engine) learnBucket(b *bucket, nowMs int64) {
	if !e.cl.on.Load() || !e.cl.learning.Load() {
		return
	}
	q := b.quota
	if q <= 0 || math.IsInf(q, 1) || q >= math.MaxFloat64/4 {
		return
	}
	if !e.cl.ticked.Load() {
		e.cl.mu.Lock()
		e.cl.undecided = append(e.cl.undecided, b)
		e.cl.mu.Unlock()
	}
	if b.useTokens || b.key.Counted() {
		b.tokens.Empty(nowMs)
		return
	}
	b.rate.Record(learnedUsage(b), nowMs)
}

// learnedUsage is what learnBucket records into a sampled rate: the
// quota over the window's (N−1)·W.
func learnedUsage(b *bucket) float64 {
	return b.quota * float64(int64(b.rate.Samples()-1)*b.rate.SampleMs()) / 1000
}

// unlearnBucket gives a bucket made learning the burst learnBucket took
// from it. e.cl.mu is held.
func (e *Engine) unlearnBucket(b *bucket, nowMs int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dead {
		return
	}
	if b.useTokens || b.key.Counted() {
		b.tokens.Record(-b.tokens.Burst(), nowMs) // capped at the burst
		return
	}
	b.rate.Record(-learnedUsage(b), nowMs)
}

// instancePart is this instance's share of b's recent traffic: its own
// against the others' reported, both smoothed over exchange intervals; 1
// when the others reported nothing. b.mu is held.
func (b *bucket) instancePart() float64 {
	local, remote := b.share.localRate, b.share.remoteRate
	if remote <= 0 {
		return 1
	}
	return local / (local + remote)
}
