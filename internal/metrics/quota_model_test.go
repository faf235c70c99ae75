package metrics_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// A client-id prefix group and a client-id spelled like its prefix are two
// series: client_id_prefix tells them apart.
func TestQuotaPrefixLabel(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var q model.Quotas
	q.Set(model.ClientPrefixEntity("bar-"), model.ProducerByteRate, 1000)
	q.Set(model.ClientEntity(model.Exact("bar-")), model.ProducerByteRate, 2000)
	eng.SetQuotas(q)
	m := metrics.New()
	m.RegisterQuotas(eng, 10)
	now := time.Now()
	eng.Client("a", "bar-1").RecordProduce(10, now)
	eng.Client("a", "bar-").RecordProduce(10, now)
	expect(t, m.Registry, 1000, "tollgate_quota_limit", "client_id", "", "client_id_prefix", "bar-", "user", "")
	expect(t, m.Registry, 2000, "tollgate_quota_limit", "client_id", "bar-", "client_id_prefix", "")
}

// A shadow bucket exports what it would have throttled, and no throttle.
func TestQuotaShadowMetrics(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var q model.Quotas
	u := model.UserEntity(model.Exact("alice"))
	q.Set(u, model.ProducerByteRate, 1000)
	q.Set(model.UserEntity(model.Exact("bob")), model.ProducerByteRate, 1000)
	q.SetOptions(u, model.Options{Shadow: true})
	eng.SetQuotas(q)
	m := metrics.New()
	m.RegisterQuotas(eng, 10)
	now := time.Now()
	cl := eng.Client("alice", "app")
	for i := 0; i < 4; i++ {
		cl.RecordProduce(5000, now) // the 10 000-byte burst, then 5 000 and 10 000 over: 5 s, 10 s
	}
	lv := []string{"quota", "producer_byte_rate", "user", "alice"}
	expect(t, m.Registry, 4, "tollgate_quota_shadow_records_total", lv...)
	expect(t, m.Registry, 2, "tollgate_quota_shadow_throttled_total", lv...)
	expect(t, m.Registry, 15, "tollgate_quota_shadow_throttle_seconds_total", lv...)
	expect(t, m.Registry, 0, "tollgate_quota_throttled_total", lv...)
	eng.Client("bob", "app").RecordProduce(50000, now)
	if _, ok := sample(t, m.Registry, "tollgate_quota_shadow_records_total", "user", "bob"); ok {
		t.Error("an enforced bucket exports shadow series")
	}
	expect(t, m.Registry, 1, "tollgate_quota_throttled_total", "user", "bob")
}

// A per-topic bucket is a series of its own: topic (or topic_prefix) tells
// it apart from the client quota's bucket of the same user.
func TestQuotaTopicLabels(t *testing.T) {
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var q model.Quotas
	alice := model.UserEntity(model.Exact("alice"))
	q.Set(alice, model.ProducerByteRate, 1000)
	q.Set(model.TopicEntity(alice, model.Exact("orders")), model.ProducerByteRate, 2000)
	q.Set(model.TopicEntity(alice, model.Prefix("logs-")), model.ProducerByteRate, 3000)
	eng.SetQuotas(q)
	m := metrics.New()
	m.RegisterQuotas(eng, 10)
	now := time.Now()
	cl := eng.Client("alice", "app")
	cl.RecordProduce(10, now)
	cl.RecordTopic(model.ProducerByteRate, []byte("orders"), 10, now)
	cl.RecordTopic(model.ProducerByteRate, []byte("logs-a"), 10, now)
	expect(t, m.Registry, 1000, "tollgate_quota_limit", "user", "alice", "topic", "", "topic_prefix", "")
	expect(t, m.Registry, 2000, "tollgate_quota_limit", "user", "alice", "topic", "orders", "topic_prefix", "")
	expect(t, m.Registry, 3000, "tollgate_quota_limit", "user", "alice", "topic", "", "topic_prefix", "logs-")
	expect(t, m.Registry, 3, "tollgate_quota_buckets", "quota", "producer_byte_rate")
}
