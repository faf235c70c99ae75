package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// PushTelemetry (key 72), v0. KIP-714.
//
// Answered by Tollgate (telemetry.Manager; the filter is in
// 71_get_telemetry_subscriptions.go), never forwarded, unless
// telemetry.enabled is false. Kafka's checks in Kafka's order, with its
// error codes: a reserved instance id (zero, one) or a push after a
// terminating one INVALID_REQUEST; sooner than the push interval after the
// last push, with no GetTelemetrySubscriptions in between and not
// terminating, THROTTLING_QUOTA_EXCEEDED; another subscription id
// UNKNOWN_SUBSCRIPTION_ID; a compression type Kafka does not know
// UNSUPPORTED_COMPRESSION_TYPE; metrics over telemetry.max_bytes
// TELEMETRY_TOO_LARGE. The metrics (OpenTelemetry MetricsData, compressed
// with none, gzip, snappy — raw or xerial-framed —, lz4 or zstd) are then
// decompressed, never past telemetry.max_bytes (else TELEMETRY_TOO_LARGE),
// and decoded with the OpenTelemetry protobuf types (unreadable:
// INVALID_RECORD). The chosen metrics (telemetry.Chosen: produce and fetch
// throttle time, request latencies, record queue time) are kept for the
// connection's principal and client-id.
//
// Differs from a broker: the metrics are not handed to a reporter plugin
// but kept, bounded (telemetry.max_client_instances,
// telemetry.max_series), and shown.

// push answers one PushTelemetry of the client c.
func (t *telemetryAPIs) push(req *kmsg.PushTelemetryRequest, c telemetry.Client) proxy.Verdict {
	return proxy.Verdict{Respond: t.m.Push(req, c, t.now())}
}
