package kafkaapi

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/wire"
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

// The check of a buffered Fetch answer (a fetch session may carry a
// reserved topic no request names): two tenant topics, 30 KiB of records
// each, read in place.
func BenchmarkReservedFetchAnswer(b *testing.B) {
	f := reservedOf(b, clusterIDs())
	c := connAs(aliceUser)
	f.learn(auditTopic, auditID) // the audit topic's id is known
	for _, v := range []int16{12, 16} {
		req := fetchReq(v, ownTopic, "payments")
		r, err := proxytest.Request(req, 1)
		if err != nil {
			b.Fatal(err)
		}
		resp := echo(req).(*kmsg.FetchResponse)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].RecordBatches = bytes.Repeat([]byte{byte(i + j)}, 15<<10)
			}
		}
		resp.SetVersion(v)
		buf := wire.EncodeResponse(r.CorrelationID, r.Flexible, resp)
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f.OnResponse(c, &proxy.Response{Req: r, Buf: buf}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
