package enforce

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/wire"
)

// benchPolicy is the quota policy with key configured for every client-id
// and never reached.
func benchPolicy(b *testing.B, alg quota.ByteRateAlgorithm, key model.Key) *Filter {
	return benchPolicyClock(b, alg, key, nil)
}

// benchPolicyClock is benchPolicy on the clock now (nil: time.Now).
func benchPolicyClock(b *testing.B, alg quota.ByteRateAlgorithm, key model.Key, now func() time.Time) *Filter {
	eng, err := quota.NewEngine(quota.EngineConfig{SharedDeadline: true, ByteRate: alg})
	if err != nil {
		b.Fatal(err)
	}
	var q model.Quotas
	if err := q.Set(model.Entity{Client: model.Default()}, key, 1e15); err != nil {
		b.Fatal(err)
	}
	eng.SetQuotas(q)
	return benchFilter(b, Config{Engine: eng, Now: now})
}

// benchFilter is New(c), which must succeed.
func benchFilter(b *testing.B, c Config) *Filter {
	b.Helper()
	f, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// connOf returns an ANONYMOUS connection and the filter's instance for it,
// as a session holds them.
func connOf(f *Filter) (*proxytest.Conn, *conn) {
	c := &proxytest.Conn{ConnInfo: principal.ConnInfo{Principal: principal.AnonymousPrincipal}}
	return c, f.ForConn(c).(*conn)
}

// BenchmarkPolicyProduce is everything quotas add to one Produce request
// (acks=1) on the gateway's path when a quota is configured but not
// reached: the hold check and in-flight reservation when the request
// passes, the release, record and throttle decision when its response
// passes. The gateway-core cost of the same request is in BENCHMARKS.md.
func BenchmarkPolicyProduce(b *testing.B) {
	for _, alg := range []quota.ByteRateAlgorithm{quota.ByteRateTokenBucket, quota.ByteRateSampled} {
		b.Run("alg="+alg.String(), func(b *testing.B) {
			benchProduce(b, benchPolicy(b, alg, model.ProducerByteRate))
		})
	}
}

// The same with every goroutine a client-id of its own (RunParallel).
func BenchmarkPolicyProduceParallel(b *testing.B) {
	for _, alg := range []quota.ByteRateAlgorithm{quota.ByteRateTokenBucket, quota.ByteRateSampled} {
		b.Run("alg="+alg.String(), func(b *testing.B) {
			p := benchPolicy(b, alg, model.ProducerByteRate)
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ci, q := connOf(p)
				r := &proxy.Request{Key: int16(kmsg.Produce), Version: 9, ClientID: "bench-" + strconv.FormatInt(next.Add(1), 10), Size: 1 << 20, Acks: 1}
				for pb.Next() {
					q.OnRequest(ci, r)
					q.Throttle(ci, r, 100)
				}
			})
		})
	}
}

// BenchmarkPolicyProduceBuckets is BenchmarkPolicyProduce with n live
// buckets, one per client-id under the default client-id quota, each request
// from the next client-id in turn: the per-request cost once the route map
// and the buckets no longer fit in the CPU caches (buckets=1 is the same loop
// on one client-id).
func BenchmarkPolicyProduceBuckets(b *testing.B) {
	for _, n := range []int{1, 100_000} {
		for _, alg := range []quota.ByteRateAlgorithm{quota.ByteRateTokenBucket, quota.ByteRateSampled} {
			b.Run("buckets="+strconv.Itoa(n)+"/alg="+alg.String(), func(b *testing.B) {
				// An explicit clock, 1 µs a request: no 30 s expiry sweep
				// lands in the loop, and the numbers repeat.
				now := time.UnixMilli(1_700_000_000_123)
				p := benchPolicyClock(b, alg, model.ProducerByteRate, func() time.Time { return now })
				// One connection per client-id, each with its filter
				// instance, as clients are.
				ci := &proxytest.Conn{ConnInfo: principal.ConnInfo{Principal: principal.AnonymousPrincipal}}
				conns := make([]*conn, n)
				for i := range conns {
					conns[i] = p.ForConn(ci).(*conn)
				}
				reqs := make([]proxy.Request, n)
				for i := range reqs {
					reqs[i] = proxy.Request{Key: int16(kmsg.Produce), Version: 9, ClientID: "bench-" + strconv.Itoa(i), Size: 1 << 20, Acks: 1}
				}
				// The first round creates the buckets, the second has every
				// route published to the lock-free map.
				for range 2 {
					for i := range reqs {
						conns[i].OnRequest(ci, &reqs[i])
						conns[i].Throttle(ci, &reqs[i], 100)
						now = now.Add(time.Microsecond)
					}
				}
				if got := p.Engine().Stats()[model.ProducerByteRate].Buckets; got != n {
					b.Fatalf("%d buckets, want %d", got, n)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					r, q := &reqs[i], conns[i]
					if i++; i == n {
						i = 0
					}
					if v := q.OnRequest(ci, r); v.Hold != 0 {
						b.Fatal("held under a quota never reached")
					}
					if t := q.Throttle(ci, r, 100); t != 0 {
						b.Fatal("throttled under a quota never reached")
					}
					now = now.Add(time.Microsecond)
				}
			})
		}
	}
}

