package telemetry

import (
	"container/list"
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Subscription is Tollgate's own subscription, what every client is asked
// for: the metrics Tollgate shows. Kafka asks a client only for what the
// named subscriptions (CLIENT_METRICS resources) it matches ask for;
// Tollgate, whose dashboard needs its metrics of every client, asks each
// for its own subscription and the named ones it matches
// (ClientSubscription) together: all their metrics, at the shortest of
// their intervals.
type Subscription struct {
	// Metrics are metric name prefixes; "*" is every metric (Config wants
	// it alone).
	Metrics []string
	// PushInterval is how often clients push.
	PushInterval time.Duration
}

func (s Subscription) equal(o Subscription) bool {
	return s.PushInterval == o.PushInterval && slices.Equal(s.Metrics, o.Metrics)
}

// effective is the subscription of a client instance, as Kafka's
// createClientInstance makes it: Tollgate's own with those of the named
// subscriptions the client matched — the union of their metrics, the
// shortest of their intervals. Instances that matched the same named
// subscriptions share one.
type effective struct {
	names     []string // of the named subscriptions matched, sorted
	requested []string // RequestedMetrics
	interval  time.Duration
	crc       uint32 // of requested and interval: subscriptionID
}

func newEffective(base Subscription, matched []*ClientSubscription) *effective {
	e := &effective{interval: base.PushInterval}
	all := slices.Contains(base.Metrics, "*")
	metrics := slices.Clone(base.Metrics)
	for _, s := range matched {
		e.names = append(e.names, s.Name)
		all = all || slices.Contains(s.Metrics, "*")
		metrics = append(metrics, s.Metrics...)
		e.interval = min(e.interval, s.Interval)
	}
	// RequestedMetrics asks for every metric with one empty prefix
	// rather than Kafka's "*": Java clients and librdkafka read "*" alone
	// as every metric and franz-go does not, while all three match every
	// name against the prefix "".
	if all {
		e.requested = []string{""}
	} else {
		slices.Sort(metrics)
		e.requested = slices.Compact(metrics)
	}
	e.crc = crc32.Checksum([]byte(strings.Join(e.requested, "\x00")+"\x00"+strconv.FormatInt(e.interval.Milliseconds(), 10)),
		crc32.MakeTable(crc32.Castagnoli))
	return e
}

// Options configure a Manager (Config.Options gives them with defaults).
type Options struct {
	Subscription Subscription
	// MaxBytes bounds a push's metrics, compressed and decompressed.
	MaxBytes int
	// MaxClientInstances bounds the client instances tracked; beyond it
	// the least recently seen is evicted.
	MaxClientInstances int
	// MaxSeries bounds the (user, client-id) series; beyond it the least
	// recently pushed is evicted.
	MaxSeries int
}

// minExpiry is Kafka's client instance expiry (ClientMetricsManager's
// cache expiry): an instance that sends nothing for the longer of this
// and three push intervals is forgotten.
const minExpiry = time.Minute

// Manager is Tollgate's side of KIP-714, as Kafka's ClientMetricsManager
// is a broker's: it answers GetTelemetrySubscriptions and PushTelemetry
// with Kafka's semantics and error codes, and keeps the chosen metrics of
// the last push of every client instance, combined per (user, client-id)
// series.
//
// Each client instance is asked for Tollgate's own Subscription and for
// those of the named client-metrics subscriptions (SetClientSubscriptions)
// that match the client, matched when the instance is made, and made
// again — matched again, a new subscription id — at its next request once
// either changed, as Kafka's ClientMetricsManager does. Kafka matches with
// the client of the connection the instance was made on, and forgets the
// instance when that connection closes; Tollgate, which keeps instances
// past their connection, matches with the client of the request that
// makes or re-makes it. Matching is linear in the named subscriptions, per
// instance made; the control plane bounds them.
//
// Everything it holds is bounded: client instances by
// MaxClientInstances (least recently seen evicted first; idle ones
// expire), series by MaxSeries (least recently pushed evicted first).
// Instance ids are per user: a client naming another user's instance id
// gets an instance of its own, and can neither read nor disturb the
// other's. Time is passed in.
type Manager struct {
	dec       *decoder
	maxBytes  int
	maxInst   int
	maxSeries int

	mu         sync.Mutex
	sub        Subscription
	named      []ClientSubscription // sorted by name
	subVersion int                  // changes with sub and named
	effs       map[string]*effective
	inst       map[instanceKey]*instance
	instLRU    list.List // of *instance, most recently seen first
	series     map[SeriesKey]*series
	seriesLRU  list.List // of *series, most recently pushed first
	stats      counters
	requests   map[requestKey]uint64
}

type counters struct {
	evictedInstances, expiredInstances, evictedSeries uint64
}

type requestKey struct {
	api  int16
	code int16
}

type instanceKey struct {
	user string
	id   [16]byte
}

// instance is one client instance (ClientMetricsInstance).
type instance struct {
	key         instanceKey
	subID       int32
	subVersion  int
	eff         *effective
	interval    time.Duration // eff's
	lastGet     time.Time     // zero: never
	lastPush    time.Time
	seen        time.Time // last request: expiry
	terminating bool
	lastErr     int16
	series      *series // holding this instance's last sample, or nil
	elem        *list.Element
}

// SeriesKey names a series: the principal and client-id of the
// connections the pushes came on, as Kafka reads them — as UTF-8, each
// run of invalid bytes replaced by U+FFFD (Java's decoding of the request
// header) — so that every series can be a Prometheus label set, and
// client-ids that differ only in invalid bytes are one series, as they are
// one client to Kafka.
type SeriesKey struct {
	User, ClientID string
}

func seriesKey(user, clientID string) SeriesKey {
	return SeriesKey{strings.ToValidUTF8(user, "\uFFFD"), strings.ToValidUTF8(clientID, "\uFFFD")}
}

type series struct {
	key     SeriesKey
	last    time.Time
	samples map[*instance]sample
	elem    *list.Element
}

// sample is an instance's last push, and the named subscriptions it was
// pushed for.
type sample struct {
	vals Values
	subs []string
}

// New makes a Manager.
func New(o Options) *Manager {
	o.MaxBytes = max(o.MaxBytes, 1)
	m := &Manager{
		dec:       newDecoder(o.MaxBytes),
		maxBytes:  o.MaxBytes,
		maxInst:   max(o.MaxClientInstances, 1),
		maxSeries: max(o.MaxSeries, 1),
		effs:      map[string]*effective{},
		inst:      map[instanceKey]*instance{},
		series:    map[SeriesKey]*series{},
		requests:  map[requestKey]uint64{},
	}
	m.setSubscription(o.Subscription)
	return m
}

// SetSubscription changes Tollgate's own subscription: each instance gets
// the new subscription id and interval at its next request (a push with
// the old id is answered UNKNOWN_SUBSCRIPTION_ID, and the client asks
// again at once).
func (m *Manager) SetSubscription(s Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !s.equal(m.sub) {
		m.setSubscription(s)
		m.subVersion++
	}
}

func (m *Manager) setSubscription(s Subscription) {
	s.Metrics = slices.Clone(s.Metrics)
	if s.PushInterval <= 0 {
		s.PushInterval = DefaultPushInterval
	}
	m.sub = s
	clear(m.effs)
}

// SetClientSubscriptions replaces the named client-metrics subscriptions,
// those ParseClientSubscription reads: when they changed, each instance is
// matched again and gets its new subscription id, metrics and interval at
// its next request, as after SetSubscription. Of two with one name the
// last is kept; an Interval of zero is Kafka's default, one outside Kafka's
// bounds is brought within them; a match pattern whose regex does not
// compile matches no client.
func (m *Manager) SetClientSubscriptions(subs []ClientSubscription) {
	set := make([]ClientSubscription, 0, len(subs))
	for _, s := range subs {
		set = append(set, normalized(s))
	}
	slices.SortStableFunc(set, func(a, b ClientSubscription) int { return strings.Compare(a.Name, b.Name) })
	set = lastOfEach(set, func(s ClientSubscription) string { return s.Name })
	m.mu.Lock()
	defer m.mu.Unlock()
	if slices.EqualFunc(set, m.named, ClientSubscription.equal) {
		return
	}
	m.named = set
	clear(m.effs)
	m.subVersion++
}

// normalized is a copy of s as the Manager keeps it.
func normalized(s ClientSubscription) ClientSubscription {
	s = s.clone()
	switch {
	case s.Interval == 0:
		s.Interval = DefaultClientSubscriptionInterval
	case s.Interval < MinPushInterval:
		s.Interval = MinPushInterval
	case s.Interval > MaxPushInterval:
		s.Interval = MaxPushInterval
	}
	slices.SortStableFunc(s.Match, func(a, b MatchPattern) int { return strings.Compare(a.Attr, b.Attr) })
	s.Match = lastOfEach(s.Match, func(p MatchPattern) string { return p.Attr })
	for i := range s.Match {
		p := &s.Match[i]
		if p.re == nil || p.re.String() != `\A(?:`+p.Regex+`)\z` {
			p.re, _ = compileMatch(p.Regex) // nil if not: matches nothing
		}
	}
	return s
}

// lastOfEach keeps the last of each run of elements of sorted s with one
// key.
func lastOfEach[T any](s []T, key func(T) string) []T {
	out := s[:0]
	for i, x := range s {
		if i+1 < len(s) && key(s[i+1]) == key(x) {
			continue
		}
		out = append(out, x)
	}
	return out
}

// ClientSubscriptions returns the named client-metrics subscriptions,
// sorted by name.
func (m *Manager) ClientSubscriptions() []ClientSubscription {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ClientSubscription, len(m.named))
	for i, s := range m.named {
		out[i] = s.clone()
	}
	return out
}

