package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestClampFetch(t *testing.T) {
	for v := int16(0); v <= Lookup(int16(kmsg.Fetch)).Max; v++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		req.MaxWaitMillis = 500
		req.MinBytes = 1 << 20
		req.MaxBytes = 50 << 20
		var f kmsg.RequestFormatter
		frame := f.AppendRequest(nil, req, 1)
		p := frame[4:]
		h, err := ParseRequestHeader(p)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := FetchMaxBytes(p, h.BodyOffset, v); ok != (v >= 3) || (ok && m != 50<<20) {
			t.Fatalf("v%d: FetchMaxBytes %d %v", v, m, ok)
		}
		if w, ok := FetchMaxWait(p, h.BodyOffset, v); !ok || w != 500 {
			t.Fatalf("v%d: FetchMaxWait %d %v", v, w, ok)
		}
		if m, ok := FetchMinBytes(p, h.BodyOffset, v); !ok || m != 1<<20 {
			t.Fatalf("v%d: FetchMinBytes %d %v", v, m, ok)
		}
		if _, ok := FetchMinBytes(p[:h.BodyOffset+7], h.BodyOffset, 15); ok {
			t.Fatalf("v%d: FetchMinBytes read past a truncated body", v)
		}
		changed := ClampFetch(p, h.BodyOffset, v, 30000)
		got := kmsg.NewPtrFetchRequest()
		got.Version = v
		if err := got.ReadFrom(p[h.BodyOffset:]); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if v < 3 {
			if changed || got.MinBytes != 1<<20 {
				t.Fatalf("v%d has no max_bytes and must be left alone", v)
			}
			continue
		}
		if !changed || got.MaxBytes != 30000 || got.MinBytes != 30000 || got.MaxWaitMillis != 500 {
			t.Fatalf("v%d: max %d min %d wait %d", v, got.MaxBytes, got.MinBytes, got.MaxWaitMillis)
		}
		if ClampFetch(p, h.BodyOffset, v, 40000) {
			t.Fatalf("v%d: raising must not change anything", v)
		}
	}
}
