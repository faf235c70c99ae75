package kafkaapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
)

// Tollgate's own topics in these tests, and a tenant's.
const (
	auditTopic = "tollgate-audit"
	usageTopic = "tollgate-usage"
	ownTopic   = "orders"
)

var (
	auditID    = [16]byte{0xa1, 1}
	usageID    = [16]byte{0xa2, 2}
	ownID      = [16]byte{0x0d, 3}
	paymentsID = [16]byte{0x0e, 4}
	// names of the ids, for the answers the tests read.
	idNames = map[[16]byte]string{auditID: auditTopic, usageID: usageTopic, ownID: ownTopic, paymentsID: "payments"}
)

var (
	tafCode     = kerr.TopicAuthorizationFailed.Code
	unknownCode = kerr.UnknownTopicID.Code
	notTried    = kerr.OperationNotAttempted.Code
)

// upstreamIDs is what the upstream cluster's metadata says of the topics'
// ids; calls counts the lookups, asked the ids looked up.
type upstreamIDs struct {
	mu    sync.Mutex
	ids   map[string][16]byte
	calls atomic.Int32
	asked [][16]byte
}

func (u *upstreamIDs) TopicNamesOf(_ context.Context, ids [][16]byte) (map[[16]byte]string, error) {
	u.calls.Add(1)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.asked = append(u.asked, ids...)
	out := map[[16]byte]string{}
	for name, id := range u.ids {
		if slices.Contains(ids, id) {
			out[id] = name
		}
	}
	return out, nil
}

// set names id name from now on (a topic created, or recreated).
func (u *upstreamIDs) set(name string, id [16]byte) {
	u.mu.Lock()
	u.ids[name] = id
	u.mu.Unlock()
}

// failingIDs is an upstream the gateway cannot ask.
type failingIDs struct{ calls atomic.Int32 }

func (f *failingIDs) TopicNamesOf(context.Context, [][16]byte) (map[[16]byte]string, error) {
	f.calls.Add(1)
	return nil, errors.New("no broker answers")
}

func clusterIDs() *upstreamIDs {
	return &upstreamIDs{ids: map[string][16]byte{auditTopic: auditID, usageTopic: usageID, ownTopic: ownID, "payments": paymentsID}}
}

// reservedOf is the reserved-topics filter of the chain Deps would build
// with audit and usage topics.
func reservedOf(t testing.TB, ids TopicIDs) *reservedTopics {
	t.Helper()
	for _, f := range Chain(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Reserved: []string{auditTopic, usageTopic}, Topics: ids}) {
		if r, ok := f.(*reservedTopics); ok {
			return r
		}
	}
	t.Fatal("the chain has no reserved-topics filter")
	return nil
}

func at(v int16, r kmsg.Request) kmsg.Request { r.SetVersion(v); return r }

// The helpers below read and build the requests and answers of the APIs
// that name topics by kmsg's field names, which those APIs share: a list
// (Topics, TopicNames, Resources, Transactions) of items that name a topic
// (Topic, or TopicID when it has no name), a config resource
// (ResourceType, ResourceName) or a transaction (TransactionalID), with
// their ErrorCode or their Partitions' (Partition, ErrorCode).

// lists are the fields a request or answer names its items in.
var lists = []string{"TopicNames", "Topics", "Resources", "Transactions"}

// itemName names an item of a list: a topic named by id by its id's name.
func itemName(x reflect.Value) string {
	if x.Kind() == reflect.String {
		return x.String()
	}
	if tx := x.FieldByName("TransactionalID"); tx.IsValid() {
		return tx.String()
	}
	if rt := x.FieldByName("ResourceType"); rt.IsValid() {
		return fmt.Sprintf("%v:%s", rt.Interface(), x.FieldByName("ResourceName").String())
	}
	if n := x.FieldByName("Topic"); n.IsValid() {
		if n.Kind() == reflect.Pointer && !n.IsNil() {
			n = n.Elem()
		}
		if n.Kind() == reflect.String && n.String() != "" {
			return n.String()
		}
	}
	id := x.FieldByName("TopicID").Interface().([16]byte)
	if n, ok := idNames[id]; ok {
		return n
	}
	return fmt.Sprintf("id%x", id[:2])
}