// BenchmarkPolicyFetch is what quotas add to one Fetch (v12) when a
// consumer_byte_rate is configured but not reached: the hold check, reading
// max_bytes and the clamp reservation when it passes, the release, record
// and throttle decision when its response passes.
func BenchmarkPolicyFetch(b *testing.B) {
	for _, alg := range []quota.ByteRateAlgorithm{quota.ByteRateTokenBucket, quota.ByteRateSampled} {
		b.Run("alg="+alg.String(), func(b *testing.B) {
			benchFetch(b, benchPolicy(b, alg, model.ConsumerByteRate))
		})
	}
}

// benchFetch runs one Fetch (v12, 1 MiB answered) through p's request and
// throttle hooks per iteration; nothing may hold, throttle or clamp it.
func benchFetch(b *testing.B, p *Filter) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = 50 << 20
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "bench"
	t.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}
	req.Topics = append(req.Topics, t)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	frame := f.AppendRequest(nil, req, 1)[4:]
	h, err := wire.ParseRequestHeader(frame)
	if err != nil {
		b.Fatal(err)
	}
	ci, q := connOf(p)
	r := &proxy.Request{Key: int16(kmsg.Fetch), Version: 12, ClientID: "bench", Size: len(frame), Payload: frame, BodyOffset: h.BodyOffset}
	b.ReportAllocs()
	for b.Loop() {
		if v := q.OnRequest(ci, r); v.Hold != 0 {
			b.Fatal("held under a quota never reached")
		}
		if t := q.Throttle(ci, r, 1<<20); t != 0 {
			b.Fatal("throttled under a quota never reached")
		}
	}
	if got, ok := wire.FetchMaxBytes(frame, h.BodyOffset, 12); !ok || got != 50<<20 {
		b.Fatalf("max_bytes became %d under a quota never reached", got)
	}
}

// BenchmarkPolicyRequest is what request_percentage adds to any request
// (Metadata here) when a quota is configured but not reached: the hold
// check when it passes; the upstream time measured, recorded and the
// throttle decided when its answer passes.
func BenchmarkPolicyRequest(b *testing.B) {
	p := benchPolicy(b, quota.ByteRateTokenBucket, model.RequestPercentage)
	ci, q := connOf(p)
	r := &proxy.Request{Key: int16(kmsg.Metadata), Version: 12, ClientID: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		r.Forwarded = time.Now()
		if v := q.OnRequest(ci, r); v.Hold != 0 {
			b.Fatal("held under a quota never reached")
		}
		if t := q.Throttle(ci, r, 100); t != 0 {
			b.Fatal("throttled under a quota never reached")
		}
	}
}

// withTenants configures ten tenants of ten principals each on p's
// engine, ANONYMOUS (the benchmarks' principal) in one of them, every
// ceiling far above what is sent.
func withTenants(b *testing.B, p *Filter) {
	var ts []quota.Tenant
	for i := range 10 {
		t := quota.Tenant{Name: "tenant-" + strconv.Itoa(i),
			Ceilings: map[model.Key]float64{model.ProducerByteRate: 1e15, model.ConsumerByteRate: 1e15}}
		for j := range 10 {
			t.Principals = append(t.Principals, "user-"+strconv.Itoa(i*10+j))
		}
		ts = append(ts, t)
	}
	ts[3].Principals = append(ts[3].Principals, principal.Anonymous)
	s, err := quota.NewTenantSet(ts)
	if err != nil {
		b.Fatal(err)
	}
	p.Engine().SetTenants(s, time.Now())
}

// BenchmarkPolicyProduceTenant is BenchmarkPolicyProduce with tenants
// configured and the client's principal in one: its own bucket and its
// tenant's ceiling and share, both at the hold and at the record.
func BenchmarkPolicyProduceTenant(b *testing.B) {
	p := benchPolicy(b, quota.ByteRateTokenBucket, model.ProducerByteRate)
	withTenants(b, p)
	benchProduce(b, p)
}

// benchProduce passes one Produce request (acks=1) and its response
// through the quota filter, under quotas never reached.
func benchProduce(b *testing.B, p *Filter) {
	ci, q := connOf(p)
	r := &proxy.Request{Key: int16(kmsg.Produce), Version: 9, ClientID: "bench", Size: 1 << 20, Acks: 1}
	b.ReportAllocs()
	for b.Loop() {
		if v := q.OnRequest(ci, r); v.Hold != 0 {
			b.Fatal("held under a quota never reached")
		}
		if t := q.Throttle(ci, r, 100); t != 0 {
			b.Fatal("throttled under a quota never reached")
		}
	}
}

