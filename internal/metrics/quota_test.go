package metrics

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// gather returns the tollgate_quota_* families of m by name.
func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value returns the sample of family name whose labels include want.
func value(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	for _, m := range f.GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(want) {
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// t0 is an unaligned, wall-clock-like start for the explicit clocks.
var t0 = time.UnixMilli(1_700_000_000_123)

// clientQuotaEngine returns an engine with a default client-id producer
// quota of q: a bucket per client-id, the worst case for cardinality.
func clientQuotaEngine(tb testing.TB, cfg quota.EngineConfig, q float64) *quota.Engine {
	tb.Helper()
	eng, err := quota.NewEngine(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	var qs model.Quotas
	if err := qs.Set(model.Entity{Client: model.Default()}, model.ProducerByteRate, q); err != nil {
		tb.Fatal(err)
	}
	eng.SetQuotas(qs)
	return eng
}

// A client choosing a new client-id per request: the per-bucket series stay
// at quota.metrics_max_buckets (the busiest are kept), the engine's cap
// holds, and the totals and evictions say so.
func TestQuotaSeriesBounded(t *testing.T) {
	eng := clientQuotaEngine(t, quota.EngineConfig{MaxBuckets: 64, MaxRoutes: 64}, 1000)
	m := New()
	const series = 10
	m.RegisterQuotasAt(eng, series, func() time.Time { return t0.Add(2 * time.Second) })
	for i := range 1000 {
		eng.Client("mallory", fmt.Sprintf("id-%04d", i)).RecordProduce(100, t0.Add(time.Duration(i)*time.Millisecond))
	}
	eng.Client("alice", "heavy").RecordProduce(9000, t0.Add(time.Second)) // the busiest
	fams := gather(t, m)
	if n := len(fams["tollgate_quota_rate"].GetMetric()); n != series {
		t.Errorf("%d tollgate_quota_rate series, want %d", n, series)
	}
	if _, ok := value(fams["tollgate_quota_utilization"], map[string]string{"client_id": "heavy"}); !ok {
		t.Error("the busiest bucket is not exported")
	}
	pbr := map[string]string{"quota": "producer_byte_rate"}
	for name, want := range map[string]float64{
		"tollgate_quota_buckets":            64,
		"tollgate_quota_buckets_unexported": 64 - series,
		"tollgate_quota_routes":             64,
	} {
		if got, _ := value(fams[name], pbr); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// 1001 buckets through a cap of 64, evicted one at a time.
	for kind, want := range map[string]float64{"bucket": 1001 - 64, "throttled_bucket": 0, "route": 1001 - 64} {
		if got, _ := value(fams["tollgate_quota_evictions_total"], map[string]string{"quota": "producer_byte_rate", "kind": kind}); got != want {
			t.Errorf("evictions{kind=%s} = %v, want %v", kind, got, want)
		}
	}
	if got, ok := value(fams["tollgate_quota_expired_total"], map[string]string{"quota": "consumer_byte_rate", "kind": "bucket"}); !ok || got != 0 {
		t.Errorf("expired{consumer_byte_rate, bucket} = %v, %v; want a zero series for every key", got, ok)
	}
}
