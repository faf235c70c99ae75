package proxy_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/usage"
)

// usageHook is the app's ServeHook of the usage ledger (app/usage.go).
type usageHook struct{ l *usage.Ledger }

func (h *usageHook) Served(c *principal.ConnInfo, r *proxy.Request, respSize int, throttle time.Duration) {
	h.l.Record(c.Principal.Name, r.ClientID, r.Key, r.Size, respSize, throttle, time.Now())
}

// BenchmarkSessionProduceUsage is BenchmarkSessionProduce with the usage
// ledger's ServeHook registered: still 0 allocs/op.
func BenchmarkSessionProduceUsage(b *testing.B) {
	dir := b.TempDir()
	l, err := usage.Open(usage.Options{Dir: dir, Instance: "bench", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	proxy.BenchSessionProduce(b, proxy.WithHooks(&usageHook{l}))
	b.StopTimer()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	r, err := usage.Read(dir, usage.Query{Since: now.Add(-time.Hour), Until: now.Add(time.Hour), By: usage.ByClientID})
	if err != nil {
		b.Fatal(err)
	}
	// Every round trip (and the warm-up) was counted.
	if r.Total.Requests < int64(b.N)+1 || r.Total.ProduceBytes == 0 {
		b.Fatalf("ledger counted %+v for %d round trips", r.Total, b.N)
	}
}
