package kafkaapi

import (
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
)

// What the reserved-topics filter adds to the requests of the data path
// that name none of Tollgate's topics: read in place, never decoded, no
// allocation. Run with
//
//	go test -run xxx -bench Reserved -benchmem ./internal/kafkaapi/
func BenchmarkReservedProduce(b *testing.B) {
	f := reservedOf(b, clusterIDs())
	c := connAs(aliceUser)
	small := func(v int16, topics ...string) *proxy.Request { return produceFrame(b, v, 1, 1024, topics...) }
	head := func(v int16, topics ...string) *proxy.Request { return bigProduceHead(b, v, topics...) }
	for _, bc := range []struct {
		name string
		r    *proxy.Request
		// topics: the session checks the topics past the head.
		topics bool
	}{
		{"1KiB,v9", small(9, ownTopic), false},
		{"1KiB,v13", small(13, ownTopic), false},
		{"3x1KiB,v9", small(9, ownTopic, "payments", "payments"), false},
		{"1MiB-streamed,v9", head(9, ownTopic), false},
		{"1MiB-streamed,2-topics,v9", head(9, ownTopic, "payments"), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := f.OnRequest(c, bc.r)
				if v.Forward != nil || v.Respond != nil || v.Close != "" || (v.Topics != nil) != bc.topics {
					b.Fatalf("verdict %+v", v)
				}
			}
		})
	}
}

func BenchmarkReservedFetch(b *testing.B) {
	f := reservedOf(b, clusterIDs())
	c := connAs(aliceUser)
	for _, v := range []int16{12, 16} {
		r, err := proxytest.Request(fetchReq(v, ownTopic, "payments"), 1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v := f.OnRequest(c, r); v.Forward != nil {
					b.Fatal("rewritten")
				}
			}
		})
	}
}
