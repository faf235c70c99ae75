package enforce

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/wire"
)

// t0 is every test's clock origin; the filter reads the clock through Now.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// clock is an explicit clock for Filter.Now.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

// quotaSet is one quota to configure.
type quotaSet struct {
	entity model.Entity
	key    model.Key
	value  float64
}

func defaultClient(k model.Key, v float64) quotaSet {
	return quotaSet{model.Entity{Client: model.Default()}, k, v}
}

// newFilter is a quota filter on a fresh engine with Kafka's windows
// (byte rates: 11 windows of 1 s, token buckets, so a bucket starts with
// a burst of 10·Q), a controller window of 1 s (a mutation burst of Q)
// and the gateway's shared deadline, and an explicit clock.
func newFilter(t *testing.T, qs ...quotaSet) (*Filter, *clock) {
	t.Helper()
	return newFilterWith(t, Config{}, qs...)
}

// newFilterWith is newFilter with c's lookups (its Engine and Now are
// newFilter's).
func newFilterWith(t *testing.T, c Config, qs ...quotaSet) (*Filter, *clock) {
	t.Helper()
	eng, err := quota.NewEngine(quota.EngineConfig{
		SharedDeadline: true, ByteRate: quota.ByteRateTokenBucket,
		ControllerWindowNum: 1, ControllerWindowSize: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var q model.Quotas
	for _, s := range qs {
		if err := q.Set(s.entity, s.key, s.value); err != nil {
			t.Fatal(err)
		}
	}
	eng.SetQuotas(q)
	clk := &clock{now: t0}
	c.Engine, c.Now = eng, clk.Now
	f, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f, clk
}

// newConn is a connection of p and the filter's instance for it, as a
// session holds them.
func newConn(f *Filter, p principal.Principal) (*proxytest.Conn, proxy.Filter) {
	c := &proxytest.Conn{ConnInfo: principal.ConnInfo{Listener: "PLAINTEXT", Principal: p}}
	return c, f.ForConn(c)
}

var anonymous = principal.AnonymousPrincipal

func request(t *testing.T, req kmsg.Request, clientID string) *proxy.Request {
	t.Helper()
	r, err := proxytest.Request(req, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.ClientID = clientID
	return r
}

// produce is a Produce v9 request of about size bytes with acks.
func produce(t *testing.T, size int, acks int16, clientID string) *proxy.Request {
	t.Helper()
	mk := func(records int) *proxy.Request {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, acks, 1000
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic = "t"
		tp.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, records)}}
		req.Topics = append(req.Topics, tp)
		return request(t, req, clientID)
	}
	// The records' length prefix is a varint: fit it by retrying.
	records := size - mk(0).Size
	r := mk(records)
	for i := 0; i < 3 && r.Size != size; i++ {
		records -= r.Size - size
		r = mk(records)
	}
	if r.Size != size || r.Acks != acks {
		t.Fatalf("framed a Produce of %d bytes acks %d, want %d acks %d", r.Size, r.Acks, size, acks)
	}
	return r
}

// forwarded reports whether v is the zero verdict: forward unchanged.
func forwarded(v proxy.Verdict) bool {
	return v.Respond == nil && v.Forward == nil && v.Merge == nil && v.Close == "" && v.Hold == 0 && v.Throttle == 0
}

func onRequest(f proxy.Filter, c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return f.(proxy.RequestHook).OnRequest(c, r)
}

func throttle(f proxy.Filter, c proxy.Conn, r *proxy.Request, size int) time.Duration {
	return f.(proxy.ThrottleHook).Throttle(c, r, size)
}

func dropped(f proxy.Filter, c proxy.Conn, r *proxy.Request) { f.(proxy.DropHook).Dropped(c, r) }

// usage is the rate of the bucket of (key, user, client-id) at now, and
// whether the bucket exists.
func usage(f *Filter, now time.Time, k model.Key, user, clientID string) (float64, bool) {
	for _, u := range f.Engine().Usage(now) {
		if u.Key == k && u.User == user && u.ClientID == clientID {
			return u.Rate, true
		}
	}
	return 0, false
}

