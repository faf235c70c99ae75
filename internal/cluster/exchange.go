package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// Ledger is the quota engine as the exchange sees it.
type Ledger interface {
	// DrainUsage appends to dst what this instance's buckets recorded
	// since the previous call, one entry per bucket with traffic.
	DrainUsage(dst []quota.Delta, now time.Time) []quota.Delta
	// ApplyRemote records usage another instance reported.
	ApplyRemote(ds []quota.Delta, now time.Time)
	// Tick ends one exchange interval.
	Tick(t quota.ClusterTick, now time.Time)
}

// Transport carries reports between instances: a topic on the upstream in
// production (KafkaTransport), a simulated network in the share
// algorithm's virtual-time tests.
type Transport interface {
	// Publish sends one encoded report part; it may return before delivery
	// and must not block longer than ctx allows.
	Publish(ctx context.Context, part []byte) error
	// Receive returns the next report part any instance (this one
	// included) published, blocking until there is one or ctx ends.
	Receive(ctx context.Context) ([]byte, error)
}

// Member is one instance of the Tollgate cluster as this one sees it
// (declared with the admin API's types: GET /api/v1/cluster shows it).
type Member = api.ClusterMember

// Event is a change of membership.
type Event struct {
	Kind   string // "join", "leave", "restart", "conflict"
	Member Member
	Reason string // for leave: "left" (clean shutdown) or "timeout"
}

// ExchangeConfig configures the usage exchange.
type ExchangeConfig struct {
	Self Member // ID, Incarnation, Version, Addr, Digest
	// Interval between two reports of this instance; 0: 500 ms.
	Interval time.Duration
	// SessionTimeout: an instance not heard from for this long has left;
	// 0: 4 intervals.
	SessionTimeout time.Duration
	Ledger         Ledger
	Transport      Transport
	Logger         *slog.Logger
	// OnEvent, if set, is called (from the exchange's goroutine) for
	// every membership event.
	OnEvent func(Event)
	// LearnFor is how long an instance that joins a running Tollgate
	// cluster is learning (quota.ClusterTick.Learning): the quota window,
	// N·W. 0: 11 s.
	LearnFor time.Duration
	// OnTick, if set, is called after every tick.
	OnTick func(quota.ClusterTick)
	// Keys sign every report part this instance publishes and check every
	// part it receives (seal.go); nil: neither, and a signed part is
	// refused.
	Keys *Keyring
}

// Exchange runs the membership and usage exchange of one instance: every
// interval it publishes the usage its buckets recorded, and it records
// what the others publish, so that every instance's buckets measure the
// whole Tollgate cluster's traffic (docs/cluster.md).
type Exchange struct {
	cfg ExchangeConfig
	log *slog.Logger

	mu        sync.Mutex
	members   map[string]*memberState
	heard     time.Time // last time this instance's own report came back
	connected bool
	seq       uint64
	buf       []quota.Delta
	// The lease period (tick): pending once this instance has published,
	// ended when every other member has reported since the last end.
	pending   bool
	pendingMs int64 // when the pending period's tick was
	renewed   time.Time
	heardFrom map[string]int64 // the latest SentMs from each member
	stats     ExchangeStats
	full      bool      // the member map was found full (logged once)
	warned    time.Time // the last refused report logged
}

// MaxMembers bounds the members an instance keeps, itself included:
// reports of an instance id not seen yet are dropped (and counted as
// rejected) while the map holds that many. A Tollgate cluster is a
// handful to tens of instances; anyone who can write the exchange topic
// could otherwise announce instances without end.
const MaxMembers = 256

type memberState struct {
	Member
	seq uint64 // highest seq applied from this incarnation
	// totals are the last Total seen per bucket from this incarnation.
	totals map[bucketRef]seenTotal
}

