package telemetry

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
)

// want is librdkafkaPush's chosen metrics: per-broker latencies combined
// (mean of averages, largest maximum), ints and doubles alike.
func wantLibrdkafka() map[Metric]float64 {
	return map[Metric]float64{
		NodeLatencyAvg: 3.5, NodeLatencyMax: 30,
		ProduceThrottleAvg: 812.5, ProduceThrottleMax: 1480,
		QueueTimeAvg: 40, QueueTimeMax: 1500,
		ProduceLatencyAvg: 3.25, ProduceLatencyMax: 31,
	}
}

func checkValues(t *testing.T, got Values, want map[Metric]float64) {
	t.Helper()
	for m := Metric(0); m < NumMetrics; m++ {
		v, ok := got.Get(m)
		w, wok := want[m]
		if ok != wok || v != w {
			t.Errorf("%s: got %v (reported %v), want %v (reported %v)", m, v, ok, w, wok)
		}
	}
}

// Every compression Kafka knows decodes to the same metrics, snappy both
// raw (librdkafka, franz-go) and xerial-framed (Java).
func TestDecodeEveryCompression(t *testing.T) {
	raw := marshal(t, librdkafkaPush())
	d := newDecoder(DefaultMaxBytes)
	for _, tc := range []struct {
		name  string
		codec int8
		data  []byte
	}{
		{"none", CompressionNone, raw},
		{"gzip", CompressionGzip, compress(t, CompressionGzip, raw)},
		{"snappy", CompressionSnappy, compress(t, CompressionSnappy, raw)},
		{"snappy xerial", CompressionSnappy, xerial(raw, 64)},
		{"lz4", CompressionLZ4, compress(t, CompressionLZ4, raw)},
		{"zstd", CompressionZstd, compress(t, CompressionZstd, raw)},
		// A streamed frame with no content size, declaring an 8 MiB
		// window, as librdkafka 2.16 sends a 440-byte push (found by
		// e2e's TestTelemetryConfluentPython): read, as Kafka reads it.
		{"zstd declaring a large window", CompressionZstd, zstdWindow(t, raw, 23)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.decode(tc.data, tc.codec)
			if err != nil {
				t.Fatal(err)
			}
			checkValues(t, got, wantLibrdkafka())
		})
	}
}

// A Java consumer's fetch metrics, as a sum or gauge, several resources:
// combined; values that are not measurements and metric kinds that are
// not numbers are left out.
func TestDecodeCombinesAndSkips(t *testing.T) {
	md := metricsData(
		gauge{"org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg", []point{dbl(100), dbl(300)}},
		gauge{"org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.max", []point{dbl(250), dbl(math.NaN()), dbl(math.Inf(1)), dbl(-5)}},
		gauge{"org.apache.kafka.consumer.fetch.manager.fetch.latency.avg", []point{dbl(math.NaN())}},
	)
	// The same metric again in a second resource, as a sum.
	md.ResourceMetrics = append(md.ResourceMetrics, &metricspb.ResourceMetrics{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
		{Name: "org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{
			DataPoints: []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsInt{AsInt: 500}}}}}},
		{Name: "org.apache.kafka.consumer.fetch.manager.fetch.latency.max", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
			DataPoints: []*metricspb.HistogramDataPoint{{Count: 3, Sum: ptr(9.0)}}}}},
		{Name: "org.apache.kafka.consumer.node.request.latency.max"}, // no data at all
	}}}})
	got, err := newDecoder(DefaultMaxBytes).decode(marshal(t, md), CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, got, map[Metric]float64{FetchThrottleAvg: 300, FetchThrottleMax: 250})
}

func ptr[T any](v T) *T { return &v }