// ms is a throttle of n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// Produce with acks=1 is charged its request size when its response
// passes, not when it is forwarded, and not the response's size.
func TestProduceRecordedAtResponse(t *testing.T) {
	// 100 B/s: a burst of 1000 bytes, then 10 ms per byte over it.
	f, clk := newFilter(t, defaultClient(model.ProducerByteRate, 100))
	c, q := newConn(f, anonymous)
	r := produce(t, 1500, 1, "app")
	if v := onRequest(q, c, r); !forwarded(v) {
		t.Fatalf("the first request: verdict %+v, want forwarded", v)
	}
	if rate, _ := usage(f, clk.now, model.ProducerByteRate, "", "app"); rate != 0 {
		t.Fatalf("recorded %v B/s when the request was forwarded, want nothing before its response", rate)
	}
	if r.Reserved != 1500 {
		t.Errorf("reserved %d bytes for the request in flight, want its size", r.Reserved)
	}
	// The response is tiny: the request's 1500 bytes are charged.
	if got := throttle(q, c, r, 10); got != ms(5000) {
		t.Errorf("throttle %v, want 5s: (1500-1000) bytes over at 100 B/s", got)
	}
	if rate, ok := usage(f, clk.now, model.ProducerByteRate, "", "app"); !ok || rate == 0 {
		t.Error("nothing recorded when the response passed")
	}
}

// Produce with acks=0 has no response: it is charged at once, and the
// connection muted for the throttle (Verdict.Throttle).
func TestProduceAcksZeroMuted(t *testing.T) {
	f, clk := newFilter(t, defaultClient(model.ProducerByteRate, 100))
	c, q := newConn(f, anonymous)
	r := produce(t, 800, 0, "app")
	if v := onRequest(q, c, r); v.Throttle != 0 || v.Hold != 0 {
		t.Fatalf("within the burst: verdict %+v, want forwarded", v)
	}
	if rate, ok := usage(f, clk.now, model.ProducerByteRate, "", "app"); !ok || rate == 0 {
		t.Fatal("an acks=0 request was not recorded when forwarded")
	}
	r = produce(t, 800, 0, "app")
	v := onRequest(q, c, r)
	if v.Throttle != ms(6000) || v.Hold != 0 || r.Reserved != 0 {
		t.Errorf("over the burst: verdict %+v reserved %d, want muted 6s (600 bytes over at 100 B/s), nothing held or reserved", v, r.Reserved)
	}
}

// A request for a bucket that is throttled waits (Verdict.Hold) for the
// bucket's deadline — on any connection of the same user and client-id.
func TestThrottledBucketHoldsNextRequest(t *testing.T) {
	f, clk := newFilter(t, defaultClient(model.ProducerByteRate, 100), defaultClient(model.ConsumerByteRate, 100))
	c1, q1 := newConn(f, anonymous)
	c2, q2 := newConn(f, anonymous)
	r := produce(t, 1500, 1, "app")
	onRequest(q1, c1, r)
	if got := throttle(q1, c1, r, 10); got != ms(5000) {
		t.Fatalf("throttle %v, want 5s", got)
	}
	clk.advance(2 * time.Second)
	for i, cq := range []struct {
		c *proxytest.Conn
		q proxy.Filter
	}{{c1, q1}, {c2, q2}} {
		r := produce(t, 100, 1, "app")
		if v := onRequest(cq.q, cq.c, r); v.Hold != ms(3000) {
			t.Errorf("connection %d: Produce held %v, want the 3s left of the bucket's throttle", i+1, v.Hold)
		}
		dropped(cq.q, cq.c, r) // its reservation would hold the next one longer
	}
	if v := onRequest(q2, c2, produce(t, 100, 0, "app")); v.Hold != ms(3000) {
		t.Errorf("acks=0 Produce held %v, want 3s", v.Hold)
	}
	if v := onRequest(q2, c2, produce(t, 100, 1, "other")); v.Hold != 0 {
		t.Errorf("another client-id's bucket is held %v", v.Hold)
	}

	// Fetch: the consumer bucket's deadline holds the next fetch.
	fr := fetch(t, 12, 1<<20, "app")
	onRequest(q1, c1, fr)
	if got := throttle(q1, c1, fr, 3000); got != ms(20000) {
		t.Fatalf("fetch throttle %v, want 20s (2000 bytes over at 100 B/s)", got)
	}
	clk.advance(5 * time.Second)
	if v := onRequest(q2, c2, fetch(t, 12, 1<<20, "app")); v.Hold != ms(15000) {
		t.Errorf("the next fetch is held %v, want 15s", v.Hold)
	}
}