// bucketRef names a reporting instance's bucket: a per-topic bucket by its
// topic too, so that it is never taken for the client bucket of the same
// (user, client-id).
type bucketRef struct {
	key                 model.Key
	user, client, topic string
	tenant              string // a tenant's bucket (quota.Delta.Tenant)
}

type seenTotal struct {
	total float64
	at    time.Time
}

// ExchangeStats counts the exchange's traffic.
type ExchangeStats = api.ExchangeStats

// NewExchange returns an exchange; Run starts it.
func NewExchange(cfg ExchangeConfig) *Exchange {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 4 * cfg.Interval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LearnFor <= 0 {
		cfg.LearnFor = 11 * time.Second
	}
	self := cfg.Self
	self.Self = true
	return &Exchange{cfg: cfg, log: cfg.Logger, connected: true, heardFrom: map[string]int64{},
		members: map[string]*memberState{self.ID: {Member: self}}}
}

// Interval returns the exchange interval.
func (x *Exchange) Interval() time.Duration { return x.cfg.Interval }

// SessionTimeout returns how long an instance may stay silent.
func (x *Exchange) SessionTimeout() time.Duration { return x.cfg.SessionTimeout }

// Run publishes and receives until ctx ends; then it publishes a last
// report that says this instance is leaving.
func (x *Exchange) Run(ctx context.Context) {
	now := time.Now()
	x.mu.Lock()
	x.members[x.cfg.Self.ID].Joined = now
	x.members[x.cfg.Self.ID].LastSeen = now
	x.mu.Unlock()
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		x.receive(ctx)
	}()
	t := time.NewTicker(x.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// A last report, so that the others take this instance's share
			// back at once rather than after the session timeout.
			lctx, cancel := context.WithTimeout(context.Background(), x.cfg.Interval)
			x.publish(lctx, time.Now(), true)
			cancel()
			<-recvDone
			return
		case now := <-t.C:
			x.tick(ctx, now)
		}
	}
}

// tick publishes this instance's report and ends the lease period as soon
// as every other live instance has sent a report since this tick — when
// the last of them arrives (handle), or at the next tick if one stays
// silent. A lease is then always computed
// from the others' usage up to their latest report: when every instance
// takes its part of the headroom at once (a start-up burst), no instance
// renews from a state that misses what the others took last period.
func (x *Exchange) tick(ctx context.Context, now time.Time) {
	x.publish(ctx, now, false)
	x.expire(now)
	x.mu.Lock()
	// A period still pending from the last tick means someone stayed
	// silent a whole interval: end it without them.
	force := x.pending
	x.pending, x.pendingMs = true, now.UnixMilli()
	x.renewLocked(now, force)
}

// renewLocked ends the lease period if one is pending and every other
// member has reported since the last (or force); it unlocks x.mu.
func (x *Exchange) renewLocked(now time.Time, force bool) {
	if !x.pending {
		x.mu.Unlock()
		return
	}
	for id, m := range x.members {
		if !force && !m.Self && x.heardFrom[id] < x.pendingMs && x.connected {
			x.mu.Unlock()
			return
		}
	}
	ct := x.stateLocked(now)
	x.pending = false
	x.renewed = now
	x.mu.Unlock()
	x.cfg.Ledger.Tick(ct, now)
	if x.cfg.OnTick != nil {
		x.cfg.OnTick(ct)
	}
}

func (x *Exchange) publish(ctx context.Context, now time.Time, leaving bool) {
	x.mu.Lock()
	x.buf = x.cfg.Ledger.DrainUsage(x.buf[:0], now)
	x.seq++
	r := Report{Instance: x.cfg.Self.ID, Incarnation: x.cfg.Self.Incarnation, Seq: x.seq, SentMs: now.UnixMilli(),
		Leaving: leaving, Version: x.cfg.Self.Version, Addr: x.cfg.Self.Addr, Digest: x.cfg.Self.Digest, Usage: x.buf}
	parts := r.Encode()
	x.stats.Entries += uint64(len(x.buf))
	x.mu.Unlock()
	for _, p := range parts {
		if x.cfg.Keys != nil {
			p = x.cfg.Keys.SignReport(p)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*x.cfg.Interval)
		err := x.cfg.Transport.Publish(pctx, p)
		cancel()
		x.mu.Lock()
		if err != nil {
			x.stats.PublishFailed++
		} else {
			x.stats.Published++
			x.stats.PublishedBytes += uint64(len(p))
		}
		x.mu.Unlock()
	}
}