// Subscription returns Tollgate's own subscription.
func (m *Manager) Subscription() Subscription {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sub
	s.Metrics = slices.Clone(s.Metrics)
	return s
}

// subscriptionID is, as Kafka's, a checksum of the instance's
// subscription (metrics and interval, crc) mixed with the instance id: it
// changes when the subscription does, and is the same after a restart, so
// that a client pushing to a restarted Tollgate with unchanged
// subscriptions goes on without asking again.
func subscriptionID(crc uint32, id [16]byte) int32 {
	h := crc
	for i := 0; i < 16; i += 4 {
		h ^= uint32(id[i])<<24 | uint32(id[i+1])<<16 | uint32(id[i+2])<<8 | uint32(id[i+3])
	}
	return int32(h)
}

// reserved are Kafka's reserved Uuids (Uuid.RESERVED): zero and one.
func reserved(id [16]byte) bool {
	return id == [16]byte{} || id == [16]byte{15: 1}
}

// GetSubscriptions answers GetTelemetrySubscriptions for client c: a zero
// instance id gets a new one; an instance asking again before its push
// interval has passed since its last request is refused
// THROTTLING_QUOTA_EXCEEDED, unless its last push was refused for an
// unknown subscription or compression.
func (m *Manager) GetSubscriptions(req *kmsg.GetTelemetrySubscriptionsRequest, c Client, now time.Time) *kmsg.GetTelemetrySubscriptionsResponse {
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	id := req.ClientInstanceID
	if id == [16]byte{} {
		id = m.newID(c.User)
	}
	in := m.instance(instanceKey{c.User, id}, c, now)
	if !in.mayGet(now) && in.lastErr != kerr.UnknownSubscriptionID.Code && in.lastErr != kerr.UnsupportedCompressionType.Code {
		resp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
		m.count(req.Key(), resp.ErrorCode)
		return resp
	}
	// Beyond Kafka, which records the time of a GetTelemetrySubscriptions
	// only when an interval has passed: one answered at once after an
	// unknown subscription counts too, so that the push that follows it
	// (half an interval on, jittered) is accepted as the first after a
	// GetTelemetrySubscriptions rather than refused as too soon after
	// the refused push.
	in.lastGet = now
	in.lastErr = 0
	resp.ClientInstanceID = id
	resp.SubscriptionID = in.subID
	resp.AcceptedCompressionTypes = slices.Clone(acceptedCompression)
	resp.PushIntervalMillis = int32(in.interval.Milliseconds())
	resp.TelemetryMaxBytes = int32(m.maxBytes)
	resp.DeltaTemporality = true
	resp.RequestedMetrics = slices.Clone(in.eff.requested)
	m.count(req.Key(), 0)
	return resp
}