// fetch is a Fetch request at version v asking for maxBytes.
func fetch(t *testing.T, v int16, maxBytes int32, clientID string) *proxy.Request {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = v, maxBytes
	tp := kmsg.NewFetchRequestTopic()
	tp.Topic = "t"
	tp.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}
	req.Topics = append(req.Topics, tp)
	return request(t, req, clientID)
}

func maxBytesOf(t *testing.T, r *proxy.Request) int32 {
	t.Helper()
	got := kmsg.NewPtrFetchRequest()
	got.Version = r.Version
	if err := got.ReadFrom(r.Payload[r.BodyOffset:]); err != nil {
		t.Fatalf("the clamped fetch does not decode: %v", err)
	}
	return got.MaxBytes
}

// Fetch max_bytes is clamped in place to what the quota allows now:
// Q·(N−1)·W at most, less the fetches in flight, at least 1 byte.
func TestFetchClamped(t *testing.T) {
	for v := int16(3); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			f, _ := newFilter(t, defaultClient(model.ConsumerByteRate, 100)) // burst 1000 bytes
			c, q := newConn(f, anonymous)
			r1 := fetch(t, v, 50<<20, "app")
			if vd := onRequest(q, c, r1); !forwarded(vd) {
				t.Fatalf("verdict %+v", vd)
			}
			if got := maxBytesOf(t, r1); got != 1000 || r1.Reserved != 1000 {
				t.Fatalf("max_bytes %d reserved %d, want both 1000", got, r1.Reserved)
			}
			r2 := fetch(t, v, 50<<20, "app") // while the first is in flight
			onRequest(q, c, r2)
			if got := maxBytesOf(t, r2); got != 1 || r2.Reserved != 1 {
				t.Fatalf("a second fetch in flight: max_bytes %d reserved %d, want 1 (the first holds the room)", got, r2.Reserved)
			}
			// The first answer carried 800 bytes: 200 of room left,
			// less the second fetch's byte.
			if got := throttle(q, c, r1, 800); got != 0 {
				t.Fatalf("throttled %v within the burst", got)
			}
			r3 := fetch(t, v, 50<<20, "app")
			onRequest(q, c, r3)
			if got := maxBytesOf(t, r3); got != 199 {
				t.Errorf("max_bytes %d, want 199", got)
			}
			// A lost fetch gives its reservation back.
			dropped(q, c, r2)
			dropped(q, c, r3)
			r4 := fetch(t, v, 50<<20, "app")
			onRequest(q, c, r4)
			if got := maxBytesOf(t, r4); got != 200 {
				t.Errorf("after the drops: max_bytes %d, want 200", got)
			}
			// A fetch asking for less than the room is left as it is.
			r5 := fetch(t, v, 10, "other")
			onRequest(q, c, r5)
			if got := maxBytesOf(t, r5); got != 10 {
				t.Errorf("max_bytes %d, want the client's 10", got)
			}
		})
	}
}

// Fetch v0–v2 has no max_bytes; without a quota nothing is clamped or
// reserved.
func TestFetchNotClamped(t *testing.T) {
	f, _ := newFilter(t, defaultClient(model.ConsumerByteRate, 100))
	c, q := newConn(f, anonymous)
	for v := int16(0); v <= 2; v++ {
		r := fetch(t, v, 0, "app")
		before := slices.Clone(r.Payload)
		onRequest(q, c, r)
		if !slices.Equal(before, r.Payload) || r.Reserved != 0 {
			t.Errorf("v%d changed or reserved %d", v, r.Reserved)
		}
	}
	f, _ = newFilter(t)
	c, q = newConn(f, anonymous)
	r := fetch(t, 12, 50<<20, "app")
	onRequest(q, c, r)
	if got := maxBytesOf(t, r); got != 50<<20 || r.Reserved != 0 {
		t.Errorf("without a quota: max_bytes %d reserved %d, want the client's and none", got, r.Reserved)
	}
}

