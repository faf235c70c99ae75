package telemetry

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// point is one data point of a fixture metric: a double, or an int when
// isInt, with a node id attribute when node >= 0 (as the per-broker
// metrics carry one).
type point struct {
	v     float64
	isInt bool
	node  int64
}

func dbl(v float64) point { return point{v: v, node: -1} }
func num(v int64) point   { return point{v: float64(v), isInt: true, node: -1} }
func onNode(node int64, v float64) point {
	return point{v: v, node: node}
}

// gauge is a fixture metric: a gauge named name with its points.
type gauge struct {
	name   string
	points []point
}

// metricsData builds what a client pushes, with the OpenTelemetry types:
// one resource (librdkafka's resource attributes), one scope, the gauges.
func metricsData(gs ...gauge) *metricspb.MetricsData {
	var ms []*metricspb.Metric
	for _, g := range gs {
		var dps []*metricspb.NumberDataPoint
		for _, p := range g.points {
			dp := &metricspb.NumberDataPoint{TimeUnixNano: 1_700_000_000_000_000_000}
			if p.isInt {
				dp.Value = &metricspb.NumberDataPoint_AsInt{AsInt: int64(p.v)}
			} else {
				dp.Value = &metricspb.NumberDataPoint_AsDouble{AsDouble: p.v}
			}
			if p.node >= 0 {
				dp.Attributes = []*commonpb.KeyValue{{Key: "node.id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: p.node}}}}
			}
			dps = append(dps, dp)
		}
		ms = append(ms, &metricspb.Metric{Name: g.name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: dps}}})
	}
	return &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "client_rack", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "rack-1"}}},
		}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{
			Scope:   &commonpb.InstrumentationScope{Name: "rdkafka#producer-1", Version: "2.12.0"},
			Metrics: ms,
		}},
	}}}
}

func marshal(t testing.TB, md *metricspb.MetricsData) []byte {
	t.Helper()
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compress compresses b as a client does for Kafka's codec id c (snappy:
// a raw block, as librdkafka and franz-go send it).
func compress(t testing.TB, c int8, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case CompressionNone:
		return b
	case CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CompressionSnappy:
		return snappy.Encode(nil, b)
	case CompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CompressionZstd:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("codec %d", c)
	}
	return buf.Bytes()
}

// xerial frames b as Java's SnappyOutputStream does: the header, then
// blocks of at most blockSize input bytes, each length-prefixed.
func xerial(b []byte, blockSize int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(b) > 0 {
		n := min(blockSize, len(b))
		enc := snappy.Encode(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
		b = b[n:]
	}
	return out
}

// librdkafkaPush is what a throttled librdkafka 2.12 producer pushes with
// Tollgate's default subscription: per-broker request latency, the
// throttle and queue time over the interval, produce latency.
func librdkafkaPush() *metricspb.MetricsData {
	return metricsData(
		gauge{"org.apache.kafka.producer.node.request.latency.avg", []point{onNode(0, 2.5), onNode(1, 4.5)}},
		gauge{"org.apache.kafka.producer.node.request.latency.max", []point{{v: 9, isInt: true, node: 0}, {v: 30, isInt: true, node: 1}}},
		gauge{"org.apache.kafka.producer.produce.throttle.time.avg", []point{dbl(812.5)}},
		gauge{"org.apache.kafka.producer.produce.throttle.time.max", []point{num(1480)}},
		gauge{"org.apache.kafka.producer.record.queue.time.avg", []point{dbl(40)}},
		gauge{"org.apache.kafka.producer.record.queue.time.max", []point{num(1500)}},
		gauge{"org.apache.kafka.producer.request.latency.avg", []point{dbl(3.25)}},
		gauge{"org.apache.kafka.producer.request.latency.max", []point{num(31)}},
		// Not chosen: ignored.
		gauge{"org.apache.kafka.producer.connection.creation.rate", []point{dbl(0.5)}},
	)
}