// Push answers PushTelemetry for client c, and keeps the chosen metrics of
// an accepted push in the (c.User, c.ClientID) series. Kafka's checks, in Kafka's order: a reserved
// instance id is INVALID_REQUEST; a push after a terminating one
// INVALID_REQUEST; a push sooner than the push interval after the last one
// (unless a GetTelemetrySubscriptions came in between, or it is
// terminating) THROTTLING_QUOTA_EXCEEDED; another subscription id
// UNKNOWN_SUBSCRIPTION_ID; an unknown compression
// UNSUPPORTED_COMPRESSION_TYPE; more than MaxBytes TELEMETRY_TOO_LARGE.
// Then the metrics are decompressed and decoded: past MaxBytes
// decompressed is TELEMETRY_TOO_LARGE, anything unreadable INVALID_RECORD.
func (m *Manager) Push(req *kmsg.PushTelemetryRequest, c Client, now time.Time) *kmsg.PushTelemetryResponse {
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	if reserved(req.ClientInstanceID) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		m.mu.Lock()
		m.count(req.Key(), resp.ErrorCode)
		m.mu.Unlock()
		return resp
	}
	key := instanceKey{c.User, req.ClientInstanceID}
	m.mu.Lock()
	m.expire(now)
	in := m.instance(key, c, now)
	code := m.validatePush(in, req, now)
	subs := in.eff.names // of the subscription the push was accepted for
	// As Kafka: the request's terminating flag is the instance's from
	// now on, whatever the answer.
	in.terminating = req.Terminating
	if code != 0 {
		in.lastErr = code
		m.count(req.Key(), code)
		m.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	m.mu.Unlock()

	// Decoded outside the lock: pushes of other clients go on meanwhile.
	var vals Values
	var err error
	if len(req.Metrics) > 0 {
		vals, err = m.dec.decode(req.Metrics, req.CompressionType)
	}
	switch {
	case err == nil:
	case err == ErrTooLarge:
		code = kerr.TelemetryTooLarge.Code
	default:
		code = kerr.InvalidRecord.Code
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.count(req.Key(), code)
	resp.ErrorCode = code
	in, ok := m.inst[key]
	if !ok {
		return resp // evicted meanwhile: its metrics go with it
	}
	in.lastErr = code
	if code == 0 && !vals.Empty() {
		m.store(in, seriesKey(c.User, c.ClientID), sample{vals, subs}, now)
	}
	return resp
}

// validatePush is Kafka's validatePushRequest; 0 when the push may be
// decoded.
func (m *Manager) validatePush(in *instance, req *kmsg.PushTelemetryRequest, now time.Time) int16 {
	switch {
	case in.terminating:
		return kerr.InvalidRequest.Code
	case !in.mayPush(now) && !req.Terminating:
		return kerr.ThrottlingQuotaExceeded.Code
	case req.SubscriptionID != in.subID:
		return kerr.UnknownSubscriptionID.Code
	case !supportedCompression(req.CompressionType):
		return kerr.UnsupportedCompressionType.Code
	case len(req.Metrics) > m.maxBytes:
		return kerr.TelemetryTooLarge.Code
	}
	return 0
}

// mayGet is Kafka's maybeUpdateGetRequestTimestamp: a push interval must
// have passed since the instance's last request.
func (in *instance) mayGet(now time.Time) bool {
	last := in.lastGet
	if in.lastPush.After(last) {
		last = in.lastPush
	}
	if !last.IsZero() && now.Sub(last) < in.interval {
		return false
	}
	in.lastGet = now
	return true
}

// mayPush is Kafka's maybeUpdatePushRequestTimestamp: the first push after
// a GetTelemetrySubscriptions is accepted whenever it comes (clients
// jitter it between 0.5 and 1.5 intervals); later ones a push interval
// apart.
func (in *instance) mayPush(now time.Time) bool {
	ok := in.lastGet.After(in.lastPush) || in.lastPush.IsZero() || now.Sub(in.lastPush) >= in.interval
	if ok {
		in.lastPush = now
	}
	return ok
}

// newID is a new instance id for user: random, neither reserved nor in
// use.
func (m *Manager) newID(user string) [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		if _, used := m.inst[instanceKey{user, id}]; !used && !reserved(id) {
			return id
		}
	}
}