// A Produce that will never be answered gives back its reservation.
func TestProduceDroppedReleases(t *testing.T) {
	f, _ := newFilter(t, defaultClient(model.ProducerByteRate, 100)) // burst 1000
	c, q := newConn(f, anonymous)
	var inFlight []*proxy.Request
	for range 2 {
		r := produce(t, 900, 1, "app")
		if v := onRequest(q, c, r); v.Hold != 0 {
			t.Fatalf("held %v with %d bytes in flight", v.Hold, 900*len(inFlight))
		}
		inFlight = append(inFlight, r)
	}
	// 1800 bytes in flight: 800 over the burst.
	r := produce(t, 900, 1, "app")
	if v := onRequest(q, c, r); v.Hold != ms(8000) {
		t.Fatalf("held %v with 1800 bytes in flight, want 8s", v.Hold)
	}
	inFlight = append(inFlight, r)
	for _, r := range inFlight {
		dropped(q, c, r)
	}
	if v := onRequest(q, c, produce(t, 900, 1, "app")); v.Hold != 0 {
		t.Errorf("held %v after every request in flight was dropped", v.Hold)
	}
}

// The handles a connection keeps follow its principal (a SASL login
// changes it) and the request's client-id, on the request side (acks=0)
// and the response side (acks=1) alike.
func TestHandlesFollowPrincipalAndClientID(t *testing.T) {
	alice := principal.Principal{Type: "User", Name: "alice"}
	f, clk := newFilter(t,
		quotaSet{model.UserEntity(model.Exact("alice")), model.ProducerByteRate, 100},
		quotaSet{model.ClientEntity(model.Exact("limited")), model.ProducerByteRate, 100},
	)
	for _, acks := range []int16{0, 1} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			c, q := newConn(f, anonymous)
			charge := func(clientID string) time.Duration {
				r := produce(t, 5000, acks, clientID)
				v := onRequest(q, c, r)
				if acks == 0 {
					return v.Throttle
				}
				return throttle(q, c, r, 10)
			}
			if got := charge("free"); got != 0 {
				t.Fatalf("ANONYMOUS/free: throttled %v without a quota", got)
			}
			if got := charge("limited"); got == 0 {
				t.Error("the client-id changed to one with a quota: not throttled")
			}
			if got := charge("free"); got != 0 {
				t.Errorf("back to the free client-id: throttled %v", got)
			}
			c.ConnInfo.Principal = alice // the SASL login completed
			if got := charge("free"); got == 0 {
				t.Error("after alice logged in: not throttled")
			}
			if _, ok := usage(f, clk.now, model.ProducerByteRate, "alice", ""); !ok {
				t.Error("alice's bucket was never charged")
			}
			clk.advance(time.Hour) // a fresh burst for the next run
		})
	}
}

// Mutations

// topics is the cluster's partition counts, for the mutation quota.
type topics struct {
	mu      sync.Mutex
	counts  map[string]int32
	byID    map[[16]byte]int32
	dflt    int32
	asked   [][]string
	dfltAsk int
}

func (tp *topics) TopicPartitions(_ context.Context, names []string) (map[string]int32, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.asked = append(tp.asked, slices.Clone(names))
	out := map[string]int32{}
	for _, n := range names {
		if c, ok := tp.counts[n]; ok {
			out[n] = c
		}
	}
	return out, nil
}

