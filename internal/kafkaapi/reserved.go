package kafkaapi

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// Tollgate keeps state in topics of the upstream cluster it fronts: the
// audit topic (audit.topic), the usage topic (usage.topic), and a Tollgate
// cluster's shared configuration topic (quota values, SCRAM credentials as
// Kafka formats them, API key hashes) and usage exchange topic. A tenant
// that could produce to the configuration topic through the gateway could
// grant itself any quota; one that could fetch it would read credential
// material. Tollgate is the tenants' trust boundary, so the reserved-topics
// filter keeps every request through the gateway off these topics: to a
// tenant they are topics it is not authorized for, answered as Kafka's
// KafkaApis answers one — TOPIC_AUTHORIZATION_FAILED wherever a request
// names it, absent wherever a request asked for every topic — and nothing
// of them reaches the broker. Each API's file says what its requests get.
//
// Topics named by id (Fetch v13+, Produce v13, ShareFetch, DeleteTopics
// v6+, Metadata v12+, OffsetCommit v10, TxnOffsetCommit v6) fail closed.
// An id is decided by what the upstream says it names, never by what the
// gateway has not yet heard: the ids of reserved topics and of the others
// are kept once known (a topic id is never reused, so what it names never
// changes), and an id the gateway has not seen is looked up by id
// (Deps.Topics, Metadata v12+ by topic id) before the request goes on —
// the request waits for it. An id the upstream does not know, or any id
// while the lookup fails, is answered UNKNOWN_TOPIC_ID, as a broker
// answers an id it does not know (retriable: the client refreshes its
// metadata and asks again); nothing unknown reaches the broker. So there
// is no window after Tollgate creates its topic, or an operator recreates
// one, in which its new id passes. Answers are checked too: a Fetch or
// ShareFetch answer that carries a reserved topic (a partition already in
// a broker's fetch session is not named again) has its partitions
// replaced by TOPIC_AUTHORIZATION_FAILED; a streamed one closes the
// session before any byte of that topic is written.

// The filter stands after the quota filter, nearest the broker: the Fetch
// it rewrites carries the quota filter's max_bytes clamp (patched in place
// before it decodes the request); the refused topics are charged as Kafka
// charges a request's unauthorized topics (a Produce by its whole size);
// and a request answered here entirely gives back what the quota filter
// reserved for it. With no reserved topic the chain has no such filter.

// reservedIDTimeout bounds one lookup of unknown ids; lookupMaxIDs is
// the most ids one request has looked up (the rest are answered
// UNKNOWN_TOPIC_ID, and looked up when the client asks again); maxKnownIDs
// bounds the ids kept as other topics' (past it, they are looked up each
// time).
const (
	reservedIDTimeout = 5 * time.Second
	lookupMaxIDs      = 1000
	maxKnownIDs       = 1 << 18
)

// TopicIDs names topics by their ids on the upstream cluster
// (proxy.Gateway.TopicNamesOf); ids the upstream does not know are absent
// from the result.
type TopicIDs interface {
	TopicNamesOf(ctx context.Context, ids [][16]byte) (map[[16]byte]string, error)
}

// topicAuthFailed is Kafka's message for TOPIC_AUTHORIZATION_FAILED
// (Errors.TOPIC_AUTHORIZATION_FAILED.message()), where Kafka sends one.
const topicAuthFailed = "Topic authorization failed."

// reservedTopics is the filter; one per gateway.
type reservedTopics struct {
	names     map[string]bool
	list      []string
	nameBytes [][]byte
	topics    TopicIDs // nil: ids only from the answers that pass
	log       *slog.Logger

	ids    atomic.Pointer[reservedIDSet] // the reserved topics' ids known
	others knownIDs                      // ids known to be other topics'
	lookup sync.Mutex                    // one lookup of unknown ids at a time
	// warned: the last lookup failed and was logged (once, until one
	// succeeds).
	warned atomic.Bool
	// allow and inAnswer are allowTopic and answerTopic, bound once, so
	// that a verdict carries them without allocating.
	allow, inAnswer func(name []byte, id [16]byte) bool
}

// reservedIDSet is the reserved topics' ids known, learnt from lookups
// and from the answers that pass; replaced whole, never changed, only
// grown (an id is never reused).
type reservedIDSet struct {
	ids []reservedID
}

type reservedID struct {
	id   [16]byte
	name string
}

// knownIDs is the ids known to name topics that are not reserved.
type knownIDs struct {
	mu sync.RWMutex
	m  map[[16]byte]struct{}
}

