package kafkaapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// IncrementalAlterConfigs (key 44), v0–v1.
//
// Split (brokerconfigs.go): for each BROKER resource, SET and DELETE of the
// keys Tollgate owns are applied by the control plane (authorized,
// validated, audited, durable); APPEND and SUBTRACT of them are refused
// with INVALID_CONFIG and Kafka's message, as Kafka refuses them for
// non-list configs. The rest of the resource is forwarded; a resource with
// only Tollgate's keys, or one Tollgate refused, is answered by Tollgate
// alone. validate_only validates without applying.
//
// Differs from a broker: the split is not atomic (see AlterConfigs).
//
// Reserved topics (reserved.go): a TOPIC resource naming one of Tollgate's
// own topics is never altered (compaction, retention) — answered
// TOPIC_AUTHORIZATION_FAILED with Kafka's message; split after the broker
// configs' part, the answers merged, answered by Tollgate alone when
// nothing is left.

func (b *brokerConfigs) incrementalAlter(ctx context.Context, who control.Initiator, req *kmsg.IncrementalAlterConfigsRequest) proxy.Verdict {
	return splitAlter(req, &req.Resources, func(res *kmsg.IncrementalAlterConfigsRequestResource) (brokerResult, bool) {
		if res.ResourceType != kmsg.ConfigResourceTypeBroker {
			return brokerResult{}, false
		}
		var owned []control.Change
		other := res.Configs[:0:0]
		code, msg := int16(0), ""
		for _, c := range res.Configs {
			if !control.IsOwnedBrokerConfig(c.Name) {
				other = append(other, c)
				continue
			}
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				owned = append(owned, control.Change{Key: c.Name, Value: c.Value})
			case kmsg.IncrementalAlterConfigOpDelete:
				owned = append(owned, control.Change{Key: c.Name})
			default:
				code, msg = kerr.InvalidConfig.Code, fmt.Sprintf("Config value %s is not allowed for config key: %s", strings.ToLower(c.Op.String()), c.Name)
			}
		}
		if len(owned) == 0 && code == 0 {
			return brokerResult{}, false
		}
		if code == 0 {
			code, msg = b.owner.Alter(ctx, who, res.ResourceName, owned, false, req.ValidateOnly)
		}
		res.Configs = other
		return brokerResult{name: res.ResourceName, code: code, msg: msg, whole: code != 0 || len(other) == 0}, true
	}, func(ir *kmsg.IncrementalAlterConfigsResponse, br brokerResult) {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = kmsg.ConfigResourceTypeBroker, br.name, br.code
		if br.code != 0 {
			rr.ErrorMessage = kmsg.StringPtr(br.msg)
		}
		ir.Resources = append(ir.Resources, rr)
	})
}

func (f *reservedTopics) incrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) proxy.Verdict {
	return refuse(req, &req.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) bool {
		return f.reservedResource(r.ResourceType, r.ResourceName)
	}, func(ir *kmsg.IncrementalAlterConfigsResponse, r kmsg.IncrementalAlterConfigsRequestResource) {
		ir.Resources = append(ir.Resources, kmsg.IncrementalAlterConfigsResponseResource(refusedTopicConfigs(r.ResourceName)))
	})
}

// incrementalAlter answers the CLIENT_METRICS resources (clientmetrics.go):
// each op applied to the subscription as Kafka's controller applies it.
func (m *clientMetrics) incrementalAlter(ctx context.Context, who control.Initiator, req *kmsg.IncrementalAlterConfigsRequest) proxy.Verdict {
	return takeLocal(req, &req.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) bool {
		return isClientMetrics(r.ResourceType)
	}, func(r kmsg.IncrementalAlterConfigsRequestResource) kmsg.IncrementalAlterConfigsResponseResource {
		ops := make([]control.ConfigAlter, len(r.Configs))
		for i, c := range r.Configs {
			ops[i] = control.ConfigAlter{Key: c.Name, Op: c.Op, Value: c.Value}
		}
		return kmsg.IncrementalAlterConfigsResponseResource(m.alterOne(ctx, who, r.ResourceName, ops, false, req.ValidateOnly))
	}, func(ir *kmsg.IncrementalAlterConfigsResponse, rr kmsg.IncrementalAlterConfigsResponseResource) {
		ir.Resources = append(ir.Resources, rr)
	})
}