// instance returns the instance of key, made (evicting the least recently
// seen at the cap) when it is unknown — a push from a client whose
// instance Tollgate forgot (a restart, an eviction) is served as Kafka
// serves one from a broker that never saw it — and re-made when the
// subscriptions changed since its last request; made or re-made, it is
// matched with client c. It is marked seen now.
func (m *Manager) instance(key instanceKey, c Client, now time.Time) *instance {
	in, ok := m.inst[key]
	if !ok {
		for len(m.inst) >= m.maxInst {
			m.drop(m.instLRU.Back().Value.(*instance))
			m.stats.evictedInstances++
		}
		in = &instance{key: key}
		in.elem = m.instLRU.PushFront(in)
		m.inst[key] = in
		m.subscribe(in, c)
	} else if in.subVersion != m.subVersion {
		// Kafka makes a new instance with the same id: its timestamps,
		// error and terminating flag start afresh.
		*in = instance{key: in.key, series: in.series, elem: in.elem}
		m.subscribe(in, c)
	}
	in.seen = now
	m.instLRU.MoveToFront(in.elem)
	return in
}

// subscribe gives in the subscription of client c, as Kafka's
// createClientInstance.
func (m *Manager) subscribe(in *instance, c Client) {
	in.eff = m.effective(c, in.key.id)
	in.subID = subscriptionID(in.eff.crc, in.key.id)
	in.subVersion = m.subVersion
	in.interval = in.eff.interval
}

