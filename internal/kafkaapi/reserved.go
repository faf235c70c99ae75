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
// v6+, Metadata v12+, OffsetCommit v10, TxnOffsetCommit v6) are matched by
// the reserved topics' ids: resolved through the gateway's metadata client
// (Deps.Topics) the first time a request names a topic by id, again every
// reservedIDRefresh in the background (every reservedIDRetry while a
// reserved topic has no id yet: Tollgate may create it at any moment), and
// learnt from every Metadata and DescribeTopicPartitions answer that
// passes.
//
// The filter stands after the quota filter, nearest the broker: the Fetch
// it rewrites carries the quota filter's max_bytes clamp (patched in place
// before it decodes the request); the refused topics are charged as Kafka
// charges a request's unauthorized topics (a Produce by its whole size);
// and a request answered here entirely gives back what the quota filter
// reserved for it. With no reserved topic the chain has no such filter.

// reservedIDRefresh is how old the reserved topics' ids may be before a
// request naming topics by id has them resolved again (in the background);
// reservedIDRetry is the same while a reserved topic had no id (it did not
// exist) or the last resolution failed.
const (
	reservedIDRefresh = 10 * time.Second
	reservedIDRetry   = time.Second
	reservedIDTimeout = 5 * time.Second
)

// TopicIDs resolves topic names to their ids on the upstream cluster,
// without creating any (proxy.Gateway.TopicIDs); names that do not exist
// are absent from the result.
type TopicIDs interface {
	TopicIDs(ctx context.Context, topics []string) (map[string][16]byte, error)
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

	ids   atomic.Pointer[reservedIDSet]
	first sync.Mutex  // held by the first resolution, which requests wait for
	busy  atomic.Bool // a background resolution is running
	// warned: the last resolution failed and was logged (once, until
	// one succeeds).
	warned atomic.Bool
	// allow is allowTopic, bound once, so that a verdict carries it
	// without allocating.
	allow func(name []byte, id [16]byte) bool
}

// reservedIDSet is the reserved topics' ids as last resolved or learnt;
// replaced whole, never changed.
type reservedIDSet struct {
	ids []reservedID
	at  time.Time // last resolution; zero: none yet
	// whole: every reserved topic had an id at the last resolution.
	whole bool
}

type reservedID struct {
	id   [16]byte
	name string
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
	f.allow = f.allowTopic
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
// topic, learning their ids on the way.
func (f *reservedTopics) OnResponse(_ proxy.Conn, r *proxy.Response) error {
	switch r.Req.Key {
	case int16(kmsg.Metadata), int16(kmsg.DescribeTopicPartitions):
	default:
		return nil
	}
	if !f.mentioned(r.Buf.B) {
		return nil
	}
	return r.Edit(func(resp kmsg.Response) {
		switch t := resp.(type) {
		case *kmsg.MetadataResponse:
			f.scrubMetadata(t)
		case *kmsg.DescribeTopicPartitionsResponse:
			f.scrubDescribeTopicPartitions(t)
		}
	})
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

// idSet is the reserved topics' ids for a request received at now: the
// first call resolves them (requests wait for it), later ones have them
// resolved again in the background once they are stale.
func (f *reservedTopics) idSet(now time.Time) *reservedIDSet {
	s := f.ids.Load()
	if f.topics == nil {
		return s
	}
	if s.at.IsZero() {
		f.first.Lock()
		if s = f.ids.Load(); s.at.IsZero() {
			f.resolve()
			s = f.ids.Load()
		}
		f.first.Unlock()
		return s
	}
	stale := reservedIDRefresh
	if !s.whole {
		stale = reservedIDRetry
	}
	if now.Sub(s.at) >= stale && f.busy.CompareAndSwap(false, true) {
		go func() {
			defer f.busy.Store(false)
			f.resolve()
		}()
	}
	return s
}

// resolve asks the upstream for the reserved topics' ids. A failure keeps
// what was known (and is retried reservedIDRetry later).
func (f *reservedTopics) resolve() {
	ctx, cancel := context.WithTimeout(context.Background(), reservedIDTimeout)
	defer cancel()
	m, err := f.topics.TopicIDs(ctx, f.list)
	now := time.Now()
	for {
		old := f.ids.Load()
		next := &reservedIDSet{at: now}
		if err != nil {
			next.ids = old.ids
		} else {
			next.whole = len(m) == len(f.list)
			for name, id := range m {
				if f.names[name] && id != ([16]byte{}) {
					next.ids = append(next.ids, reservedID{id: id, name: name})
				}
			}
		}
		if f.ids.CompareAndSwap(old, next) {
			break
		}
	}
	switch {
	case err == nil:
		f.warned.Store(false)
	case f.warned.CompareAndSwap(false, true):
		f.log.Warn("cannot resolve the ids of Tollgate's own topics; requests naming topics by id are matched by the ids known so far",
			"topics", f.list, "known", len(f.ids.Load().ids), "err", err)
	}
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
// (proxy.Verdict.Topics); the ids were brought up to date when its head
// was read.
func (f *reservedTopics) allowTopic(name []byte, id [16]byte) bool {
	if name != nil {
		return !f.names[string(name)]
	}
	_, hit := f.ids.Load().lookup(id)
	return !hit
}

// idsFrom is idSet for a request that names topics by id from version
// from (Produce, Fetch: v13); nil below it.
func (f *reservedTopics) idsFrom(r *proxy.Request, from int16) *reservedIDSet {
	if r.Version < from {
		return nil
	}
	return f.idSet(r.Received)
}

// walkedHit reports whether a topic read in place is reserved: by its id
// when byID (then set is the request's idsFrom), else by its name.
func (f *reservedTopics) walkedHit(set *reservedIDSet, byID bool, name []byte, id [16]byte) bool {
	if byID {
		_, ok := set.lookup(id)
		return ok
	}
	return f.names[string(name)]
}

// refusedBy is a request's test of one topic: by name, or by id (a
// reserved id resolved at most once per request).
type refusedBy struct {
	f   *reservedTopics
	now time.Time
	set *reservedIDSet
}

func (f *reservedTopics) by(r *proxy.Request) *refusedBy { return &refusedBy{f: f, now: r.Received} }

func (b *refusedBy) name(n string) bool { return b.f.named(n) }

func (b *refusedBy) id(id [16]byte) bool {
	if id == ([16]byte{}) {
		return false
	}
	if b.set == nil {
		b.set = b.f.idSet(b.now)
	}
	_, ok := b.set.lookup(id)
	return ok
}

// either tests a topic named by name, or by id when version names topics
// by id (the name is then empty).
func (b *refusedBy) either(name string, id [16]byte, byID bool) bool {
	if byID {
		return b.id(id)
	}
	return b.name(name)
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
	kept, out := split(*xs, refused)
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	*xs = kept
	return answerOrForward(req, len(kept), func(resp kmsg.Response) {
		r := resp.(R)
		for _, x := range out {
			answer(r, x)
		}
	})
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

// taf is TOPIC_AUTHORIZATION_FAILED's code.
var taf = kerr.TopicAuthorizationFailed.Code
