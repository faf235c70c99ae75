package rate

import "testing"

// sink keeps the compiler from dropping the results being measured.
var sink int64

// The quota engine's per-record cost: record, then measure, the clock moving
// 1 ms per call so that samples roll over and purges happen.
func BenchmarkSampledRecordMeasure(b *testing.B) {
	r := NewSampled(11, 1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0 + int64(i)
		r.Record(1000, now)
		o, w := r.Measure(now)
		sink += int64(ThrottleMs(o, 1e6, w, 30000))
	}
}

func BenchmarkSampledPeek(b *testing.B) {
	r := NewSampled(11, 1000)
	for i := range 20 {
		r.Record(1000, t0+int64(i)*700)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, w := r.Peek(t0 + 14000)
		sink += w
	}
}

func BenchmarkTokenBucketRecord(b *testing.B) {
	tb := NewTokenBucket(1e6, 10, 1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tb.Record(1000, t0+int64(i))
		sink += TokenThrottleTime(tb.Balance(), tb.Quota())
	}
}