func (tp *topics) TopicPartitionsByID(_ context.Context, ids [][16]byte) (map[[16]byte]int32, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	out := map[[16]byte]int32{}
	for _, id := range ids {
		if c, ok := tp.byID[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

func (tp *topics) DefaultPartitions(context.Context) int32 {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.dfltAsk++
	return tp.dflt
}

// mutationFilter has a controller_mutation_rate of 10 partitions a second
// (a burst of 10) for every client-id.
func mutationFilter(t *testing.T) (*Filter, *topics) {
	t.Helper()
	tp := &topics{counts: map[string]int32{"a": 6, "b": 6, "c": 6, "d": 2}, dflt: 3,
		byID: map[[16]byte]int32{{1, 2, 3}: 2, {4}: 6, {5}: 6, {6}: 6}}
	f, _ := newFilterWith(t, Config{Topics: tp}, defaultClient(model.ControllerMutationRate, 10))
	return f, tp
}

func createTopics(v int16, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version, r.Topics = v, topics
	return r
}

func newTopic(name string, partitions int32) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, 1
	return t
}

func deleteTopics(v int16, names ...string) *kmsg.DeleteTopicsRequest {
	r := kmsg.NewPtrDeleteTopicsRequest()
	r.Version = v
	for _, n := range names {
		if v >= 6 {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = kmsg.StringPtr(n)
			r.Topics = append(r.Topics, t)
		} else {
			r.TopicNames = append(r.TopicNames, n)
		}
	}
	return r
}

func createPartitions(v int16, counts ...any) *kmsg.CreatePartitionsRequest {
	r := kmsg.NewPtrCreatePartitionsRequest()
	r.Version = v
	for i := 0; i+1 < len(counts); i += 2 {
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = counts[i].(string), int32(counts[i+1].(int))
		r.Topics = append(r.Topics, t)
	}
	return r
}

// mutationNames lists the topics of a mutation request or response with
// their error codes (requests: code 0).
func mutationNames(m any) []string {
	var out []string
	switch r := m.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.DeleteTopicsRequest:
		out = append(out, r.TopicNames...)
		for _, t := range r.Topics {
			out = append(out, *t.Topic)
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			out = append(out, t.Topic)
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			out = append(out, fmt.Sprintf("%s:%d", t.Topic, t.ErrorCode))
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			out = append(out, fmt.Sprintf("%s:%d", *t.Topic, t.ErrorCode))
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			out = append(out, fmt.Sprintf("%s:%d", t.Topic, t.ErrorCode))
		}
	}
	return out
}

// answer is the broker's answer to a forwarded mutation request: every
// topic succeeds.
func answer(req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind()
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.NumPartitions = t.Topic, t.NumPartitions
			resp.(*kmsg.CreateTopicsResponse).Topics = append(resp.(*kmsg.CreateTopicsResponse).Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest:
		for _, n := range mutationNames(r) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(n)
			resp.(*kmsg.DeleteTopicsResponse).Topics = append(resp.(*kmsg.DeleteTopicsResponse).Topics, rt)
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic = t.Topic
			resp.(*kmsg.CreatePartitionsResponse).Topics = append(resp.(*kmsg.CreatePartitionsResponse).Topics, rt)
		}
	}
	return resp
}

// mutation runs one mutation request through the filter as a session does
// and returns the verdict, the topics forwarded (nil when answered
// locally) and what the client receives (nil when closed).
func mutation(t *testing.T, f *Filter, req kmsg.Request) (proxy.Verdict, []string, kmsg.Response) {
	t.Helper()
	c, q := newConn(f, anonymous)
	r := request(t, req, "admin")
	v := onRequest(q, c, r)
	switch {
	case v.Close != "":
		return v, nil, nil
	case v.Respond != nil:
		v.Respond.SetVersion(r.Version)
		buf := wire.EncodeResponse(r.CorrelationID, r.Flexible, v.Respond)
		resp, ok := (&proxy.Response{Req: r, Buf: buf}).Decode()
		if !ok {
			t.Fatal("the local answer does not decode")
		}
		return v, nil, resp
	}
	fwd := req
	if v.Forward != nil {
		v.Forward.SetVersion(r.Version)
		out, err := proxytest.Request(v.Forward, r.CorrelationID)
		if err != nil {
			t.Fatal(err)
		}
		fwd = kmsg.RequestForKey(r.Key)
		fwd.SetVersion(r.Version)
		if err := fwd.ReadFrom(out.Payload[out.BodyOffset:]); err != nil {
			t.Fatalf("the forwarded request does not decode: %v", err)
		}
	}
	pr := proxytest.Response(r, answer(fwd))
	if v.Merge != nil {
		if err := wire.Edit(pr.Buf, r.Key, r.Version, r.Flexible, v.Merge); err != nil {
			t.Fatal(err)
		}
	}
	resp, ok := pr.Decode()
	if !ok {
		t.Fatal("the merged response does not decode")
	}
	return v, mutationNames(fwd), resp
}

