package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// clientMetrics is the filter of the CLIENT_METRICS config resources
// (KIP-714's client-metrics subscriptions, kafka-client-metrics.sh):
// Tollgate answers its clients' GetTelemetrySubscriptions itself, so the
// subscriptions are its own (control.ClientMetrics). Within
// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs each
// CLIENT_METRICS resource is taken out and answered by Tollgate, the rest
// forwarded and the answers merged; ListConfigResources is answered by
// Tollgate for CLIENT_METRICS (74_list_config_resources.go). Present only
// while Tollgate answers telemetry: otherwise every such request is the
// upstream's.
type clientMetrics struct{ ctl *control.ClientMetrics }

func (*clientMetrics) Name() string { return "client-metrics" }

func (*clientMetrics) Keys() []int16 {
	return []int16{int16(kmsg.DescribeConfigs), int16(kmsg.AlterConfigs), int16(kmsg.IncrementalAlterConfigs), int16(kmsg.ListConfigResources)}
}

func (m *clientMetrics) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return answer(c, r, func(ctx context.Context, who control.Initiator, kr kmsg.Request) proxy.Verdict {
		switch k := kr.(type) {
		case *kmsg.DescribeConfigsRequest:
			return m.describe(who, k)
		case *kmsg.AlterConfigsRequest:
			return m.alter(ctx, who, k)
		case *kmsg.IncrementalAlterConfigsRequest:
			return m.incrementalAlter(ctx, who, k)
		case *kmsg.ListConfigResourcesRequest:
			return m.list(who, k)
		}
		return proxy.Verdict{}
	})
}

func (*clientMetrics) OnResponse(proxy.Conn, *proxy.Response) error { return nil }

func isClientMetrics(t kmsg.ConfigResourceType) bool {
	return t == kmsg.ConfigResourceTypeClientMetrics
}

// takeLocal takes the items of xs that mine selects out of the request,
// answering each with answer at once (the answers are merged into the
// upstream's when something is left to forward). None selected: the
// request passes untouched.
func takeLocal[T, A any, R kmsg.Response](req kmsg.Request, xs *[]T, mine func(*T) bool, answer func(T) A, add func(R, A)) proxy.Verdict {
	kept, out := split(*xs, mine)
	if len(out) == 0 {
		return proxy.Verdict{}
	}
	answers := make([]A, len(out))
	for i, x := range out {
		answers[i] = answer(x)
	}
	*xs = kept
	return answerOrForward(req, len(kept), func(resp kmsg.Response) {
		for _, a := range answers {
			add(resp.(R), a)
		}
	})
}
