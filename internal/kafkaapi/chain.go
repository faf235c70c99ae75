package kafkaapi

import (
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/wire"
)

// Deps are what the filters answer from. A nil control-plane part leaves
// its APIs to the upstream cluster.
type Deps struct {
	Log *slog.Logger
	// ClientQuotas answers DescribeClientQuotas and AlterClientQuotas.
	ClientQuotas *control.ClientQuotas
	// Credentials answers DescribeUserScramCredentials and
	// AlterUserScramCredentials.
	Credentials *control.Credentials
	// BrokerConfigs answers the broker configs Tollgate owns within
	// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
	BrokerConfigs *control.BrokerConfigs
	// ClientMetrics answers the CLIENT_METRICS config resources (the
	// client-metrics subscriptions) within DescribeConfigs, AlterConfigs,
	// IncrementalAlterConfigs and ListConfigResources; set only with
	// Telemetry.
	ClientMetrics *control.ClientMetrics
	// Quota is the quota filter (enforce.Filter); nil charges nothing.
	Quota proxy.Filter
	// ProducerIDs is the quota filter's InitProducerId part
	// (producer_ids_rate, enforce.Filter.ProducerIDs); nil charges none.
	ProducerIDs proxy.Filter
	// Reserved are the topics Tollgate keeps its own state in on the
	// upstream cluster (audit.topic, usage.topic, a Tollgate cluster's
	// configuration and usage exchange topics), by exact name: requests
	// through the gateway never reach them (reserved.go). Empty: the
	// chain has no such filter.
	Reserved []string
	// Topics resolves the reserved topics' ids (the gateway, whose
	// metadata client exists once it starts), for the requests that name
	// topics by id; nil: the ids are learnt from the metadata answers
	// that pass.
	Topics TopicIDs
	// Telemetry answers GetTelemetrySubscriptions and PushTelemetry
	// (KIP-714), which ApiVersions then advertises; nil leaves them to
	// the upstream cluster.
	Telemetry *telemetry.Manager
	// Usage, when set, is the usage ledger: the chain ends with the
	// filter that counts the partitions of the mutation requests the
	// broker accepted (usage.go).
	Usage Ledger
	// Partitions answers the partition counts Usage needs when the quota
	// filter has not looked them up (the gateway's metadata lookups, as
	// the quota filter's enforce.Config.Topics); a request's counts are
	// looked up once, whichever filter needs them first.
	Partitions enforce.Topics
	// Now is the telemetry and usage clock (default time.Now).
	Now func() time.Time
}

// Chain is the filter chain of every connection, in order: a request
// passes the filters top to bottom and its response bottom to top, so the
// filters nearest the client (ApiVersions, broker addresses) see every
// response last. The quota filter stands before every filter that answers
// requests itself (Tollgate's broker configs, the control plane's quotas
// and SCRAM credentials, telemetry, the reserved topics): what they answer
// is held and throttled as any request and charged to request_percentage
// the time the gateway took (proxy.LocalHook); what the reserved topics'
// filter answers itself gives back what the quota filter reserved for it.
func Chain(d Deps) proxy.Chain {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	var answered []kmsg.ApiVersionsResponseApiKey
	if d.Telemetry != nil {
		answered = slices.Clone(telemetryVersions)
	}
	if d.ClientMetrics != nil {
		answered = append(answered, wire.Floor(int16(kmsg.ListConfigResources), 0))
	}
	c := proxy.Chain{
		newAPIVersions(answered...), // 18: the KIP-511 clamp; answered from cache before a SASL login
		addresses{},                 // 0, 1, 3, 10, 55, 60, 78, 79: every broker address becomes the gateway's
		newMembers(),                // 11, 68 learn; 15, 69 restore each group member's client address
	}
	if d.Quota != nil {
		// Before the filters that answer requests themselves: those are
		// held and throttled as any request, and charged the time the
		// gateway took to answer them (proxy.LocalHook).
		c = append(c, d.Quota) // 0, 1, 11, 19, 20, 37, 78 by content; every key but the exempt for request_percentage
	}
	if d.ProducerIDs != nil {
		c = append(c, d.ProducerIDs) // 22: producer_ids_rate, new producer ids held and charged
	}
	c = append(c, &brokerConfigs{owner: d.BrokerConfigs, log: d.Log}) // 32, 33, 44: Tollgate's broker configs; upstream addresses hidden
	if d.ClientMetrics != nil {
		c = append(c, &clientMetrics{ctl: d.ClientMetrics}) // 32, 33, 44, 74: the client-metrics subscriptions, answered from the control plane
	}
	if d.ClientQuotas != nil {
		c = append(c, newClientQuotas(d.ClientQuotas)) // 48, 49: answered from the control plane
	}
	if d.Credentials != nil {
		c = append(c, newScramCredentials(d.Credentials)) // 50, 51: answered from the control plane
	}
	if d.Telemetry != nil {
		// After the quota filter: a client held for request_percentage
		// is held for these too, as Kafka charges them.
		c = append(c, &telemetryAPIs{m: d.Telemetry, now: d.Now}) // 71, 72: answered from the telemetry manager
	}
	if r := newReservedTopics(d.Reserved, d.Topics, d.Log); len(r.list) > 0 {
		// After the quota filter: the Fetch it rewrites keeps the quota
		// filter's max_bytes clamp, patched in place before.
		c = append(c, r) // 0–3, 8, 19–21, 23, 24, 28, 32, 33, 37, 44, 61, 75, 78: Tollgate's own topics refused
	}
	if d.Usage != nil {
		// Last: it counts only what is forwarded.
		c = append(c, newUsageMutations(d.Usage, d.Partitions, d.Log, d.Now)) // 19, 20, 37: the partitions the broker changed, for the usage ledger
	}
	return c
}
