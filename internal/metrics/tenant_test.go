package metrics_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// A tenant's ceilings are series by tenant and key: rate, limit, active
// principals and their fair share, throttles; a shadow tenant's would-be
// throttles.
func TestTenantMetrics(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{ByteRate: quota.ByteRateTokenBucket, SharedDeadline: true})
	if err != nil {
		t.Fatal(err)
	}
	set, err := quota.NewTenantSet([]quota.Tenant{
		{Name: "team-a", Principals: []string{"a1", "a2"}, Ceilings: map[model.Key]float64{model.ProducerByteRate: 1000}},
		{Name: "team-s", Principals: []string{"s1"}, Ceilings: map[model.Key]float64{model.ProducerByteRate: 1000}, Options: model.Options{Shadow: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	eng.SetTenants(set, now)
	m := metrics.New()
	m.RegisterTenants(eng, func() time.Time { return now })
	for _, u := range []string{"a1", "a2", "s1"} {
		c := eng.Client(u, "app")
		for range 3 {
			c.RecordProduce(6000, now) // past the 10 000-byte burst
		}
	}
	a := []string{"tenant", "team-a", "quota", "producer_byte_rate"}
	expect(t, m.Registry, 1000, "tollgate_tenant_limit", a...)
	expect(t, m.Registry, 2, "tollgate_tenant_active_principals", a...)
	expect(t, m.Registry, 500, "tollgate_tenant_fair_share", a...)
	if v, ok := sample(t, m.Registry, "tollgate_tenant_throttled_total", a...); !ok || v == 0 {
		t.Errorf("team-a throttled %v", v)
	}
	s := []string{"tenant", "team-s"}
	expect(t, m.Registry, 0, "tollgate_tenant_throttled_total", s...)
	expect(t, m.Registry, 3, "tollgate_tenant_shadow_records_total", s...)
	if v, ok := sample(t, m.Registry, "tollgate_tenant_shadow_throttled_total", s...); !ok || v == 0 {
		t.Errorf("team-s would have throttled %v", v)
	}
	if _, ok := sample(t, m.Registry, "tollgate_tenant_shadow_records_total", a...); ok {
		t.Error("an enforced tenant exports shadow series")
	}
}
