package telemetry

import (
	"errors"
	"math"
	"testing"
)

// FuzzDecode: a push's metrics bytes and compression type are attacker
// input. Whatever they are, decoding ends with the chosen metrics or
// with ErrTooLarge or ErrMalformed, never holds more than the limit
// decompressed, and yields only finite, non-negative values.
func FuzzDecode(f *testing.F) {
	raw := marshal(f, librdkafkaPush())
	for _, c := range []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		f.Add(compress(f, c, raw), c)
		f.Add(compress(f, c, make([]byte, 8192)), c) // past the limit below
	}
	f.Add(xerial(raw, 100), CompressionSnappy)
	f.Add([]byte{}, CompressionNone)
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00}, int8(7))
	const limit = 4096
	d := newDecoder(limit)
	f.Fuzz(func(t *testing.T, metrics []byte, compression int8) {
		out, err := d.decompress(metrics, compression)
		if err == nil && len(out) > limit {
			t.Fatalf("decompressed %d bytes, limit %d", len(out), limit)
		}
		v, err := d.decode(metrics, compression)
		if err != nil {
			if err != ErrTooLarge && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is neither too large nor malformed", err)
			}
			return
		}
		for m := Metric(0); m < NumMetrics; m++ {
			if x, ok := v.Get(m); ok && (math.IsNaN(x) || math.IsInf(x, 0) || x < 0) {
				t.Fatalf("%s = %v", m, x)
			}
		}
		if v.Has >= 1<<NumMetrics {
			t.Fatalf("has %b", v.Has)
		}
	})
}
