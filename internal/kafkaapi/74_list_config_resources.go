package kafkaapi

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// ListConfigResources (key 74), v0–v1.
//
// v0 is ListClientMetricsResources (KIP-714); v1 adds the resource types
// asked for (KIP-1142).
//
// Answered by Tollgate while it answers telemetry (clientmetrics.go): v0,
// and v1 asking for CLIENT_METRICS alone, list Tollgate's subscriptions
// (control.ClientMetrics.List) — CLUSTER_AUTHORIZATION_FAILED for a
// principal that may not describe configs, as Kafka authorizes
// DESCRIBE_CONFIGS on the cluster. A v1 asking for other types too (or for
// every type, an empty list) is forwarded, and the broker's CLIENT_METRICS
// entries in its answer are replaced by Tollgate's. The ApiVersions filter
// advertises at least v0 (the broker's range when it has one), so v1 is
// offered only by a broker that can answer its other types.

func (m *clientMetrics) list(who control.Initiator, req *kmsg.ListConfigResourcesRequest) proxy.Verdict {
	names, ok, err := m.ctl.List(who)
	add := func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListConfigResourcesResponse)
		lr.ConfigResources = slices.DeleteFunc(lr.ConfigResources, func(r kmsg.ListConfigResourcesResponseConfigResource) bool {
			return r.Type == int8(kmsg.ConfigResourceTypeClientMetrics)
		})
		if !ok || err != nil {
			return
		}
		for _, n := range names {
			r := kmsg.NewListConfigResourcesResponseConfigResource()
			r.Name, r.Type = n, int8(kmsg.ConfigResourceTypeClientMetrics)
			lr.ConfigResources = append(lr.ConfigResources, r)
		}
	}
	if req.Version >= 1 && (len(req.ResourceTypes) == 0 || slices.ContainsFunc(req.ResourceTypes, func(t int8) bool {
		return t != int8(kmsg.ConfigResourceTypeClientMetrics)
	})) {
		if !slices.Contains(req.ResourceTypes, int8(kmsg.ConfigResourceTypeClientMetrics)) && len(req.ResourceTypes) > 0 {
			return proxy.Verdict{} // not Tollgate's
		}
		return proxy.Verdict{Forward: req, Merge: add}
	}
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	switch {
	case !ok:
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case err != nil:
		resp.ErrorCode = kerr.UnknownServerError.Code
	default:
		add(resp)
	}
	return proxy.Verdict{Respond: resp}
}
