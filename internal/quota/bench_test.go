package quota

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

func benchEngine(b *testing.B, alg ...ByteRateAlgorithm) *Engine {
	b.Helper()
	cfg := EngineConfig{}
	if len(alg) > 0 {
		cfg.ByteRate = alg[0]
	}
	e := newTestEngine(b, cfg)
	var q model.Quotas
	for _, en := range tv9Initial {
		_ = q.Set(en.e, model.ProducerByteRate, en.v*1000)
	}
	e.SetQuotas(q)
	return e
}

// byAlgorithm runs f once per byte-rate algorithm, as sub-benchmarks.
func byAlgorithm(b *testing.B, f func(b *testing.B, a ByteRateAlgorithm)) {
	for _, a := range []ByteRateAlgorithm{ByteRateTokenBucket, ByteRateSampled} {
		b.Run("alg="+a.String(), func(b *testing.B) { f(b, a) })
	}
}

// benchProduce records a produce request per op on userA's one client (a
// connection's Client handle, as the quota filter holds one), the clock
// advancing 1 ms per call so samples roll over.
func benchProduce(b *testing.B, e *Engine) {
	c := e.Client("userA", "client1")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.RecordProduce(1000, time.UnixMilli(t0+int64(i)))
	}
}

// benchProduceParallel is benchProduce from parallel goroutines, each on
// the client user names for it (called once per goroutine).
func benchProduceParallel(b *testing.B, e *Engine, user func() string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := e.Client(user(), "client1")
		now := t0
		for pb.Next() {
			now++
			c.RecordProduce(1000, time.UnixMilli(now))
		}
	})
}

// numbered names a different user per call: prefix and a number.
func numbered(prefix string) func() string {
	var next atomic.Int64
	return func() string { return prefix + strconv.FormatInt(next.Add(1), 10) }
}

// One client.
func BenchmarkRecordProduce(b *testing.B) {
	byAlgorithm(b, func(b *testing.B, a ByteRateAlgorithm) { benchProduce(b, benchEngine(b, a)) })
}

// Each goroutine is a different (user, client-id) with its own bucket: the
// normal case of many connections.
func BenchmarkRecordProduceParallel(b *testing.B) {
	byAlgorithm(b, func(b *testing.B, a ByteRateAlgorithm) { benchProduceParallel(b, benchEngine(b, a), numbered("user-")) })
}

// Every goroutine (a connection each) hits the same bucket: the worst
// case, bound by the bucket's mutex (Kafka synchronizes on the sensor the
// same way).
func BenchmarkRecordProduceParallelShared(b *testing.B) {
	byAlgorithm(b, func(b *testing.B, a ByteRateAlgorithm) {
		benchProduceParallel(b, benchEngine(b, a), func() string { return "userA" })
	})
}

// Steady-state resolution in mixed mode (TV9's quotas), no rates.
func BenchmarkQuotasResolve(b *testing.B) {
	var q model.Quotas
	for _, en := range tv9Initial {
		_ = q.Set(en.e, model.ProducerByteRate, en.v)
	}
	b.ReportAllocs()
	for b.Loop() {
		q.Resolve(model.ProducerByteRate, "userD", "client2")
	}
}

// Engine.Resolve: resolution plus the bucket's current rate.
func BenchmarkEngineResolve(b *testing.B) {
	e := benchEngine(b)
	e.Client("userD", "client2").RecordProduce(1000, time.UnixMilli(t0))
	b.ReportAllocs()
	for b.Loop() {
		e.Resolve(model.ProducerByteRate, "userD", "client2", time.UnixMilli(t0))
	}
}

func BenchmarkFetchMaxBytes(b *testing.B) {
	e := newTestEngine(b, EngineConfig{})
	var q model.Quotas
	_ = q.Set(model.Entity{User: model.Default()}, model.ConsumerByteRate, 5000)
	e.SetQuotas(q)
	c := e.Client("alice", "consumer-1")
	b.ReportAllocs()
	for b.Loop() {
		c.FetchMaxBytes(time.UnixMilli(t0))
	}
}

// benchTenantEngine is benchEngine with ten tenants configured, the
// client's user a member of one (listed, by prefix or by rule).
func benchTenantEngine(b *testing.B, how string) *Engine {
	e := benchEngine(b, ByteRateTokenBucket)
	var ts []Tenant
	for i := range 10 {
		t := Tenant{Name: "tenant-" + strconv.Itoa(i), Ceilings: map[model.Key]float64{model.ProducerByteRate: 1e9, model.ConsumerByteRate: 1e9}}
		for j := range 10 {
			t.Principals = append(t.Principals, "user-"+strconv.Itoa(i)+"-"+strconv.Itoa(j))
		}
		ts = append(ts, t)
	}
	switch how {
	case "listed":
		ts[3].Principals = append(ts[3].Principals, "userA")
	case "prefix":
		ts[3].Prefixes = []string{"user"}
	}
	s, err := NewTenantSet(ts)
	if err != nil {
		b.Fatal(err)
	}
	e.SetTenants(s, time.UnixMilli(t0))
	return e
}

// The per-request cost with tenants configured: the client's own bucket
// and its tenant's ceiling and share (in a tenant), or the own bucket and
// one lookup that finds none (not in any).
func BenchmarkRecordProduceTenant(b *testing.B) {
	for _, how := range []string{"listed", "prefix", "none"} {
		b.Run("member="+how, func(b *testing.B) { benchProduce(b, benchTenantEngine(b, how)) })
	}
}

// Every goroutine is another principal of one tenant: they share its
// ceiling's bucket (the tenant's lock), each with its own share.
func BenchmarkRecordProduceTenantParallel(b *testing.B) {
	benchProduceParallel(b, benchTenantEngine(b, "prefix"), numbered("user-x"))
}