// expire drops members not heard from within the session timeout and
// returns the live count, whether this instance hears itself, and whether
// it is learning: it started less than LearnFor ago and another live
// instance is older than that.
func (x *Exchange) expire(now time.Time) quota.ClusterTick {
	x.mu.Lock()
	var events []Event
	for id, m := range x.members {
		if m.Self {
			continue
		}
		m.forget(now, x.cfg.LearnFor)
		if now.Sub(m.LastSeen) > x.cfg.SessionTimeout {
			delete(x.members, id)
			delete(x.heardFrom, id)
			events = append(events, Event{Kind: "leave", Member: m.Member, Reason: "timeout"})
		}
	}
	self := x.members[x.cfg.Self.ID]
	// Until its first report comes back an instance counts as heard: it
	// has only just started.
	heard := x.heard
	if heard.IsZero() {
		heard = self.Joined
	}
	wasConnected := x.connected
	x.connected = now.Sub(heard) <= x.cfg.SessionTimeout
	connected := x.connected
	ct := x.stateLocked(now)
	live := ct.Live
	x.mu.Unlock()
	for _, ev := range events {
		x.emit(ev)
	}
	if wasConnected != connected {
		if connected {
			x.log.Info("cluster exchange heard again", "instance_id", x.cfg.Self.ID)
		} else {
			x.log.Warn("cluster exchange lost: this instance cannot hear its own reports; falling back to its last share decaying toward quota/N (docs/cluster.md)",
				"instance_id", x.cfg.Self.ID, "live", live)
		}
	}
	return ct
}

// stateLocked is what the engine is told at the end of a lease period:
// the live count, whether this instance hears itself, and whether it is
// learning (it started less than LearnFor ago and another live instance
// is older than that). x.mu is held.
func (x *Exchange) stateLocked(now time.Time) quota.ClusterTick {
	self := x.members[x.cfg.Self.ID]
	// Every live instance reports once an interval: after two, this one
	// has heard them all and knows whether it joined a running cluster.
	decided := now.Sub(self.Joined) >= 2*x.cfg.Interval
	learning := !decided
	if now.Sub(self.Joined) < x.cfg.LearnFor {
		for _, m := range x.members {
			if !m.Self && m.Incarnation < x.cfg.Self.Incarnation-x.cfg.LearnFor.Milliseconds() {
				learning = true
			}
		}
	}
	return quota.ClusterTick{Live: len(x.members), Connected: x.connected, Learning: learning, Decided: decided}
}

func (x *Exchange) emit(ev Event) {
	switch ev.Kind {
	case "join":
		x.log.Info("cluster instance joined", "instance_id", ev.Member.ID, "version", ev.Member.Version, "admin_addr", ev.Member.Addr)
	case "restart":
		x.log.Info("cluster instance restarted", "instance_id", ev.Member.ID, "version", ev.Member.Version)
	case "leave":
		x.log.Info("cluster instance left", "instance_id", ev.Member.ID, "reason", ev.Reason)
	case "conflict":
		x.log.Error("another process reports with this instance's id; give every instance its own cluster.instance_id (or data_dir)",
			"instance_id", ev.Member.ID, "other_incarnation", ev.Member.Incarnation)
	}
	if x.cfg.OnEvent != nil {
		x.cfg.OnEvent(ev)
	}
}

func (x *Exchange) receive(ctx context.Context) {
	for {
		b, err := x.cfg.Transport.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue
		}
		x.handle(b, time.Now())
	}
}