func TestMutationStrict(t *testing.T) {
	const tqe = 89 // THROTTLING_QUOTA_EXCEEDED, as the client reads it
	for _, tc := range []struct {
		name  string
		req   func() kmsg.Request
		first []string // forwarded by the first request
		want  []string // what the client of the first request sees
	}{
		{"CreateTopics v6",
			func() kmsg.Request {
				return createTopics(6, newTopic("a", 6), newTopic("b", 6), newTopic("c", 6), newTopic("d", 2))
			},
			[]string{"a", "b"}, []string{"a:0", "b:0", "c:89", "d:89"}},
		{"CreateTopics v7",
			func() kmsg.Request { return createTopics(7, newTopic("a", 6), newTopic("b", 6), newTopic("c", 1)) },
			[]string{"a", "b"}, []string{"a:0", "b:0", "c:89"}},
		{"DeleteTopics v5",
			func() kmsg.Request { return deleteTopics(5, "a", "b", "c", "d") },
			[]string{"a", "b"}, []string{"a:0", "b:0", "c:89", "d:89"}},
		{"DeleteTopics v6",
			func() kmsg.Request { return deleteTopics(6, "a", "b", "c") },
			[]string{"a", "b"}, []string{"a:0", "b:0", "c:89"}},
		{"CreatePartitions v3", // a: 6→12, b: 6→12, c: 6→7
			func() kmsg.Request { return createPartitions(3, "a", 12, "b", 12, "c", 7) },
			[]string{"a", "b"}, []string{"a:0", "b:0", "c:89"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := mutationFilter(t)
			// 10 tokens: a takes them to 4, b (accepted while not
			// below zero) to -2, the rest are rejected, uncharged.
			v, fwd, resp := mutation(t, f, tc.req())
			if v.Forward == nil || v.Merge == nil {
				t.Fatalf("verdict %+v, want a partial forward with a merge", v)
			}
			if !slices.Equal(fwd, tc.first) {
				t.Errorf("forwarded %v, want %v", fwd, tc.first)
			}
			if got := mutationNames(resp); !slices.Equal(got, tc.want) {
				t.Errorf("the client sees %v, want %v (request order)", got, tc.want)
			}
			if v.Throttle != ms(200) {
				t.Errorf("throttle %v, want 200ms (2 partitions over at 10/s)", v.Throttle)
			}
			// The bucket is below zero: the next request is refused
			// whole, by Tollgate, with the same throttle.
			v, fwd, resp = mutation(t, f, tc.req())
			if v.Respond == nil || fwd != nil {
				t.Fatalf("verdict %+v forwarded %v, want answered locally", v, fwd)
			}
			for _, s := range mutationNames(resp) {
				if s[len(s)-3:] != fmt.Sprintf(":%d", tqe) {
					t.Errorf("the refused request answers %v, want every topic THROTTLING_QUOTA_EXCEEDED", mutationNames(resp))
					break
				}
			}
			if len(mutationNames(resp)) != len(mutationNames(tc.req())) {
				t.Errorf("the refused request answers %d topics, want %d", len(mutationNames(resp)), len(mutationNames(tc.req())))
			}
			if th, _ := resp.(kmsg.ThrottleResponse).Throttle(); v.Throttle != ms(200) || th != 0 {
				// The session puts v.Throttle into the local answer.
				t.Errorf("throttle %v (answer's own %d), want 200ms in the verdict", v.Throttle, th)
			}
		})
	}
}

// A strict request that fits is forwarded whole and not throttled, even
// when it takes the bucket below zero.
func TestMutationStrictFits(t *testing.T) {
	f, _ := mutationFilter(t)
	v, fwd, resp := mutation(t, f, createTopics(6, newTopic("a", 6), newTopic("b", 6)))
	if !forwarded(v) {
		t.Errorf("verdict %+v, want forwarded untouched", v)
	}
	if want := []string{"a:0", "b:0"}; !slices.Equal(mutationNames(resp), want) || len(fwd) != 2 {
		t.Errorf("forwarded %v, client sees %v", fwd, mutationNames(resp))
	}
}

