package telemetry

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Metric is one of the client metrics Tollgate shows.
type Metric int

// The chosen set: what a client measured of its own requests, in
// milliseconds. Each is an average or a maximum over the client's last
// push interval.
const (
	ProduceThrottleAvg Metric = iota
	ProduceThrottleMax
	FetchThrottleAvg
	FetchThrottleMax
	ProduceLatencyAvg
	ProduceLatencyMax
	FetchLatencyAvg
	FetchLatencyMax
	NodeLatencyAvg
	NodeLatencyMax
	QueueTimeAvg
	QueueTimeMax
	NumMetrics
)

// IsMax reports whether m is a maximum (else an average): series combine
// maxima with max and averages with the mean.
func (m Metric) IsMax() bool { return m%2 == 1 }

// String is the metric's name in the JSON API.
func (m Metric) String() string {
	if m < 0 || m >= NumMetrics {
		return fmt.Sprintf("Metric(%d)", int(m))
	}
	return metricNames[m]
}

var metricNames = [NumMetrics]string{
	"produce_throttle_time_avg_ms", "produce_throttle_time_max_ms",
	"fetch_throttle_time_avg_ms", "fetch_throttle_time_max_ms",
	"produce_request_latency_avg_ms", "produce_request_latency_max_ms",
	"fetch_request_latency_avg_ms", "fetch_request_latency_max_ms",
	"node_request_latency_avg_ms", "node_request_latency_max_ms",
	"record_queue_time_avg_ms", "record_queue_time_max_ms",
}

// Chosen maps the OpenTelemetry metric names KIP-714 clients push to the
// metrics Tollgate shows. The names are KIP-714's (Java's metric group
// without "-metrics" and its name, dotted, under org.apache.kafka.), as
// librdkafka 2.5+ and franz-go push them too:
//
//   - produce throttle: librdkafka, franz-go and Java producers;
//   - fetch throttle: Java consumers (librdkafka and franz-go do not push
//     one);
//   - produce request latency: librdkafka's Produce requests, Java's every
//     producer request;
//   - fetch latency: librdkafka and Java consumers;
//   - node request latency: per broker (the node.id or node_id attribute),
//     producers and consumers alike; combined over the brokers;
//   - record queue time: librdkafka and Java producers.
var Chosen = map[string]Metric{
	"org.apache.kafka.producer.produce.throttle.time.avg":             ProduceThrottleAvg,
	"org.apache.kafka.producer.produce.throttle.time.max":             ProduceThrottleMax,
	"org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg": FetchThrottleAvg,
	"org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.max": FetchThrottleMax,
	"org.apache.kafka.producer.request.latency.avg":                   ProduceLatencyAvg,
	"org.apache.kafka.producer.request.latency.max":                   ProduceLatencyMax,
	"org.apache.kafka.consumer.fetch.manager.fetch.latency.avg":       FetchLatencyAvg,
	"org.apache.kafka.consumer.fetch.manager.fetch.latency.max":       FetchLatencyMax,
	"org.apache.kafka.producer.node.request.latency.avg":              NodeLatencyAvg,
	"org.apache.kafka.producer.node.request.latency.max":              NodeLatencyMax,
	"org.apache.kafka.consumer.node.request.latency.avg":              NodeLatencyAvg,
	"org.apache.kafka.consumer.node.request.latency.max":              NodeLatencyMax,
	"org.apache.kafka.producer.record.queue.time.avg":                 QueueTimeAvg,
	"org.apache.kafka.producer.record.queue.time.max":                 QueueTimeMax,
}

// Values are a push's (or a series') chosen metrics, in milliseconds.
type Values struct {
	V [NumMetrics]float64
	// Has says which of V were reported (bit m).
	Has uint32
}

// Get returns metric m and whether it was reported.
func (v *Values) Get(m Metric) (float64, bool) {
	if v.Has&(1<<m) == 0 {
		return 0, false
	}
	return v.V[m], true
}

// Empty reports whether no chosen metric was reported.
func (v *Values) Empty() bool { return v.Has == 0 }

// Kafka's compression type ids (the record batch attribute's codec).
const (
	CompressionNone   int8 = 0
	CompressionGzip   int8 = 1
	CompressionSnappy int8 = 2
	CompressionLZ4    int8 = 3
	CompressionZstd   int8 = 4
)

// acceptedCompression is what GetTelemetrySubscriptions offers, in Kafka's
// order of preference (ClientMetricsManager): clients take the first they
// support. Tollgate decompresses them all.
var acceptedCompression = []int8{CompressionZstd, CompressionLZ4, CompressionGzip, CompressionSnappy}

func supportedCompression(c int8) bool { return c >= CompressionNone && c <= CompressionZstd }

// Errors of decoding, as PushTelemetry answers them.
var (
	// ErrTooLarge is a payload larger than the limit once decompressed
	// (TELEMETRY_TOO_LARGE: the client goes on pushing).
	ErrTooLarge = errors.New("telemetry larger than telemetry.max_bytes once decompressed")
	// ErrMalformed is a payload that does not decompress or is not
	// OpenTelemetry MetricsData (INVALID_RECORD: the client stops
	// pushing).
	ErrMalformed = errors.New("malformed telemetry")
)

// decoder decompresses and decodes pushes, never holding more than max
// decompressed bytes of one.
type decoder struct {
	max  int
	zstd *zstd.Decoder
}