func (k *knownIDs) has(id [16]byte) bool {
	k.mu.RLock()
	_, ok := k.m[id]
	k.mu.RUnlock()
	return ok
}

func (k *knownIDs) add(id [16]byte) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[[16]byte]struct{}{}
	}
	if len(k.m) < maxKnownIDs {
		k.m[id] = struct{}{}
	}
	k.mu.Unlock()
}

func newReservedTopics(names []string, topics TopicIDs, log *slog.Logger) *reservedTopics {
	f := &reservedTopics{names: map[string]bool{}, topics: topics, log: log}
	for _, n := range names {
		if n == "" || f.names[n] {
			continue
		}
		f.names[n] = true
		f.list = append(f.list, n)
		f.nameBytes = append(f.nameBytes, []byte(n))
	}
	f.ids.Store(&reservedIDSet{})
	f.allow, f.inAnswer = f.allowTopic, f.answerTopic
	return f
}

func (*reservedTopics) Name() string { return "reserved-topics" }

func (*reservedTopics) Keys() []int16 {
	return []int16{
		int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.ListOffsets), int16(kmsg.Metadata), int16(kmsg.OffsetCommit),
		int16(kmsg.CreateTopics), int16(kmsg.DeleteTopics), int16(kmsg.DeleteRecords), int16(kmsg.OffsetForLeaderEpoch),
		int16(kmsg.AddPartitionsToTxn), int16(kmsg.TxnOffsetCommit), int16(kmsg.DescribeConfigs), int16(kmsg.AlterConfigs),
		int16(kmsg.CreatePartitions), int16(kmsg.IncrementalAlterConfigs), int16(kmsg.DescribeProducers),
		int16(kmsg.DescribeTopicPartitions), int16(kmsg.ShareFetch),
	}
}

// OnRequest refuses the reserved topics a request names. Produce and
// Fetch are read in place and decoded only when they name one.
func (f *reservedTopics) OnRequest(_ proxy.Conn, r *proxy.Request) proxy.Verdict {
	switch r.Key {
	case int16(kmsg.Produce):
		return f.produce(r)
	case int16(kmsg.Fetch):
		return f.fetch(r)
	}
	kr, err := r.Decode()
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	switch k := kr.(type) {
	case *kmsg.ListOffsetsRequest:
		return f.listOffsets(k)
	case *kmsg.MetadataRequest:
		return f.metadata(r, k)
	case *kmsg.OffsetCommitRequest:
		return f.offsetCommit(r, k)
	case *kmsg.CreateTopicsRequest:
		return f.createTopics(k)
	case *kmsg.DeleteTopicsRequest:
		return f.deleteTopics(r, k)
	case *kmsg.DeleteRecordsRequest:
		return f.deleteRecords(k)
	case *kmsg.OffsetForLeaderEpochRequest:
		return f.offsetForLeaderEpoch(k)
	case *kmsg.AddPartitionsToTxnRequest:
		return f.addPartitionsToTxn(k)
	case *kmsg.TxnOffsetCommitRequest:
		return f.txnOffsetCommit(r, k)
	case *kmsg.DescribeConfigsRequest:
		return f.describeConfigs(k)
	case *kmsg.AlterConfigsRequest:
		return f.alterConfigs(k)
	case *kmsg.CreatePartitionsRequest:
		return f.createPartitions(k)
	case *kmsg.IncrementalAlterConfigsRequest:
		return f.incrementalAlterConfigs(k)
	case *kmsg.DescribeProducersRequest:
		return f.describeProducers(k)
	case *kmsg.DescribeTopicPartitionsRequest:
		return f.describeTopicPartitions(k)
	case *kmsg.ShareFetchRequest:
		return f.shareFetch(r, k)
	}
	return proxy.Verdict{}
}

// OnResponse takes the reserved topics out of the answers that list every
// topic, learning their ids on the way, and out of the fetch answers,
// whose sessions may hold a topic no request names again.
func (f *reservedTopics) OnResponse(_ proxy.Conn, r *proxy.Response) error {
	switch r.Req.Key {
	case int16(kmsg.Metadata), int16(kmsg.DescribeTopicPartitions):
		if !f.mentioned(r.Buf.B) {
			return nil
		}
	case int16(kmsg.Fetch), int16(kmsg.ShareFetch):
		if !f.carried(r) {
			return nil
		}
	default:
		return nil
	}
	return r.Edit(func(resp kmsg.Response) {
		switch t := resp.(type) {
		case *kmsg.MetadataResponse:
			f.scrubMetadata(t)
		case *kmsg.DescribeTopicPartitionsResponse:
			f.scrubDescribeTopicPartitions(t)
		case *kmsg.FetchResponse:
			f.scrubFetch(t, r.Req.Version >= 13)
		case *kmsg.ShareFetchResponse:
			f.scrubShareFetch(t)
		}
	})
}