// effective is the subscription of client c, instance id: Tollgate's own
// with the named subscriptions it matches. They are kept by the named
// subscriptions matched until those change (no more of them than the cap
// on instances).
func (m *Manager) effective(c Client, id [16]byte) *effective {
	var key []byte
	var matched []*ClientSubscription
	for i := range m.named {
		if m.named[i].matches(c, id) {
			key = binary.AppendUvarint(key, uint64(i))
			matched = append(matched, &m.named[i])
		}
	}
	if e := m.effs[string(key)]; e != nil {
		return e
	}
	if len(m.effs) >= m.maxInst {
		clear(m.effs)
	}
	e := newEffective(m.sub, matched)
	m.effs[string(key)] = e
	return e
}

// expire forgets the instances that have sent nothing for the longer of a
// minute and three push intervals (Kafka's expiry), oldest first.
func (m *Manager) expire(now time.Time) {
	for e := m.instLRU.Back(); e != nil; e = m.instLRU.Back() {
		in := e.Value.(*instance)
		if now.Sub(in.seen) < max(minExpiry, 3*in.interval) {
			return
		}
		m.drop(in)
		m.stats.expiredInstances++
	}
}

// drop forgets an instance and its sample.
func (m *Manager) drop(in *instance) {
	m.unstore(in)
	m.instLRU.Remove(in.elem)
	delete(m.inst, in.key)
}

