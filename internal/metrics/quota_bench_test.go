package metrics

import (
	"io"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/internal/quota"
)

// BenchmarkQuotaScrape is one /metrics scrape (promhttp, uncompressed) of a
// gateway holding 100 000 live quota buckets, with the default
// quota.metrics_max_buckets (1000) and with every bucket exported.
func BenchmarkQuotaScrape(b *testing.B) {
	const buckets = 100_000
	eng := clientQuotaEngine(b, quota.EngineConfig{}, 1e6)
	for i := range buckets {
		eng.Client("u", "client-"+strconv.Itoa(i)).RecordProduce(1000+i%5000, t0.Add(time.Duration(i)*time.Microsecond*100))
	}
	now := func() time.Time { return t0.Add(20 * time.Second) }
	for _, series := range []int{1000, buckets} {
		b.Run("series_buckets="+strconv.Itoa(series), func(b *testing.B) {
			m := New()
			m.RegisterQuotasAt(eng, series, now)
			h := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
			req := httptest.NewRequest("GET", "/metrics", nil)
			var size int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				size = rec.Body.Len()
				_, _ = io.Copy(io.Discard, rec.Body)
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}