// BenchmarkPolicyFetchTenant is BenchmarkPolicyFetch with the client's
// principal in a tenant with a consumer_byte_rate ceiling.
func BenchmarkPolicyFetchTenant(b *testing.B) {
	p := benchPolicy(b, quota.ByteRateTokenBucket, model.ConsumerByteRate)
	withTenants(b, p)
	benchFetch(b, p)
}

// BenchmarkPolicyTopics is the policy's whole per-request cost with
// per-topic quotas configured and not reached, next to the same request
// without them (topics=none: the one atomic load that finds none). Produce
// (v9, two topics, 16 KiB of records each; read whole): the client quota's
// hold and reservation, the walks that hold and charge each topic, then
// the response's record and throttle. Fetch (v12, two topics of 2
// partitions): the walks that hold and clamp each topic's partitions, the
// response (two topics, 16 KiB each) read in place and charged per topic,
// then the record and throttle. One of the two topics has a per-topic
// quota; the other matches none (a topic prefix that does not fit it).
func BenchmarkPolicyTopics(b *testing.B) {
	for _, api := range []string{"produce", "fetch"} {
		for _, topics := range []string{"none", "on"} {
			b.Run(api+"/topics="+topics, func(b *testing.B) {
				key := model.ProducerByteRate
				if api == "fetch" {
					key = model.ConsumerByteRate
				}
				eng, err := quota.NewEngine(quota.EngineConfig{SharedDeadline: true, ByteRate: quota.ByteRateTokenBucket})
				if err != nil {
					b.Fatal(err)
				}
				var qs model.Quotas
				if err := qs.Set(model.Entity{Client: model.Default()}, key, 1e15); err != nil {
					b.Fatal(err)
				}
				if topics == "on" {
					for _, e := range []model.Entity{
						model.TopicEntity(model.Entity{}, model.Exact("orders")),
						model.TopicEntity(model.UserEntity(model.Default()), model.Prefix("logs-")),
					} {
						if err := qs.Set(e, key, 1e15); err != nil {
							b.Fatal(err)
						}
					}
				}
				eng.SetQuotas(qs)
				p := benchFilter(b, Config{Engine: eng})
				ci, q := connOf(p)
				f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
				var req kmsg.Request
				var resp *kmsg.FetchResponse
				if api == "produce" {
					pr := kmsg.NewPtrProduceRequest()
					pr.Version, pr.Acks, pr.TimeoutMillis = 9, 1, 1000
					for _, name := range []string{"orders", "payments"} {
						t := kmsg.NewProduceRequestTopic()
						t.Topic = name
						t.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, 16<<10)}}
						pr.Topics = append(pr.Topics, t)
					}
					req = pr
				} else {
					fr := kmsg.NewPtrFetchRequest()
					fr.Version, fr.MaxBytes = 12, 50<<20
					resp = kmsg.NewPtrFetchResponse()
					resp.Version = 12
					for _, name := range []string{"orders", "payments"} {
						t := kmsg.NewFetchRequestTopic()
						t.Topic = name
						t.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}, {Partition: 1, PartitionMaxBytes: 1 << 20}}
						fr.Topics = append(fr.Topics, t)
						rt := kmsg.NewFetchResponseTopic()
						rt.Topic = name
						rp := kmsg.NewFetchResponseTopicPartition()
						rp.RecordBatches = make([]byte, 16<<10)
						rt.Partitions = append(rt.Partitions, rp)
						resp.Topics = append(resp.Topics, rt)
					}
					req = fr
				}
				frame := f.AppendRequest(nil, req, 1)[4:]
				h, err := wire.ParseRequestHeader(frame)
				if err != nil {
					b.Fatal(err)
				}
				r := &proxy.Request{Key: req.Key(), Version: req.GetVersion(), ClientID: "bench", Size: len(frame), Payload: frame,
					BodyOffset: h.BodyOffset, Acks: 1, Flexible: true}
				var answer *proxy.Response
				size := 100
				if resp != nil {
					answer = proxytest.Response(r, resp)
					size = len(answer.Buf.B) - 4
				}
				b.ReportAllocs()
				for b.Loop() {
					if v := q.OnRequest(ci, r); v.Hold != 0 {
						b.Fatal("held under a quota never reached")
					}
					if answer != nil {
						if err := q.OnResponse(ci, answer); err != nil {
							b.Fatal(err)
						}
					}
					if t := q.Throttle(ci, r, size); t != 0 {
						b.Fatal("throttled under a quota never reached")
					}
				}
				if topics == "on" && len(eng.Usage(time.Now())) != 2 {
					b.Fatalf("buckets %+v, want the client's and orders'", eng.Usage(time.Now()))
				}
			})
		}
	}
}