// handle applies one received report part, once its signature holds.
func (x *Exchange) handle(b []byte, now time.Time) {
	n := len(b)
	b, refused := x.open(b)
	if refused != "" {
		x.mu.Lock()
		x.stats.Received++
		x.stats.ReceivedBytes += uint64(n)
		x.stats.Rejected++
		if x.stats.Refused == nil {
			x.stats.Refused = map[string]uint64{}
		}
		x.stats.Refused[refused]++
		warn := now.Sub(x.warned) >= time.Minute
		if warn {
			x.warned = now
		}
		x.mu.Unlock()
		if warn {
			x.log.Warn("cluster exchange: refused a report that fails its signature check; it is not applied (is the exchange topic writable by others than Tollgate?)",
				"reason", refused, "bytes", n)
		}
		return
	}
	x.handleOpen(b, n, now)
}

// open returns the report part b carries, or why it is refused.
func (x *Exchange) open(b []byte) ([]byte, string) {
	if x.cfg.Keys == nil {
		if isSealedReport(b) {
			return nil, RefusedNoSecret
		}
		return b, ""
	}
	return x.cfg.Keys.OpenReport(b)
}

// handleOpen applies a report part whose signature holds; n is its size
// as received.
func (x *Exchange) handleOpen(b []byte, n int, now time.Time) {
	if id, inc, ok := peekSender(b); ok && id == x.cfg.Self.ID && inc == x.cfg.Self.Incarnation {
		// Its own report, back: all it says is that the exchange works.
		x.mu.Lock()
		x.stats.Received++
		x.stats.ReceivedBytes += uint64(n)
		x.heard = now
		x.members[x.cfg.Self.ID].LastSeen = now
		x.mu.Unlock()
		return
	}
	r, err := DecodeReport(b)
	x.mu.Lock()
	x.stats.Received++
	x.stats.ReceivedBytes += uint64(n)
	if err != nil {
		x.stats.Rejected++
		x.mu.Unlock()
		x.log.Warn("cluster exchange: dropped a malformed report", "err", err, "bytes", len(b))
		return
	}
	// A report older than the session timeout says nothing about now (a
	// consumer that started behind); its usage is outside every window
	// that matters.
	if now.UnixMilli()-r.SentMs > x.cfg.SessionTimeout.Milliseconds() {
		x.mu.Unlock()
		return
	}
	if r.Instance == x.cfg.Self.ID {
		x.fromSelfLocked(&r, now)
		return
	}
	member, ev, ok := x.noteMemberLocked(&r, now)
	x.mu.Unlock()
	if !ok {
		return
	}
	if len(r.Usage) > 0 {
		x.cfg.Ledger.ApplyRemote(r.Usage, now)
	}
	if ev != nil {
		ev.Member = member
		x.emit(*ev)
		if ev.Kind != "restart" {
			// The live count changed: leases start over with it now, not
			// a period later (a newcomer's clients may already be here).
			x.mu.Lock()
			x.pending = true
			x.renewLocked(now, true)
		}
	}
	if r.Part+1 == r.Parts {
		x.mu.Lock()
		if _, ok := x.members[r.Instance]; ok {
			x.heardFrom[r.Instance] = max(x.heardFrom[r.Instance], r.SentMs)
		}
		x.renewLocked(now, false)
	}
}

// fromSelfLocked takes a report that names this instance: its own, back
// (the exchange works), or another process's under the same id, a
// conflict. x.mu is held and is released.
func (x *Exchange) fromSelfLocked(r *Report, now time.Time) {
	if r.Incarnation == x.cfg.Self.Incarnation {
		x.heard = now
		x.members[x.cfg.Self.ID].LastSeen = now
		x.mu.Unlock()
		return
	}
	x.stats.Rejected++
	x.mu.Unlock()
	x.emit(Event{Kind: "conflict", Member: Member{ID: r.Instance, Incarnation: r.Incarnation, Version: r.Version, Addr: r.Addr}})
}

