package telemetry

import (
	"container/list"
	"crypto/rand"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Subscription is what every client is asked for. Kafka matches
// subscriptions to clients by their client-id, software and address;
// Tollgate has one, for every client.
type Subscription struct {
	// Metrics are metric name prefixes; "*" alone is every metric.
	Metrics []string
	// PushInterval is how often clients push.
	PushInterval time.Duration
}

func (s Subscription) equal(o Subscription) bool {
	return s.PushInterval == o.PushInterval && slices.Equal(s.Metrics, o.Metrics)
}

// requested is RequestedMetrics on the wire. Every metric is asked for
// with one empty prefix rather than Kafka's "*": Java clients and
// librdkafka read "*" alone as every metric and franz-go does not, while
// all three match every name against the prefix "".
func (s Subscription) requested() []string {
	if len(s.Metrics) == 1 && s.Metrics[0] == "*" {
		return []string{""}
	}
	return slices.Clone(s.Metrics)
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
// series. Everything it holds is bounded: client instances by
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
	subVersion int
	subCRC     uint32
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
	interval    time.Duration
	lastGet     time.Time // zero: never
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
	samples map[*instance]Values
	elem    *list.Element
}

// New makes a Manager.
func New(o Options) *Manager {
	o.MaxBytes = max(o.MaxBytes, 1)
	m := &Manager{
		dec:       newDecoder(o.MaxBytes),
		maxBytes:  o.MaxBytes,
		maxInst:   max(o.MaxClientInstances, 1),
		maxSeries: max(o.MaxSeries, 1),
		inst:      map[instanceKey]*instance{},
		series:    map[SeriesKey]*series{},
		requests:  map[requestKey]uint64{},
	}
	m.setSubscription(o.Subscription)
	return m
}

// SetSubscription changes what clients are asked for: each instance gets
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
	m.subCRC = crc32.Checksum([]byte(strings.Join(s.requested(), "\x00")+"\x00"+strconv.FormatInt(s.PushInterval.Milliseconds(), 10)),
		crc32.MakeTable(crc32.Castagnoli))
}

// Subscription returns what clients are asked for.
func (m *Manager) Subscription() Subscription {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sub
	s.Metrics = slices.Clone(s.Metrics)
	return s
}

// subscriptionID is, as Kafka's, a checksum of the subscription (metrics
// and interval) mixed with the instance id: it changes when the
// subscription does, and is the same after a restart, so that a client
// pushing to a restarted Tollgate with an unchanged configuration goes on
// without asking again.
func (m *Manager) subscriptionID(id [16]byte) int32 {
	h := m.subCRC
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
	resp.RequestedMetrics = m.sub.requested()
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
		m.store(in, seriesKey(c.User, c.ClientID), vals, now)
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
// subscription changed since its last request. It is marked seen now.
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
		m.subscribe(in)
	} else if in.subVersion != m.subVersion {
		// Kafka makes a new instance with the same id: its timestamps,
		// error and terminating flag start afresh.
		*in = instance{key: in.key, series: in.series, elem: in.elem}
		m.subscribe(in)
	}
	in.seen = now
	m.instLRU.MoveToFront(in.elem)
	return in
}

func (m *Manager) subscribe(in *instance) {
	in.subID = m.subscriptionID(in.key.id)
	in.subVersion = m.subVersion
	in.interval = m.sub.PushInterval
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

// store makes vals the last sample of in, in series k (evicting the least
// recently pushed series at the cap).
func (m *Manager) store(in *instance, k SeriesKey, vals Values, now time.Time) {
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
			s = &series{key: k, samples: map[*instance]Values{}}
			s.elem = m.seriesLRU.PushFront(s)
			m.series[k] = s
		}
		in.series = s
	}
	s.samples[in] = vals
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
	Values   Values
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
	for _, v := range s.samples {
		for mt := Metric(0); mt < NumMetrics; mt++ {
			if x, ok := v.Get(mt); ok {
				out.Values.add(mt, x, &n)
			}
		}
	}
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