// carried reports whether an encoded Fetch or ShareFetch answer r carries
// a reserved topic: its topics read in place (wire's walk, which skips the
// records by their lengths); an answer the walk cannot read is decoded.
func (f *reservedTopics) carried(r *proxy.Response) bool {
	p := r.Buf.B[4:]
	off, err := wire.ResponseBodyOffset(p, r.Req.Key, r.Req.Flexible)
	if err != nil {
		return true
	}
	var w wire.FetchResponseWalk
	share := r.Req.Key == int16(kmsg.ShareFetch)
	if share {
		w.StartShare(p[off:], r.Req.Version)
	} else {
		w.Start(p[off:], r.Req.Version)
	}
	byID := share || r.Req.Version >= 13
	for w.NextTopic() {
		name, id := w.Topic()
		if byID && f.refusedTopic("", id, true) || !byID && f.names[string(name)] {
			return true
		}
		for w.NextPartition() {
		}
	}
	return !w.Ok()
}

// refusedTopic reports whether a topic of a fetch answer is reserved.
func (f *reservedTopics) refusedTopic(name string, id [16]byte, byID bool) bool {
	if byID {
		_, hit := f.ids.Load().lookup(id)
		return hit
	}
	return f.names[name]
}

// mentioned reports whether an encoded answer may name a reserved topic:
// most answers do not, and are not decoded.
func (f *reservedTopics) mentioned(b []byte) bool {
	for _, n := range f.nameBytes {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// named reports whether name is reserved.
func (f *reservedTopics) named(name string) bool { return f.names[name] }

// idCode decides a topic named by id: 0 (another topic's), taf (a
// reserved topic's) or, when it is not known (known reports it),
// unknownID until it is looked up.
func (f *reservedTopics) idCode(id [16]byte) (code int16, known bool) {
	if id == ([16]byte{}) {
		return 0, true
	}
	if _, ok := f.ids.Load().lookup(id); ok {
		return taf, true
	}
	if f.topics == nil || f.others.has(id) {
		return 0, true
	}
	return unknownID, false
}

// lookUp asks the upstream what the unknown ids name, one lookup at a
// time, and returns each id's code (idCode's). What the upstream names is
// kept; an id it does not know, or every id when it cannot be asked, is
// unknownID for this request only.
func (f *reservedTopics) lookUp(ids [][16]byte) map[[16]byte]int16 {
	f.lookup.Lock()
	defer f.lookup.Unlock()
	out := make(map[[16]byte]int16, len(ids))
	var ask [][16]byte
	for _, id := range ids {
		if _, dup := out[id]; dup {
			continue
		}
		code, known := f.idCode(id)
		out[id] = code
		if !known && len(ask) < lookupMaxIDs {
			ask = append(ask, id)
		}
	}
	if len(ask) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), reservedIDTimeout)
	defer cancel()
	m, err := f.topics.TopicNamesOf(ctx, ask)
	if err != nil {
		if f.warned.CompareAndSwap(false, true) {
			f.log.Warn("cannot look up the topic ids clients name; they are answered UNKNOWN_TOPIC_ID until the lookup succeeds",
				"ids", len(ask), "err", err)
		}
		return out
	}
	f.warned.Store(false)
	for _, id := range ask {
		name, ok := m[id]
		switch {
		case !ok:
		case f.names[name]:
			f.learn(name, id)
			out[id] = taf
		default:
			f.others.add(id)
			out[id] = 0
		}
	}
	return out
}

// learn records a reserved topic's id seen in an answer.
func (f *reservedTopics) learn(name string, id [16]byte) {
	if id == ([16]byte{}) || !f.names[name] {
		return
	}
	for {
		old := f.ids.Load()
		if _, ok := old.lookup(id); ok {
			return
		}
		next := *old
		next.ids = append(append([]reservedID(nil), old.ids...), reservedID{id: id, name: name})
		if f.ids.CompareAndSwap(old, &next) {
			return
		}
	}
}

// lookup returns the reserved topic whose id is id.
func (s *reservedIDSet) lookup(id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return "", false
	}
	for _, r := range s.ids {
		if r.id == id {
			return r.name, true
		}
	}
	return "", false
}

