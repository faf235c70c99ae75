package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// A client-id prefix group's bucket and resolution: client_id_prefix names
// the group, apart from a client-id spelled the same.
func TestPrefixBucketsAndResolve(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var q model.Quotas
	q.Set(model.ClientPrefixEntity("bar-"), model.ProducerByteRate, 1000)
	q.Set(model.ClientEntity(model.Exact("bar-")), model.ProducerByteRate, 2000)
	eng := engineWith(t, quota.EngineConfig{}, q)
	eng.Client("alice", "bar-1").RecordProduce(100, now)
	eng.Client("alice", "bar-").RecordProduce(100, now)
	h := Handler(Sources{Engine: eng, Now: func() time.Time { return now }, Access: readable})
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/api/v1/buckets", []string{
			`"user":"","client_id":"","client_id_prefix":"bar-","level":"client-id-prefix","entity":[{"type":"client-id-prefix","name":"bar-"}],"limit":1000`,
			`"user":"","client_id":"bar-","level":"client-id","entity":[{"type":"client-id","name":"bar-"}],"limit":2000`,
		}},
		{"/api/v1/resolve?user=alice&client_id=bar-9", []string{
			`"level":"client-id-prefix","entity":[{"type":"client-id-prefix","name":"bar-"}],"value":1000,"bucket_user":"","bucket_client_id":"","bucket_client_id_prefix":"bar-"`,
		}},
		{"/api/v1/resolve?user=alice&client_id=bar-", []string{
			`"level":"client-id","entity":[{"type":"client-id","name":"bar-"}],"value":2000,"bucket_user":"","bucket_client_id":"bar-","rate"`,
		}},
	} {
		_, body := getCompact(h, tc.path)
		expectIn(t, tc.path, body, tc.want...)
	}
}

// A shadow bucket says so, with what it would have throttled; its own
// throttle counters stay 0.
func TestShadowBucketsAndResolve(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var q model.Quotas
	u := model.UserEntity(model.Exact("alice"))
	q.Set(u, model.ProducerByteRate, 1000)
	q.SetOptions(u, model.Options{Shadow: true, Burst: 10, HasBurst: true})
	eng := engineWith(t, quota.EngineConfig{ByteRate: quota.ByteRateTokenBucket}, q)
	cl := eng.Client("alice", "app")
	cl.RecordProduce(5000, now) // within the 10 000-byte burst
	cl.RecordProduce(8000, now) // 3 000 over: 3 s
	cl.RecordProduce(1000, now) // 4 000 over: 4 s
	cl.RecordProduce(1000, now) // 5 000 over: 5 s
	h := Handler(Sources{Engine: eng, Now: func() time.Time { return now }, Access: readable})
	want := `"shadow":true,"shadowed":{"records":4,"throttled":3,"throttled_percent":75,"throttle_ms_total":12000,"throttle_ms_max":5000},"burst_seconds":10`
	for _, path := range []string{"/api/v1/buckets", "/api/v1/resolve?user=alice&client_id=x"} {
		_, body := getCompact(h, path)
		expectIn(t, path, body, want)
		if path == "/api/v1/buckets" && !strings.Contains(body, `"throttled":0,"throttle_ms_total":0`) {
			t.Errorf("a shadow bucket counts throttles of its own:\n%s", body)
		}
	}
}

// A per-topic quota's bucket names its topic (or topic prefix), and
// resolve answers for a topic asked with topic=.
func TestTopicBucketsAndResolve(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var q model.Quotas
	alice := model.UserEntity(model.Exact("alice"))
	q.Set(model.TopicEntity(alice, model.Prefix("logs-")), model.ProducerByteRate, 1000)
	q.Set(model.TopicEntity(model.Entity{}, model.Exact("orders")), model.ConsumerByteRate, 2000)
	eng := engineWith(t, quota.EngineConfig{}, q)
	eng.Client("alice", "app").RecordTopic(model.ProducerByteRate, []byte("logs-a"), 100, now)
	h := Handler(Sources{Engine: eng, Now: func() time.Time { return now }, Access: readable})
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/api/v1/buckets", []string{
			`"user":"alice","client_id":"","topic_prefix":"logs-","level":"user+topic","entity":[{"type":"user","name":"alice"},{"type":"topic-prefix","name":"logs-"}],"limit":1000`,
		}},
		{"/api/v1/resolve?user=alice&client_id=app&topic=logs-b", []string{
			`"topic":"logs-b","topic_quotas":[{"quota":"producer_byte_rate","level":"user+topic","entity":[{"type":"user","name":"alice"},{"type":"topic-prefix","name":"logs-"}],"value":1000,"bucket_user":"alice","bucket_client_id":"","bucket_topic_prefix":"logs-","rate":`,
		}},
		{"/api/v1/resolve?user=bob&client_id=app&topic=orders", []string{
			`{"quota":"consumer_byte_rate","level":"topic","entity":[{"type":"topic","name":"orders"}],"value":2000,"bucket_user":"","bucket_client_id":"","bucket_topic":"orders"`,
			`{"quota":"producer_byte_rate","level":"none","value":null`,
		}},
	} {
		_, body := getCompact(h, tc.path)
		expectIn(t, tc.path, body, tc.want...)
	}
}