// Below the strict versions everything is forwarded and the connection
// throttled by the deficit (permissive mode, KIP-599).
func TestMutationPermissive(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"CreateTopics v5", createTopics(5, newTopic("a", 6), newTopic("b", 6), newTopic("c", 6))},
		{"CreateTopics v0", createTopics(0, newTopic("a", 6), newTopic("b", 6), newTopic("c", 6))},
		{"DeleteTopics v4", deleteTopics(4, "a", "b", "c")},
		{"CreatePartitions v2", createPartitions(2, "a", 12, "b", 12, "c", 12)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := mutationFilter(t)
			v, fwd, resp := mutation(t, f, tc.req)
			if v.Forward != nil || v.Merge != nil || v.Respond != nil {
				t.Fatalf("verdict %+v, want forwarded whole", v)
			}
			if want := []string{"a", "b", "c"}; !slices.Equal(fwd, want) {
				t.Errorf("forwarded %v", fwd)
			}
			if got := mutationNames(resp); !slices.Equal(got, []string{"a:0", "b:0", "c:0"}) {
				t.Errorf("the client sees %v", got)
			}
			if v.Throttle != ms(800) {
				t.Errorf("throttle %v, want 800ms (8 partitions over at 10/s)", v.Throttle)
			}
		})
	}
}

// CreateTopics charges a topic's replica assignment, its num_partitions,
// or for -1 the cluster's num.partitions (asked once per request).
func TestMutationCreateTopicsPartitionCount(t *testing.T) {
	f, tp := mutationFilter(t) // default 3 partitions
	assigned := newTopic("assigned", -1)
	for p := range 4 {
		assigned.ReplicaAssignment = append(assigned.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: []int32{0}})
	}
	// 3 + 3 + 4 = 10: the whole burst, not more.
	v, _, _ := mutation(t, f, createTopics(5, newTopic("x", -1), newTopic("y", -1), assigned))
	if v.Throttle != 0 {
		t.Errorf("throttle %v for 10 partitions within a burst of 10", v.Throttle)
	}
	if tp.dfltAsk != 1 {
		t.Errorf("num.partitions asked %d times, want once", tp.dfltAsk)
	}
	// One more default topic: 3 over.
	if v, _, _ := mutation(t, f, createTopics(5, newTopic("z", -1))); v.Throttle != ms(300) {
		t.Errorf("throttle %v, want 300ms", v.Throttle)
	}
}

// Without a controller_mutation_rate quota the requests are not even
// decoded.
func TestMutationWithoutQuota(t *testing.T) {
	tp := &topics{}
	f, _ := newFilterWith(t, Config{Topics: tp}, defaultClient(model.ProducerByteRate, 100))
	v, fwd, _ := mutation(t, f, deleteTopics(5, "a", "b"))
	if !forwarded(v) || len(fwd) != 2 || len(tp.asked) != 0 {
		t.Errorf("verdict %+v forwarded %v, partitions asked %v", v, fwd, tp.asked)
	}
}

// A mutation request kmsg cannot read closes the connection.
func TestMutationMalformed(t *testing.T) {
	f, _ := mutationFilter(t)
	for _, req := range []kmsg.Request{
		createTopics(6, newTopic("a", 1)), deleteTopics(6, "a"), createPartitions(3, "a", 7),
	} {
		c, q := newConn(f, anonymous)
		r := request(t, req, "admin")
		r.Payload = r.Payload[:len(r.Payload)-2]
		if v := onRequest(q, c, r); v.Close != proxy.ReasonBadFrame {
			t.Errorf("%s cut short: verdict %+v, want closed as %s", kmsg.NameForKey(req.Key()), v, proxy.ReasonBadFrame)
		}
	}
}

// Without a quota nothing is throttled, held, reserved or clamped.
func TestNoQuota(t *testing.T) {
	f, _ := newFilter(t)
	c, q := newConn(f, anonymous)
	for range 3 {
		r := produce(t, 1<<20, 1, "app")
		if v := onRequest(q, c, r); !forwarded(v) || r.Reserved != 0 {
			t.Fatalf("verdict %+v reserved %d", v, r.Reserved)
		}
		if got := throttle(q, c, r, 10); got != 0 {
			t.Fatalf("throttled %v", got)
		}
	}
	if got := f.Engine().Quotas(); got.Enabled(model.ProducerByteRate) {
		t.Fatal("a producer quota is enabled")
	}
}

