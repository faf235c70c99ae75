package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// AlterConfigs (key 33), v0–v2.
//
// Split (brokerconfigs.go): for each BROKER resource, the keys Tollgate owns
// are applied by the control plane — authorized (quota admins), validated
// as Kafka validates them, audited before they are committed, durable —
// and the rest of the resource is forwarded. AlterConfigs replaces a
// resource's whole dynamic config, so Tollgate's part is replaced even when
// the request names none of its keys. A resource Tollgate refused is
// answered by Tollgate alone (not forwarded). validate_only validates
// without applying.
//
// Differs from a broker: the split is not atomic. Tollgate's part is
// applied before the broker answers; a broker that then refuses its part
// leaves Tollgate's applied (documented in docs/control-plane.md).
//
// Reserved topics (reserved.go): a TOPIC resource naming one of Tollgate's
// own topics is never altered — answered TOPIC_AUTHORIZATION_FAILED with
// Kafka's message, as Kafka answers a topic the principal may not alter;
// split after the broker configs' part, the answers merged, answered by
// Tollgate alone when nothing is left.

func (b *brokerConfigs) alter(ctx context.Context, who control.Initiator, req *kmsg.AlterConfigsRequest) proxy.Verdict {
	return splitAlter(req, &req.Resources, func(res *kmsg.AlterConfigsRequestResource) (brokerResult, bool) {
		if res.ResourceType != kmsg.ConfigResourceTypeBroker {
			return brokerResult{}, false
		}
		var owned []control.Change
		other := res.Configs[:0:0]
		for _, c := range res.Configs {
			if control.IsOwnedBrokerConfig(c.Name) {
				owned = append(owned, control.Change{Key: c.Name, Value: c.Value})
			} else {
				other = append(other, c)
			}
		}
		code, msg := b.owner.Alter(ctx, who, res.ResourceName, owned, true, req.ValidateOnly)
		res.Configs = other
		return brokerResult{name: res.ResourceName, code: code, msg: msg, whole: code != 0}, true
	}, func(ar *kmsg.AlterConfigsResponse, br brokerResult) {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = kmsg.ConfigResourceTypeBroker, br.name, br.code, kmsg.StringPtr(br.msg)
		ar.Resources = append(ar.Resources, rr)
	})
}

func (f *reservedTopics) alterConfigs(req *kmsg.AlterConfigsRequest) proxy.Verdict {
	return refuse(req, &req.Resources, func(r *kmsg.AlterConfigsRequestResource) bool {
		return f.reservedResource(r.ResourceType, r.ResourceName)
	}, func(ar *kmsg.AlterConfigsResponse, r kmsg.AlterConfigsRequestResource) {
		ar.Resources = append(ar.Resources, refusedTopicConfigs(r.ResourceName))
	})
}

// refusedTopicConfigs is Kafka's answer to an alter of a reserved topic's
// configs: AlterConfigs', and IncrementalAlterConfigs' (a struct of the
// same fields, converted).
func refusedTopicConfigs(topic string) kmsg.AlterConfigsResponseResource {
	rr := kmsg.NewAlterConfigsResponseResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	rr.ErrorCode, rr.ErrorMessage = taf, kmsg.StringPtr(topicAuthFailed)
	return rr
}

// alter answers the CLIENT_METRICS resources (clientmetrics.go): each
// subscription's configs replaced by the resource's.
func (m *clientMetrics) alter(ctx context.Context, who control.Initiator, req *kmsg.AlterConfigsRequest) proxy.Verdict {
	return takeLocal(req, &req.Resources, func(r *kmsg.AlterConfigsRequestResource) bool {
		return isClientMetrics(r.ResourceType)
	}, func(r kmsg.AlterConfigsRequestResource) kmsg.AlterConfigsResponseResource {
		ops := make([]control.ConfigAlter, len(r.Configs))
		for i, c := range r.Configs {
			ops[i] = control.ConfigAlter{Key: c.Name, Op: kmsg.IncrementalAlterConfigOpSet, Value: c.Value}
		}
		return m.alterOne(ctx, who, r.ResourceName, ops, true, req.ValidateOnly)
	}, func(ar *kmsg.AlterConfigsResponse, rr kmsg.AlterConfigsResponseResource) {
		ar.Resources = append(ar.Resources, rr)
	})
}

// alterOne applies ops to the subscription name: its resource of an
// AlterConfigs answer (IncrementalAlterConfigs' has the same fields).
func (m *clientMetrics) alterOne(ctx context.Context, who control.Initiator, name string, ops []control.ConfigAlter, replace, validateOnly bool) kmsg.AlterConfigsResponseResource {
	rr := kmsg.NewAlterConfigsResponseResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	if code, msg := m.ctl.Alter(ctx, who, name, ops, replace, validateOnly); code != 0 {
		rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg)
	}
	return rr
}
