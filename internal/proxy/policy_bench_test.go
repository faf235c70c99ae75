package proxy_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/kafkaapi"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// BenchmarkSessionProduceQuotas is BenchmarkSessionProduce through the
// gateway's filter chain without the quota filter (quotas=off) and with it
// and a producer_byte_rate far above the traffic (configured, never
// reached), under each byte-rate algorithm: every request is then
// hold-checked, reserved, recorded and answered with a throttle decision. Compare them with benchstat:
//
//	go test -run xxx -bench SessionProduceQuotas -count 10 ./internal/proxy/ > /tmp/q.txt
//	benchstat -col /quotas /tmp/q.txt
func BenchmarkSessionProduceQuotas(b *testing.B) {
	b.Run("quotas=off", func(b *testing.B) {
		proxy.BenchSessionProduce(b, proxy.WithChain(kafkaapi.Chain(kafkaapi.Deps{})))
	})
	for _, alg := range []quota.ByteRateAlgorithm{quota.ByteRateTokenBucket, quota.ByteRateSampled} {
		b.Run("quotas="+alg.String(), func(b *testing.B) {
			eng, err := quota.NewEngine(quota.EngineConfig{SharedDeadline: true, ByteRate: alg})
			if err != nil {
				b.Fatal(err)
			}
			var q model.Quotas
			if err := q.Set(model.Entity{Client: model.Default()}, model.ProducerByteRate, 1e12); err != nil {
				b.Fatal(err)
			}
			eng.SetQuotas(q)
			proxy.BenchSessionProduce(b, proxy.WithChain(kafkaapi.Chain(kafkaapi.Deps{Quota: benchQuotaFilter(b, eng)})))
			// The requests went through a live, bounded bucket.
			var bounded bool
			for _, u := range eng.Usage(time.Now()) {
				bounded = bounded || (u.Key == model.ProducerByteRate && u.Level != model.LevelNone && u.Rate > 0)
			}
			if !bounded {
				b.Fatal("no producer_byte_rate bucket with a quota recorded the requests")
			}
		})
	}
}

// BenchmarkSessionProduceTopics is BenchmarkSessionProduce with a
// per-topic producer_byte_rate on its topic, far above the traffic, beside
// the client quota: each Produce is also walked, held-checked and charged
// per topic. It allocates nothing.
func BenchmarkSessionProduceTopics(b *testing.B) {
	eng, err := quota.NewEngine(quota.EngineConfig{SharedDeadline: true, ByteRate: quota.ByteRateTokenBucket})
	if err != nil {
		b.Fatal(err)
	}
	var q model.Quotas
	for _, e := range []model.Entity{{Client: model.Default()}, model.TopicEntity(model.Entity{}, model.Exact("bench"))} {
		if err := q.Set(e, model.ProducerByteRate, 1e12); err != nil {
			b.Fatal(err)
		}
	}
	eng.SetQuotas(q)
	proxy.BenchSessionProduce(b, proxy.WithChain(kafkaapi.Chain(kafkaapi.Deps{Quota: benchQuotaFilter(b, eng)})))
	var topic bool
	for _, u := range eng.Usage(time.Now()) {
		topic = topic || (u.Topic == "bench" && u.Rate > 0)
	}
	if !topic {
		b.Fatal("the per-topic bucket recorded nothing")
	}
}

// BenchmarkSessionProduceReserved is BenchmarkSessionProduce through the
// gateway's filter chain without Tollgate's own topics (reserved=none: the
// chain has no reserved-topics filter) and with two (each Produce's topics
// are read in place; the request names neither): the same cost, no
// allocation.
//
//	go test -run xxx -bench SessionProduceReserved -count 10 ./internal/proxy/ > /tmp/r.txt
//	benchstat -col /reserved /tmp/r.txt
func BenchmarkSessionProduceReserved(b *testing.B) {
	b.Run("reserved=none", func(b *testing.B) {
		proxy.BenchSessionProduce(b, proxy.WithChain(kafkaapi.Chain(kafkaapi.Deps{})))
	})
	b.Run("reserved=2", func(b *testing.B) {
		proxy.BenchSessionProduce(b, proxy.WithChain(kafkaapi.Chain(kafkaapi.Deps{Reserved: []string{"tollgate-audit", "tollgate-usage"}})))
	})
}

// benchQuotaFilter is the quota filter on eng.
func benchQuotaFilter(b *testing.B, eng *quota.Engine) *enforce.Filter {
	b.Helper()
	f, err := enforce.New(enforce.Config{Engine: eng})
	if err != nil {
		b.Fatal(err)
	}
	return f
}