// What a push is refused for, by the error PushTelemetry answers.
func TestDecodeRefusals(t *testing.T) {
	raw := marshal(t, librdkafkaPush())
	big := bytes.Repeat([]byte{0}, 100_000) // zeros are not MetricsData, but they compress to nothing
	limit := 4096
	d := newDecoder(limit)
	for _, tc := range []struct {
		name  string
		codec int8
		data  []byte
		want  error
	}{
		{"raw over the limit", CompressionNone, append(raw, make([]byte, limit)...), ErrTooLarge},
		{"zstd bomb", CompressionZstd, compress(t, CompressionZstd, big), ErrTooLarge},
		{"gzip bomb", CompressionGzip, compress(t, CompressionGzip, big), ErrTooLarge},
		{"lz4 bomb", CompressionLZ4, compress(t, CompressionLZ4, big), ErrTooLarge},
		{"snappy bomb", CompressionSnappy, compress(t, CompressionSnappy, big), ErrTooLarge},
		{"xerial bomb", CompressionSnappy, xerial(big, 32<<10), ErrTooLarge},
		{"not protobuf", CompressionNone, []byte("\xff\xff\xff\xff"), ErrMalformed},
		{"not gzip", CompressionGzip, raw, ErrMalformed},
		{"not lz4", CompressionLZ4, raw, ErrMalformed},
		{"not zstd", CompressionZstd, raw, ErrMalformed},
		{"not snappy", CompressionSnappy, []byte{0x03, 0xff, 0xff}, ErrMalformed},
		{"snappy stating a huge length", CompressionSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, ErrTooLarge},
		{"xerial cut short", CompressionSnappy, xerial(raw, 64)[:12], ErrMalformed},
		{"xerial block past the end", CompressionSnappy, append(xerial(nil, 1), 0, 0, 1, 0, 1), ErrMalformed},
		{"unknown codec", 9, raw, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.decode(tc.data, tc.codec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// The limit holds for the decompressed bytes however they are split: a
// xerial stream of blocks each under the limit but together over it.
func TestDecodeXerialBlocksSummed(t *testing.T) {
	d := newDecoder(1000)
	if _, err := d.decode(xerial(make([]byte, 1500), 600), CompressionSnappy); err != ErrTooLarge {
		t.Fatalf("got %v", err)
	}
	one := snappy.Encode(nil, make([]byte, 1001))
	if _, err := d.decode(one, CompressionSnappy); err != ErrTooLarge {
		t.Fatalf("raw block: got %v", err)
	}
}

// What the worst push of DefaultMaxBytes makes Tollgate allocate: the
// MetricsData with the most messages per byte (empty metrics, two bytes
// each), decoded. Bounded by a few tens of times the payload.
func TestDecodeWorstCaseMemory(t *testing.T) {
	var b []byte
	// resource_metrics { scope_metrics { metrics {} metrics {} ... } }
	inner := bytes.Repeat([]byte{0x12, 0x00}, (DefaultMaxBytes-16)/2)
	sm := append([]byte{0x12}, appendVarint(nil, uint64(len(inner)))...)
	sm = append(sm, inner...)
	b = append([]byte{0x0a}, appendVarint(nil, uint64(len(sm)))...)
	b = append(b, sm...)
	if len(b) > DefaultMaxBytes {
		t.Fatalf("fixture is %d bytes", len(b))
	}
	d := newDecoder(DefaultMaxBytes)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := d.decode(b, CompressionNone)
	runtime.ReadMemStats(&after)
	if err != nil || !v.Empty() {
		t.Fatalf("decode: %v %v", v, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte push of %d empty metrics allocates %d bytes while decoded", len(b), len(inner)/2, alloc)
	if alloc > 128*uint64(len(b)) {
		t.Fatalf("decoding allocated %d bytes", alloc)
	}
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// zstdWindow compresses b as one frame with no content size that declares
// a window of 2^log bytes (the header rewritten from the encoder's; the
// blocks need no more window than b's length).
func zstdWindow(t *testing.T, b []byte, log uint) []byte {
	t.Helper()
	enc := compress(t, CompressionZstd, b)
	fhd := enc[4]
	fcsFlag, single := fhd>>6, fhd&0x20 != 0
	fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
	if single && fcsFlag == 0 {
		fcsLen = 1
	}
	at := 5
	if !single {
		at++ // a window descriptor already
	}
	dictLen := [4]int{0, 1, 2, 4}[fhd&3]
	rest := enc[at+dictLen+fcsLen:]
	out := append([]byte{}, enc[:4]...)
	out = append(out, fhd&0x07&^0x04)        // no content size, not single segment, no checksum
	out = append(out, byte((log-10)<<3))     // window 2^log
	out = append(out, enc[at:at+dictLen]...) // the dictionary id, if any
	if fhd&0x04 != 0 {
		rest = rest[:len(rest)-4] // the checksum dropped with its flag
	}
	return append(out, rest...)
}
