package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// rewriteCheck runs RewriteAddresses on resp's frame and compares the
// result with want (a function of the decoded original); it also checks
// that no upstream host survives anywhere in the frame.
func rewriteCheck(t *testing.T, resp kmsg.Response, want func(kmsg.Response)) *testMapper {
	t.Helper()
	k, v := resp.Key(), resp.GetVersion()
	name := fmt.Sprintf("%s v%d", kmsg.NameForKey(k), v)
	buf := responseFrame(resp, 0x5eed)
	defer buf.Release()
	exp := decodeResponse(t, buf.B, k, v)
	want(exp)
	m := &testMapper{}
	if err := wire.RewriteAddresses(buf, k, v, reqFlexible(k, v), m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if wire.CorrelationID(buf.B[4:]) != 0x5eed {
		t.Errorf("%s: correlation id lost", name)
	}
	got := decodeResponse(t, buf.B, k, v)
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s:\n got %+v\nwant %+v", name, got, exp)
	}
	if bytes.Contains(buf.B, []byte(upstreamMark)) {
		t.Errorf("%s: an upstream host is still in the frame", name)
	}
	return m
}

// mapped returns host and port as the test mapper advertises node id.
func mapped(id int32) (string, int32) { return gatewayHost, mappedPort(id) }

func TestCarriesAddresses(t *testing.T) {
	want := []int16{0, 1, 3, 10, 55, 60, 78, 79}
	for k := int16(-1); k <= wire.MaxKey+1; k++ {
		if got := wire.CarriesAddresses(k); got != slices.Contains(want, k) {
			t.Errorf("CarriesAddresses(%d) = %v", k, got)
		}
	}
}

func TestRewriteMetadata(t *testing.T) {
	for v := int16(0); v <= 13; v++ {
		resp := kmsg.NewPtrMetadataResponse()
		fill(resp, int(v))
		resp.SetVersion(v)
		resp.Brokers = nil
		for _, id := range []int32{1, 99, 2, 3} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id, upstreamHost(id), 9092+id
			b.Rack = kmsg.StringPtr("rack-1")
			resp.Brokers = append(resp.Brokers, b)
		}
		resp.ControllerID = 99 // node ids are never touched
		resp.Topics[0].Partitions[0].Leader = 99
		m := rewriteCheck(t, resp, func(resp kmsg.Response) {
			r := resp.(*kmsg.MetadataResponse)
			var bs []kmsg.MetadataResponseBroker
			for _, b := range r.Brokers {
				if b.NodeID == 99 {
					continue // no gateway address: left out
				}
				b.Host, b.Port = mapped(b.NodeID)
				bs = append(bs, b)
			}
			r.Brokers = bs
		})
		if !slices.Equal(m.calls, []int32{1, 99, 2, 3}) {
			t.Errorf("Metadata v%d: mapper asked for %v", v, m.calls)
		}
	}
}

// untouched checks that RewriteAddresses leaves resp's frame exactly as it
// is, in the same backing array, without consulting the mapper.
func untouched(t *testing.T, resp kmsg.Response) {
	t.Helper()
	k, v := resp.Key(), resp.GetVersion()
	buf := responseFrame(resp, 1)
	defer buf.Release()
	orig := clone(buf.B)
	data := unsafe.SliceData(buf.B)
	m := &testMapper{}
	if err := wire.RewriteAddresses(buf, k, v, reqFlexible(k, v), m); err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(k), v, err)
	}
	if !bytes.Equal(buf.B, orig) || unsafe.SliceData(buf.B) != data || len(m.calls) != 0 {
		t.Errorf("%s v%d: frame rewritten (same bytes %v, same array %v, mapper calls %v)",
			kmsg.NameForKey(k), v, bytes.Equal(buf.B, orig), unsafe.SliceData(buf.B) == data, m.calls)
	}
}