// allowTopic is the check of a streamed Produce's topics
// (proxy.Verdict.Topics): an unknown id is looked up first.
func (f *reservedTopics) allowTopic(name []byte, id [16]byte) bool {
	if name != nil {
		return !f.names[string(name)]
	}
	code, known := f.idCode(id)
	if !known {
		code = f.lookUp([][16]byte{id})[id]
	}
	return code == 0
}

// answerTopic is the check of a streamed Fetch answer's topics
// (proxy.Verdict.Topics): what the broker sends of a topic its fetch
// session holds.
func (f *reservedTopics) answerTopic(name []byte, id [16]byte) bool {
	if name != nil {
		return !f.names[string(name)]
	}
	_, hit := f.ids.Load().lookup(id)
	return !hit
}

// walkedHit reports whether a topic read in place must be decided by the
// decoded request: a reserved topic, by its id when byID (or an id not
// known yet), else by its name.
func (f *reservedTopics) walkedHit(byID bool, name []byte, id [16]byte) bool {
	if byID {
		code, known := f.idCode(id)
		return code != 0 || !known
	}
	return f.names[string(name)]
}

// refusedBy is a request's test of its topics: by name, or by id (the
// request's unknown ids looked up at most once, together when prepared).
type refusedBy struct {
	f     *reservedTopics
	codes map[[16]byte]int16 // this request's lookups
}

func (f *reservedTopics) by() *refusedBy { return &refusedBy{f: f} }

func (b *refusedBy) name(n string) bool { return b.f.named(n) }

// prepare looks up, in one lookup, the unknown ones of the ids the
// request names.
func (b *refusedBy) prepare(ids [][16]byte) {
	var ask [][16]byte
	for _, id := range ids {
		if _, known := b.f.idCode(id); !known {
			ask = append(ask, id)
		}
	}
	if len(ask) > 0 {
		b.codes = b.f.lookUp(ask)
	}
}

// idCode is the code a topic named by id is answered (0: it passes).
func (b *refusedBy) idCode(id [16]byte) int16 {
	if c, ok := b.codes[id]; ok {
		return c
	}
	code, known := b.f.idCode(id)
	if known {
		return code
	}
	m := b.f.lookUp([][16]byte{id})
	if b.codes == nil {
		b.codes = m
	} else {
		b.codes[id] = m[id]
	}
	return m[id]
}

func (b *refusedBy) id(id [16]byte) bool { return b.idCode(id) != 0 }

// either tests a topic named by name, or by id when version names topics
// by id (the name is then empty).
func (b *refusedBy) either(name string, id [16]byte, byID bool) bool {
	if byID {
		return b.id(id)
	}
	return b.name(name)
}

// code is what a refused topic is answered: UNKNOWN_TOPIC_ID for an id
// the upstream does not name (or could not be asked), else
// TOPIC_AUTHORIZATION_FAILED.
func (b *refusedBy) code(id [16]byte, byID bool) int16 {
	if byID && id != ([16]byte{}) {
		if c := b.idCode(id); c != 0 {
			return c
		}
	}
	return taf
}

// split divides xs into the items kept (a new slice: xs is the shared
// decoded request's) and the items refused.
func split[T any](xs []T, refused func(*T) bool) (kept, out []T) {
	kept = xs[:0:0]
	for i := range xs {
		if refused(&xs[i]) {
			out = append(out, xs[i])
		} else {
			kept = append(kept, xs[i])
		}
	}
	return kept, out
}

// refuse takes the items refused out of a request's list xs (its topics,
// resources or transactions): none refused, the request passes untouched;
// otherwise the others are forwarded — or, none left, the request is
// answered by Tollgate — and answer adds each refused item's answer to
// the response.
func refuse[T any, R kmsg.Response](req kmsg.Request, xs *[]T, refused func(*T) bool, answer func(R, T)) proxy.Verdict {
	return takeLocal(req, xs, refused, func(x T) T { return x }, answer)
}

// reservedResource reports whether a config resource is a reserved topic.
func (f *reservedTopics) reservedResource(typ kmsg.ConfigResourceType, name string) bool {
	return typ == kmsg.ConfigResourceTypeTopic && f.named(name)
}

// forwardAlways forwards req with its refused items taken out and merges
// their answers into the upstream's, even when nothing is left: the
// fetch APIs' sessions live on the broker.
func forwardAlways(req kmsg.Request, merge func(kmsg.Response)) proxy.Verdict {
	return proxy.Verdict{Forward: req, Merge: merge}
}

// taf is TOPIC_AUTHORIZATION_FAILED's code; unknownID UNKNOWN_TOPIC_ID's.
var (
	taf       = kerr.TopicAuthorizationFailed.Code
	unknownID = kerr.UnknownTopicID.Code
)
