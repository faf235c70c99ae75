package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
)

// A client-id prefix group's bucket and resolution: client_id_prefix names
// the group, apart from a client-id spelled the same.
func TestPrefixBucketsAndResolve(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	eng, err := quota.NewEngine(quota.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var q quota.Quotas
	q.Set(quota.ClientPrefixEntity("bar-"), quota.ProducerByteRate, 1000)
	q.Set(quota.ClientEntity(quota.Exact("bar-")), quota.ProducerByteRate, 2000)
	eng.SetQuotas(q)
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
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, localRequest("GET", tc.path, nil))
		var buf bytes.Buffer
		json.Compact(&buf, rec.Body.Bytes())
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s lacks %s:\n%s", tc.path, w, buf.String())
			}
		}
	}
}