// sentTopics lists the topics (or config resources, or transactions) a
// request names.
func sentTopics(r kmsg.Request) []string {
	var out []string
	v := reflect.ValueOf(r).Elem()
	for _, l := range lists {
		if xs := v.FieldByName(l); xs.IsValid() {
			for i := range xs.Len() {
				out = append(out, itemName(xs.Index(i)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// codes maps each topic (or resource, or transaction's topic as
// "transaction/topic") of an answer to its error codes: the topic's own,
// or one per partition.
func codes(resp kmsg.Response) map[string][]int16 {
	out := map[string][]int16{}
	add := func(prefix string, xs reflect.Value) {
		for i := range xs.Len() {
			x := xs.Index(i)
			n := prefix + itemName(x)
			if c := x.FieldByName("ErrorCode"); c.IsValid() {
				out[n] = append(out[n], int16(c.Int()))
				continue
			}
			ps := x.FieldByName("Partitions")
			for j := range ps.Len() {
				out[n] = append(out[n], int16(ps.Index(j).FieldByName("ErrorCode").Int()))
			}
		}
	}
	v := reflect.ValueOf(resp).Elem()
	for _, l := range []string{"Topics", "Resources"} {
		if xs := v.FieldByName(l); xs.IsValid() {
			add("", xs)
		}
	}
	if txs := v.FieldByName("Transactions"); txs.IsValid() {
		for i := range txs.Len() {
			add(txs.Index(i).FieldByName("TransactionalID").String()+"/", txs.Index(i).FieldByName("Topics"))
		}
	}
	return out
}

// echo is an upstream that answers every topic (partition, resource,
// transaction) of a request without error: what the broker would for the
// tenant's own.
func echo(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		mr := resp.(*kmsg.MetadataResponse)
		mr.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "broker-0", Port: 9092}}
		names := []string{auditTopic, usageTopic, ownTopic}
		if r.Topics != nil && (r.Version > 0 || len(r.Topics) > 0) {
			names = nil
			for _, t := range r.Topics {
				if t.Topic != nil {
					names = append(names, *t.Topic)
				} else {
					names = append(names, idNames[t.TopicID])
				}
			}
		}
		for _, n := range names {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID = kmsg.StringPtr(n), knownID(n)
			rt.Partitions = []kmsg.MetadataResponseTopicPartition{{Partition: 0, Leader: 0}}
			mr.Topics = append(mr.Topics, rt)
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		dr := resp.(*kmsg.DescribeTopicPartitionsResponse)
		names := []string{auditTopic, ownTopic, usageTopic}
		if len(r.Topics) > 0 {
			names = nil
			for _, t := range r.Topics {
				names = append(names, t.Topic)
			}
		}
		for _, n := range names {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.TopicID = kmsg.StringPtr(n), knownID(n)
			rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{{Partition: 0}}
			dr.Topics = append(dr.Topics, rt)
		}
	default:
		from, to := reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem()
		for _, l := range lists {
			if xs := from.FieldByName(l); xs.IsValid() {
				if l == "TopicNames" {
					l = "Topics" // DeleteTopics v0–v5: answered in Topics
				}
				echoItems(xs, to.FieldByName(l))
			}
		}
	}
	return resp
}

// echoItems appends to the answer's list to an answer to each item of xs:
// naming what it names, with its partitions (or a transaction's topics).
func echoItems(xs, to reflect.Value) {
	for i := range xs.Len() {
		x, y := xs.Index(i), newItem(to.Type().Elem())
		switch x.Kind() {
		case reflect.String: // a topic name
			set(y, "Topic", x)
		case reflect.Int32: // a partition
			set(y, "Partition", x)
		default:
			for _, f := range []string{"Topic", "TopicID", "ResourceType", "ResourceName", "TransactionalID", "Partition"} {
				set(y, f, x.FieldByName(f))
			}
			for _, l := range []string{"Partitions", "Topics"} {
				if xl, yl := x.FieldByName(l), y.FieldByName(l); xl.IsValid() && yl.IsValid() {
					echoItems(xl, yl)
				}
			}
		}
		to.Set(reflect.Append(to, y))
	}
}

// newItem is a new kmsg struct of type t, with kmsg's defaults.
func newItem(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if d, ok := p.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return p.Elem()
}

// set sets item's field f, where it has one, to v (where v is valid),
// through a pointer where one of them is one.
func set(item reflect.Value, f string, v reflect.Value) {
	to := item.FieldByName(f)
	switch {
	case !to.IsValid() || !v.IsValid():
		return
	case to.Kind() == reflect.Pointer && v.Kind() != reflect.Pointer:
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		v = p
	case to.Kind() != reflect.Pointer && v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	to.Set(v)
}

// Request builders: a topic of two partitions (0, 1) per name, or per id.

// withTopics gives r, at version v, a topic per name in its Topics: by id
// when byID (the name left empty), with partitions 0 and 1 where a topic
// lists partitions.
func withTopics[R kmsg.Request](r R, v int16, byID bool, names ...string) R {
	r.SetVersion(v)
	topics := reflect.ValueOf(r).Elem().FieldByName("Topics")
	for _, n := range names {
		t := newItem(topics.Type().Elem())
		if byID {
			set(t, "TopicID", reflect.ValueOf(idOf(n)))
		} else {
			set(t, "Topic", reflect.ValueOf(n))
		}
		if ps := t.FieldByName("Partitions"); ps.IsValid() {
			for p := range int32(2) {
				if ps.Type().Elem().Kind() == reflect.Int32 {
					ps.Set(reflect.Append(ps, reflect.ValueOf(p)))
					continue
				}
				pt := newItem(ps.Type().Elem())
				set(pt, "Partition", reflect.ValueOf(p))
				ps.Set(reflect.Append(ps, pt))
			}
		}
		topics.Set(reflect.Append(topics, t))
	}
	return r
}

// topicsReq is a request of key at version v naming topics (withTopics).
func topicsReq(key kmsg.Key, v int16, byID bool, topics ...string) kmsg.Request {
	return withTopics(kmsg.RequestForKey(int16(key)), v, byID, topics...)
}

// configResource is a config resource a request names.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// resourcesReq is a config request of key at version v naming resources.
func resourcesReq(key kmsg.Key, v int16, resources ...configResource) kmsg.Request {
	r := kmsg.RequestForKey(int16(key))
	r.SetVersion(v)
	list := reflect.ValueOf(r).Elem().FieldByName("Resources")
	for _, res := range resources {
		x := newItem(list.Type().Elem())
		set(x, "ResourceType", reflect.ValueOf(res.typ))
		set(x, "ResourceName", reflect.ValueOf(res.name))
		list.Set(reflect.Append(list, x))
	}
	return r
}

func produceReq(v int16, acks int16, topics ...string) *kmsg.ProduceRequest {
	r := withTopics(kmsg.NewPtrProduceRequest(), v, v >= 13, topics...)
	r.Acks, r.TimeoutMillis = acks, 1000
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			r.Topics[i].Partitions[j].Records = []byte("batch-" + topics[i])
		}
	}
	return r
}

func idOf(name string) [16]byte {
	if id := knownID(name); id != ([16]byte{}) {
		return id
	}
	panic(name)
}

// knownID is the id of a topic of idNames; zero for any other.
func knownID(name string) [16]byte {
	for id, n := range idNames {
		if n == name {
			return id
		}
	}
	return [16]byte{}
}

func fetchReq(v int16, topics ...string) *kmsg.FetchRequest {
	r := withTopics(kmsg.NewPtrFetchRequest(), v, v >= 13, topics...)
	r.MaxBytes = 1 << 20
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			r.Topics[i].Partitions[j].PartitionMaxBytes = 1 << 20
		}
	}
	return r
}

// exchangeCase is one request through the filter: what the broker must
// be sent (nil: nothing) and what the client must get.
type exchangeCase struct {
	name string
	req  kmsg.Request
	sent []string           // topics the broker gets; nil: answered by Tollgate
	want map[string][]int16 // the client's answer: error codes by topic
}

func runCases(t *testing.T, f *reservedTopics, cases []exchangeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var up func(kmsg.Request) kmsg.Response
			if tc.sent != nil {
				up = echo
			}
			x := pass(t, f, connAs(aliceUser), tc.req, up)
			if x.verdict.Close != "" {
				t.Fatalf("the connection was closed (%s)", x.verdict.Close)
			}
			if tc.sent == nil && !x.answeredLocally() {
				t.Fatalf("forwarded %v, want it answered by Tollgate", sentTopics(x.sent))
			}
			if tc.sent != nil {
				if got := sentTopics(x.sent); !slices.Equal(got, tc.sent) {
					t.Errorf("the broker got %v, want %v", got, tc.sent)
				}
			}
			if got := codes(x.resp); !maps.EqualFunc(got, tc.want, slices.Equal[[]int16]) {
				t.Errorf("the client got %v, want %v", got, tc.want)
			}
		})
	}
}

// produceFrame is the frame of a Produce of topics, each partition's
// records of size bytes.
func produceFrame(t testing.TB, v, acks int16, size int, topics ...string) *proxy.Request {
	t.Helper()
	req := produceReq(v, acks, topics...)
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			req.Topics[i].Partitions[j].Records = make([]byte, size)
		}
	}
	r, err := proxytest.Request(req, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// bigProduceHead is the head a session reads (16 KiB) of a Produce of
// 512 KiB a topic (two partitions of 256 KiB each): the topics after the
// first lie far past it.
func bigProduceHead(t testing.TB, v int16, topics ...string) *proxy.Request {
	t.Helper()
	r := produceFrame(t, v, -1, 256<<10, topics...)
	r.Payload = r.Payload[:16<<10] // the head, as a session has it
	return r
}