// store makes smp the last sample of in, in series k (evicting the least
// recently pushed series at the cap).
func (m *Manager) store(in *instance, k SeriesKey, smp sample, now time.Time) {
	if in.series != nil && in.series.key != k {
		m.unstore(in) // the client's connection now has another client-id
	}
	s := in.series
	if s == nil {
		if s = m.series[k]; s == nil {
			for len(m.series) >= m.maxSeries {
				m.evictSeries(m.seriesLRU.Back().Value.(*series))
				m.stats.evictedSeries++
			}
			s = &series{key: k, samples: map[*instance]sample{}}
			s.elem = m.seriesLRU.PushFront(s)
			m.series[k] = s
		}
		in.series = s
	}
	s.samples[in] = smp
	s.last = now
	m.seriesLRU.MoveToFront(s.elem)
}

// unstore removes in's sample from its series, and the series once empty.
func (m *Manager) unstore(in *instance) {
	s := in.series
	if s == nil {
		return
	}
	in.series = nil
	delete(s.samples, in)
	if len(s.samples) == 0 {
		m.seriesLRU.Remove(s.elem)
		delete(m.series, s.key)
	}
}

func (m *Manager) evictSeries(s *series) {
	for in := range s.samples {
		in.series = nil
	}
	m.seriesLRU.Remove(s.elem)
	delete(m.series, s.key)
}

func (m *Manager) count(api, code int16) { m.requests[requestKey{api, code}]++ }

// Series is one (user, client-id) series: the last push of each of its
// client instances, combined — averages by their mean, maxima by the
// largest.
type Series struct {
	User, ClientID string
	// Instances is how many client instances' last pushes it holds.
	Instances int
	// LastPush is when the last of them pushed.
	LastPush time.Time
	// Subscriptions are the named client-metrics subscriptions those
	// instances matched when they pushed, sorted.
	Subscriptions []string
	Values        Values
}

// Series returns the live series at now, most recently pushed first.
func (m *Manager) Series(now time.Time) []Series {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	out := make([]Series, 0, len(m.series))
	for e := m.seriesLRU.Front(); e != nil; e = e.Next() {
		s := e.Value.(*series)
		out = append(out, s.combined())
	}
	return out
}

func (s *series) combined() Series {
	out := Series{User: s.key.User, ClientID: s.key.ClientID, Instances: len(s.samples), LastPush: s.last}
	var n [NumMetrics]int
	for _, smp := range s.samples {
		out.Subscriptions = append(out.Subscriptions, smp.subs...)
		for mt := Metric(0); mt < NumMetrics; mt++ {
			if x, ok := smp.vals.Get(mt); ok {
				out.Values.add(mt, x, &n)
			}
		}
	}
	slices.Sort(out.Subscriptions)
	out.Subscriptions = slices.Compact(out.Subscriptions)
	return out
}

// RequestCount is how many requests of one API got one error code.
type RequestCount struct {
	// API is 71 (GetTelemetrySubscriptions) or 72 (PushTelemetry).
	API       int16
	ErrorCode int16
	N         uint64
}

// Stats are the Manager's counts.
type Stats struct {
	// Series and ClientInstances are held now.
	Series, ClientInstances int
	// EvictedSeries and EvictedInstances were dropped at their caps;
	// ExpiredInstances after sending nothing for their expiry.
	EvictedSeries, EvictedInstances, ExpiredInstances uint64
	// Requests are the answers given, by API and error code.
	Requests []RequestCount
}

// Stats returns the counts at now.
func (m *Manager) Stats(now time.Time) Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	st := Stats{Series: len(m.series), ClientInstances: len(m.inst),
		EvictedSeries: m.stats.evictedSeries, EvictedInstances: m.stats.evictedInstances,
		ExpiredInstances: m.stats.expiredInstances}
	for k, n := range m.requests {
		st.Requests = append(st.Requests, RequestCount{API: k.api, ErrorCode: k.code, N: n})
	}
	slices.SortFunc(st.Requests, func(a, b RequestCount) int {
		if a.API != b.API {
			return int(a.API) - int(b.API)
		}
		return int(a.ErrorCode) - int(b.ErrorCode)
	})
	return st
}

// MaxSeries is the cap on series.
func (m *Manager) MaxSeries() int { return m.maxSeries }