func TestRewriteProduce(t *testing.T) {
	for v := int16(0); v <= 13; v++ {
		// Without node endpoints (and without any top-level tag): walked,
		// never re-encoded.
		resp := produceResponse(v)
		resp.Brokers = nil
		resp.UnknownTags = kmsg.Tags{}
		untouched(t, resp)
		if v < 9 {
			// No tag section to carry node endpoints: nothing to do.
			untouched(t, produceResponse(v))
			continue
		}
		resp = produceResponse(v)
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port = 99, upstreamHost(99), 9092
		resp.Brokers = append(resp.Brokers, b)
		rewriteCheck(t, resp, func(resp kmsg.Response) {
			r := resp.(*kmsg.ProduceResponse)
			r.Brokers = r.Brokers[:2]
			for i := range r.Brokers {
				r.Brokers[i].Host, r.Brokers[i].Port = mapped(r.Brokers[i].NodeID)
			}
		})
	}
}

func TestRewriteFetch(t *testing.T) {
	for v := int16(0); v <= 18; v++ {
		untouched(t, fetchResponse(v, 4, 3000, false))
		if v < 12 {
			untouched(t, fetchResponse(v, 4, 3000, true))
			continue
		}
		rewriteCheck(t, fetchResponse(v, 4, 3000, true), func(resp kmsg.Response) {
			r := resp.(*kmsg.FetchResponse)
			r.Brokers = r.Brokers[:2] // 99 has no gateway address
			for i := range r.Brokers {
				r.Brokers[i].Host, r.Brokers[i].Port = mapped(r.Brokers[i].NodeID)
			}
		})
		// Nothing but records, and an empty response.
		untouched(t, fetchResponse(v, 1, 1<<16, false))
		empty := kmsg.NewPtrFetchResponse()
		empty.SetVersion(v)
		untouched(t, empty)
	}
}

func TestRewriteShareFetch(t *testing.T) {
	for v := int16(0); v <= 2; v++ {
		sf := kmsg.NewPtrShareFetchResponse()
		fill(sf, int(v))
		sf.SetVersion(v)
		sf.NodeEndpoints = nil
		for _, id := range []int32{1, 99, 4} {
			e := kmsg.NewShareFetchResponseNodeEndpoint()
			e.NodeID, e.Host, e.Port, e.Rack = id, upstreamHost(id), 9092, kmsg.StringPtr("r")
			sf.NodeEndpoints = append(sf.NodeEndpoints, e)
		}
		rewriteCheck(t, sf, func(resp kmsg.Response) {
			r := resp.(*kmsg.ShareFetchResponse)
			r.NodeEndpoints = []kmsg.ShareFetchResponseNodeEndpoint{r.NodeEndpoints[0], r.NodeEndpoints[2]}
			for i := range r.NodeEndpoints {
				r.NodeEndpoints[i].Host, r.NodeEndpoints[i].Port = mapped(r.NodeEndpoints[i].NodeID)
			}
		})

	}
}

func TestRewriteAddressesMalformed(t *testing.T) {
	full := []kmsg.Response{
		produceResponse(10),
		produceResponse(13),
		fetchResponse(16, 2, 50, true),
		fetchResponse(13, 2, 50, false),
	}
	for _, k := range []int16{int16(kmsg.Metadata), int16(kmsg.ShareFetch)} {
		r := kmsg.ResponseForKey(k)
		fill(r, 3)
		r.SetVersion(r.MaxVersion())
		full = append(full, r)
	}
	for _, resp := range full {
		k, v := resp.Key(), resp.GetVersion()
		frame := responseFrame(resp, 1)
		for cut := 4; cut < len(frame.B); cut++ {
			buf := pooled(frame.B[:cut])
			err := wire.RewriteAddresses(buf, k, v, reqFlexible(k, v), &testMapper{})
			if err != nil {
				if cut >= 8 && !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, wire.ErrShortFrame) {
					t.Errorf("%s v%d cut at %d: %v", kmsg.NameForKey(k), v, cut, err)
				}
				if !bytes.Equal(buf.B, frame.B[:cut]) {
					t.Errorf("%s v%d cut at %d: failed rewrite changed the frame", kmsg.NameForKey(k), v, cut)
				}
			}
			buf.Release()
		}
		frame.Release()
	}
}
