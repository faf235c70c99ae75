package metrics_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/quota"
)

// A client-id prefix group and a client-id spelled like its prefix are two
// series: client_id_prefix tells them apart.
func TestQuotaPrefixLabel(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var q quota.Quotas
	q.Set(quota.ClientPrefixEntity("bar-"), quota.ProducerByteRate, 1000)
	q.Set(quota.ClientEntity(quota.Exact("bar-")), quota.ProducerByteRate, 2000)
	eng.SetQuotas(q)
	m := metrics.New()
	m.RegisterQuotas(eng, 10)
	now := time.Now()
	eng.Client("a", "bar-1").RecordProduce(10, now)
	eng.Client("a", "bar-").RecordProduce(10, now)
	expect(t, m.Registry, 1000, "tollgate_quota_limit", "client_id", "", "client_id_prefix", "bar-", "user", "")
	expect(t, m.Registry, 2000, "tollgate_quota_limit", "client_id", "bar-", "client_id_prefix", "")
}