// A topic DeleteTopics v6 names by id alone is charged its partitions as
// the upstream has them for that id (as Kafka's controller charges it):
// three topics of 6 partitions each under a burst of 10 — the first two
// pass, the third is refused, by id. An id the upstream does not know is
// charged nothing.
func TestMutationDeleteTopicsByIDCharged(t *testing.T) {
	f, _ := mutationFilter(t)
	req := deleteTopics(6)
	for _, id := range [][16]byte{{9}, {4}, {5}, {6}} {
		tp := kmsg.NewDeleteTopicsRequestTopic()
		tp.TopicID = id
		req.Topics = append(req.Topics, tp)
	}
	c, q := newConn(f, anonymous)
	v := onRequest(q, c, request(t, req, "admin"))
	if v.Forward == nil || v.Merge == nil {
		t.Fatalf("verdict %+v, want a partial forward", v)
	}
	var fwd [][16]byte
	for _, tp := range v.Forward.(*kmsg.DeleteTopicsRequest).Topics {
		fwd = append(fwd, tp.TopicID)
	}
	if want := [][16]byte{{9}, {4}, {5}}; !slices.Equal(fwd, want) {
		t.Errorf("forwarded %x, want the unknown id and the first two topics", fwd)
	}
	up := kmsg.NewPtrDeleteTopicsResponse()
	up.Version = 6
	for _, tp := range v.Forward.(*kmsg.DeleteTopicsRequest).Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID = tp.TopicID
		up.Topics = append(up.Topics, rt)
	}
	v.Merge(up)
	last := up.Topics[len(up.Topics)-1]
	if len(up.Topics) != 4 || last.TopicID != ([16]byte{6}) || last.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("the client sees %+v, want the fourth topic refused by id with THROTTLING_QUOTA_EXCEEDED", up.Topics)
	}
}

// DeleteTopics v6 names topics by name or by id. A topic named by id alone
// keeps its place: every topic is forwarded or answered, in request order,
// and a rejected one is answered with its id.
func TestMutationDeleteTopicsByID(t *testing.T) {
	f, _ := mutationFilter(t)
	id := [16]byte{1, 2, 3}
	req := deleteTopics(6, "a")
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = id
	req.Topics = append(req.Topics, byID)
	for _, n := range []string{"b", "c"} {
		tp := kmsg.NewDeleteTopicsRequestTopic()
		tp.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, tp)
	}
	c, q := newConn(f, anonymous)
	r := request(t, req, "admin")
	v := onRequest(q, c, r)
	if v.Forward == nil || v.Merge == nil {
		t.Fatalf("verdict %+v, want a partial forward", v)
	}
	var fwd []string
	for _, tp := range v.Forward.(*kmsg.DeleteTopicsRequest).Topics {
		fwd = append(fwd, fmt.Sprintf("%s/%x", str(tp.Topic), tp.TopicID[:3]))
	}
	if want := []string{"a/000000", "<null>/010203", "b/000000"}; !slices.Equal(fwd, want) {
		t.Errorf("forwarded %v, want %v", fwd, want)
	}
	up := kmsg.NewPtrDeleteTopicsResponse()
	up.Version = 6
	for _, tp := range v.Forward.(*kmsg.DeleteTopicsRequest).Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
		up.Topics = append(up.Topics, rt)
	}
	v.Merge(up)
	var got []string
	for _, tp := range up.Topics {
		got = append(got, fmt.Sprintf("%s/%x:%d", str(tp.Topic), tp.TopicID[:3], tp.ErrorCode))
	}
	if want := []string{"a/000000:0", "<null>/010203:0", "b/000000:0", "c/000000:89"}; !slices.Equal(got, want) {
		t.Errorf("the client sees %v, want %v", got, want)
	}

	// The bucket is below zero: everything refused, the id-only topic
	// answered with its id.
	r = request(t, req, "admin")
	v = onRequest(q, c, r)
	if v.Respond == nil {
		t.Fatalf("verdict %+v, want answered locally", v)
	}
	got = got[:0]
	for _, tp := range v.Respond.(*kmsg.DeleteTopicsResponse).Topics {
		got = append(got, fmt.Sprintf("%s/%x:%d", str(tp.Topic), tp.TopicID[:3], tp.ErrorCode))
	}
	if want := []string{"a/000000:89", "<null>/010203:89", "b/000000:89", "c/000000:89"}; !slices.Equal(got, want) {
		t.Errorf("the client sees %v, want %v", got, want)
	}
}

func str(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