// noteMemberLocked records what another instance's report says of it (a
// join, a restart, a leave; its version, address and digest) and turns its
// usage into what is not yet applied. It returns the member as it is now
// and the event the report makes, if any; false if the report is one to
// ignore (an older process, a report already applied, a leave from an
// instance never seen). x.mu is held.
func (x *Exchange) noteMemberLocked(r *Report, now time.Time) (Member, *Event, bool) {
	var ev *Event
	m, ok := x.members[r.Instance]
	switch {
	case !ok:
		if r.Leaving {
			return Member{}, nil, false
		}
		if len(x.members) >= MaxMembers {
			// Reports from ever new instance ids would grow the map
			// without bound and shrink every instance's share.
			x.stats.Rejected++
			if !x.full {
				x.full = true
				x.log.Warn("cluster exchange: the Tollgate cluster has its most members; reports of further instances are dropped",
					"max", MaxMembers, "instance", r.Instance)
			}
			return Member{}, nil, false
		}
		m = &memberState{Member: Member{ID: r.Instance, Incarnation: r.Incarnation, Joined: now}}
		x.members[r.Instance] = m
		ev = &Event{Kind: "join"}
	case r.Incarnation > m.Incarnation:
		m.Incarnation, m.seq, m.totals = r.Incarnation, 0, nil
		ev = &Event{Kind: "restart"}
	case r.Incarnation < m.Incarnation || r.Seq < m.seq || (r.Seq == m.seq && r.Part == 0):
		// An older process, or a report already applied.
		return Member{}, nil, false
	}
	m.seq = r.Seq
	m.Version, m.Addr, m.Digest, m.LastSeen = r.Version, r.Addr, r.Digest, now
	if r.Leaving {
		delete(x.members, r.Instance)
		delete(x.heardFrom, r.Instance)
		ev = &Event{Kind: "leave", Reason: "left"}
	}
	member := m.Member
	m.catchUp(r.Usage, now)
	return member, ev, true
}

// catchUp turns each entry's Value into what the receiver has not yet
// applied of the bucket: the difference from the previous Total when there
// is one (which includes the usage of reports lost on the way), the
// entry's own Value otherwise.
func (m *memberState) catchUp(us []quota.Delta, now time.Time) {
	if m.totals == nil {
		m.totals = map[bucketRef]seenTotal{}
	}
	for i := range us {
		d := &us[i]
		ref := bucketRef{d.Key, d.User, d.Client, d.Topic, d.Tenant}
		if prev, ok := m.totals[ref]; ok && d.Total >= prev.total && d.Total-prev.total >= d.Value {
			d.Value = d.Total - prev.total
		}
		m.totals[ref] = seenTotal{total: d.Total, at: now}
	}
}

// forget drops the totals of buckets not reported for longer than age:
// their usage has left every window.
func (m *memberState) forget(now time.Time, age time.Duration) {
	for ref, st := range m.totals {
		if now.Sub(st.at) > age {
			delete(m.totals, ref)
		}
	}
}

// Members returns the live instances, this one first, then by id.
func (x *Exchange) Members() []Member {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]Member, 0, len(x.members))
	for _, m := range x.members {
		out = append(out, m.Member)
	}
	slices.SortFunc(out, func(a, b Member) int {
		if a.Self != b.Self {
			if a.Self {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Connected reports whether this instance hears the exchange.
func (x *Exchange) Connected() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.connected
}

// Stats returns the exchange's counters.
func (x *Exchange) Stats() ExchangeStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.stats
	if s.Refused != nil {
		s.Refused = make(map[string]uint64, len(x.stats.Refused))
		for r, n := range x.stats.Refused {
			s.Refused[r] = n
		}
	}
	return s
}

// Status is a Tollgate cluster as one instance sees it (GET
// /api/v1/cluster).
type Status = api.ClusterStatus