func newDecoder(limit int) *decoder {
	// DecodeAll writes into a buffer of limit bytes and stops at its
	// capacity (WithDecodeAllCapLimit): a frame whose content would exceed
	// it is refused, never inflated past it. The window a frame declares
	// costs nothing here (DecodeAll's history is its output), so it is not
	// bounded by limit: librdkafka 2.16's 440-byte pushes declare windows
	// far larger than 64 KiB, and Kafka's broker reads them. At most two
	// decodes run at once (more wait).
	z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderLowmem(true),
		zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxMemory(zstd.MaxWindowSize), zstd.WithDecoderMaxWindow(zstd.MaxWindowSize))
	if err != nil {
		panic(err) // only for options out of range, which these are not
	}
	return &decoder{max: limit, zstd: z}
}

// decode decompresses metrics (compression is Kafka's codec id) and
// reads the chosen metrics out of the OpenTelemetry MetricsData.
func (d *decoder) decode(metrics []byte, compression int8) (Values, error) {
	raw, err := d.decompress(metrics, compression)
	if err != nil {
		return Values{}, err
	}
	var md metricspb.MetricsData
	// A push is at most max bytes; attribute values nest (arrays, key
	// lists), which a low recursion limit keeps shallow.
	if err := (proto.UnmarshalOptions{RecursionLimit: 32}).Unmarshal(raw, &md); err != nil {
		return Values{}, fmt.Errorf("%w: not OpenTelemetry MetricsData: %v", ErrMalformed, err)
	}
	return chosen(&md), nil
}

// decompress returns metrics decompressed, at most d.max bytes.
func (d *decoder) decompress(b []byte, compression int8) ([]byte, error) {
	if len(b) > d.max {
		return nil, ErrTooLarge
	}
	switch compression {
	case CompressionNone:
		return b, nil
	case CompressionZstd:
		out, err := d.zstd.DecodeAll(b, make([]byte, 0, d.max))
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
			return nil, ErrTooLarge
		case err != nil:
			return nil, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
		case len(out) > d.max:
			return nil, ErrTooLarge
		}
		return out, nil
	case CompressionLZ4:
		return d.readAll("lz4", lz4.NewReader(bytes.NewReader(b)))
	case CompressionGzip:
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		return d.readAll("gzip", r)
	case CompressionSnappy:
		return d.snappy(b)
	}
	return nil, fmt.Errorf("%w: compression type %d", ErrMalformed, compression)
}

// readAll reads r to its end, refusing more than d.max bytes.
func (d *decoder) readAll(codec string, r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(d.max)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, codec, err)
	}
	if len(out) > d.max {
		return nil, ErrTooLarge
	}
	return out, nil
}

// xerialMagic starts snappy data in the xerial framing Java's
// SnappyOutputStream writes (Java clients); librdkafka and franz-go send a
// raw snappy block. Both are read, as Kafka's snappy input does.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappy decodes a raw snappy block or xerial-framed blocks (the 8-byte
// magic, two 4-byte version words, then blocks each prefixed with its
// 4-byte big-endian length), checking each block's decoded length, which
// snappy states up front, before decoding it.
func (d *decoder) snappy(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, xerialMagic) {
		return d.snappyBlock(nil, b)
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("%w: snappy: xerial header cut short", ErrMalformed)
	}
	var out []byte
	for rest := b[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: snappy: xerial block length cut short", ErrMalformed)
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return nil, fmt.Errorf("%w: snappy: xerial block of %d bytes past the end", ErrMalformed, n)
		}
		var err error
		if out, err = d.snappyBlock(out, rest[4:4+n]); err != nil {
			return nil, err
		}
		rest = rest[4+n:]
	}
	return out, nil
}

// snappyBlock appends block decoded to out, refusing to go past d.max.
func (d *decoder) snappyBlock(out, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	if n > d.max-len(out) {
		return nil, ErrTooLarge
	}
	dec, err := snappy.Decode(make([]byte, n), block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	return append(out, dec...), nil
}

// chosen reads the chosen metrics out of md: gauges and sums whose name is
// in Chosen. A metric reported by several data points (one per broker, or
// several resources) is combined as series combine instances: the mean of
// averages, the largest maximum. Values that are not finite or are
// negative are not measurements and are left out.
func chosen(md *metricspb.MetricsData) Values {
	var v Values
	var n [NumMetrics]int
	for _, rm := range md.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				m, ok := Chosen[mt.GetName()]
				if !ok {
					continue
				}
				var dps []*metricspb.NumberDataPoint
				if g := mt.GetGauge(); g != nil {
					dps = g.GetDataPoints()
				} else if s := mt.GetSum(); s != nil {
					dps = s.GetDataPoints()
				}
				for _, dp := range dps {
					var x float64
					switch val := dp.GetValue().(type) {
					case *metricspb.NumberDataPoint_AsDouble:
						x = val.AsDouble
					case *metricspb.NumberDataPoint_AsInt:
						x = float64(val.AsInt)
					default:
						continue
					}
					if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
						continue
					}
					v.add(m, x, &n)
				}
			}
		}
	}
	return v
}

// add folds x into metric m: the largest for a maximum, the running mean
// over n[m] values for an average.
func (v *Values) add(m Metric, x float64, n *[NumMetrics]int) {
	switch {
	case v.Has&(1<<m) == 0:
		v.V[m] = x
	case m.IsMax():
		v.V[m] = max(v.V[m], x)
	default:
		v.V[m] += (x - v.V[m]) / float64(n[m]+1)
	}
	v.Has |= 1 << m
	n[m]++
}
