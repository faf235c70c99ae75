package control

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/store"
)

// DescribeClientQuotas over a store of 100 000 entities (issue 23 point
// 1): a strict filter naming one entity reads that entity alone; a filter
// that matches every entity reads them all.
func BenchmarkDescribeClientQuotas(b *testing.B) {
	const n = 100_000
	f := newFixture(b)
	changes := make([]store.EntityChange, 0, n)
	for i := range n {
		changes = append(changes, store.EntityChange{
			Entity: store.MustEntity(store.Named(store.TypeUser, fmt.Sprintf("user-%06d", i))),
			Ops:    []store.Op{{Key: "producer_byte_rate", Value: 1 << 20}},
		})
	}
	if err := f.cq.Store.AlterClientQuotas(changes); err != nil {
		b.Fatal(err)
	}
	one := kmsg.NewPtrDescribeClientQuotasRequest()
	one.Strict = true
	name := "user-050000"
	one.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: store.TypeUser, MatchType: 0, Match: &name}}
	all := kmsg.NewPtrDescribeClientQuotasRequest()
	for _, bc := range []struct {
		name    string
		req     *kmsg.DescribeClientQuotasRequest
		entries int
	}{{"one-entity", one, 1}, {"every-entity", all, n}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := f.cq.Describe(context.Background(), admin, bc.req); r.ErrorCode != 0 || len(r.Entries) != bc.entries {
					b.Fatalf("error %d, %d entries, want %d", r.ErrorCode, len(r.Entries), bc.entries)
				}
			}
		})
	}
}
