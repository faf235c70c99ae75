package kafkaapi

import (
	"cmp"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// GetTelemetrySubscriptions (key 71), v0. KIP-714.
//
// Answered by Tollgate (telemetry.Manager), never forwarded, unless
// telemetry.enabled is false: Tollgate is the receiver of its clients'
// metrics, which it shows next to its own view of each client (Prometheus,
// the JSON API, the dashboard). With Kafka's semantics and error codes
// (ClientMetricsManager): a zero client instance id gets a new random one;
// the subscription id is a checksum of the subscription mixed with the
// instance id, so it changes when telemetry.metrics or
// telemetry.push_interval does (the client then asks again) and survives a
// restart; accepted compression types zstd, lz4, gzip, snappy, in Kafka's
// order; telemetry.max_bytes; delta temporality; an instance asking again
// within its push interval gets THROTTLING_QUOTA_EXCEEDED. The ApiVersions
// filter advertises the key whatever the broker says (Kafka advertises it
// only with a metrics reporter configured). It stands after the quota
// filter: a client held for request_percentage is held here too.
//
// Subscriptions: Tollgate's own (telemetry.metrics, telemetry.push_interval)
// applies to every client; the named client-metrics subscriptions
// (CLIENT_METRICS resources, clientmetrics.go) are matched to each client
// instance as Kafka matches them — by instance id, client-id, software name
// and version (its ApiVersions), source address and port — and add their
// metrics, and their interval when shorter.
//
// Differs from a broker: Tollgate's own subscription applies to every
// client, whatever the named ones say; "every metric" (telemetry.metrics "*") is sent as the prefix "" rather
// than "*", which franz-go does not read as every metric; instance ids are
// per principal: a client naming another principal's instance id gets an
// instance of its own.

// telemetryAPIs is the filter of keys 71 and 72; one per gateway.
type telemetryAPIs struct {
	m   *telemetry.Manager
	now func() time.Time
}

func (*telemetryAPIs) Name() string { return "telemetry" }

func (*telemetryAPIs) Keys() []int16 {
	return []int16{int16(kmsg.GetTelemetrySubscriptions), int16(kmsg.PushTelemetry)}
}

// telemetryVersions are the ranges the ApiVersions filter advertises for
// them: kmsg's.
var telemetryVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: int16(kmsg.GetTelemetrySubscriptions), MinVersion: 0, MaxVersion: (&kmsg.GetTelemetrySubscriptionsRequest{}).MaxVersion()},
	{ApiKey: int16(kmsg.PushTelemetry), MinVersion: 0, MaxVersion: (&kmsg.PushTelemetryRequest{}).MaxVersion()},
}

// OnRequest answers both APIs; a body kmsg cannot read closes the
// connection, as for every API Tollgate answers.
func (t *telemetryAPIs) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	kr, err := r.Decode()
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	in := c.Info()
	// Kafka's ClientInformation names a client that sent no ApiVersions
	// v3+ "unknown".
	cl := telemetry.Client{User: in.Principal.Name, ClientID: r.ClientID,
		SoftwareName: cmp.Or(in.SoftwareName, "unknown"), SoftwareVersion: cmp.Or(in.SoftwareVersion, "unknown"), Addr: in.Remote}
	switch k := kr.(type) {
	case *kmsg.GetTelemetrySubscriptionsRequest:
		return proxy.Verdict{Respond: t.m.GetSubscriptions(k, cl, t.now())}
	case *kmsg.PushTelemetryRequest:
		return t.push(k, cl)
	}
	return proxy.Verdict{}
}
