package kafkaapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// brokerConfigs is the filter of the three broker-config APIs. Tollgate
// owns some broker configs (the connection limits: max.connections,
// max.connection.creation.rate, per-IP and per-listener ones); requests are
// split: the owned keys of BROKER resources are answered by the control
// plane (control.BrokerConfigs), everything else is forwarded as a
// re-encoded request, and the two answers are merged into one response. The
// split itself is in the API's file.
type brokerConfigs struct {
	owner *control.BrokerConfigs // nil: every request is the upstream's
	log   *slog.Logger
}

func (*brokerConfigs) Name() string { return "broker-configs" }

func (*brokerConfigs) Keys() []int16 {
	return []int16{int16(kmsg.DescribeConfigs), int16(kmsg.AlterConfigs), int16(kmsg.IncrementalAlterConfigs)}
}

// controlTimeout bounds a control-plane answer (an audited, durable
// change).
const controlTimeout = 30 * time.Second

func (b *brokerConfigs) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	if b.owner == nil {
		return proxy.Verdict{}
	}
	return answer(c, r, func(ctx context.Context, who control.Initiator, kr kmsg.Request) proxy.Verdict {
		switch k := kr.(type) {
		case *kmsg.DescribeConfigsRequest:
			return b.describe(who, k)
		case *kmsg.AlterConfigsRequest:
			return b.alter(ctx, who, k)
		case *kmsg.IncrementalAlterConfigsRequest:
			return b.incrementalAlter(ctx, who, k)
		}
		return proxy.Verdict{}
	})
}

func (b *brokerConfigs) OnResponse(c proxy.Conn, r *proxy.Response) error {
	if r.Req.Key != int16(kmsg.DescribeConfigs) {
		return nil
	}
	return r.Edit(func(resp kmsg.Response) { scrubBrokerAddresses(c, resp.(*kmsg.DescribeConfigsResponse)) })
}

// brokerResult is Tollgate's answer for one BROKER resource of an alter.
type brokerResult struct {
	name  string
	code  int16
	msg   string
	whole bool // answered entirely here (not forwarded)
}

// splitAlter splits the resources rs of an alter (AlterConfigs,
// IncrementalAlterConfigs): own answers Tollgate's part of a resource —
// false: it has none, and is forwarded whole; true: its result, and
// unless the result is whole, what is left of it (in *res) is forwarded.
// No resource of Tollgate's: the request passes untouched. add puts each
// whole result into the response.
func splitAlter[T any, R kmsg.Response](req kmsg.Request, rs *[]T, own func(res *T) (brokerResult, bool), add func(R, brokerResult)) proxy.Verdict {
	var results []brokerResult
	fwd := (*rs)[:0:0]
	for _, res := range *rs {
		br, ok := own(&res)
		if ok {
			results = append(results, br)
		}
		if !br.whole {
			fwd = append(fwd, res)
		}
	}
	if len(results) == 0 {
		return proxy.Verdict{}
	}
	*rs = fwd
	return answerOrForward(req, len(fwd), func(resp kmsg.Response) {
		for _, br := range results {
			if br.whole {
				add(resp.(R), br)
			}
		}
	})
}

// answerOrForward answers req locally when nothing is left to forward,
// otherwise forwards what is left and merges Tollgate's part into the
// upstream's answer.
func answerOrForward(req kmsg.Request, left int, merge func(kmsg.Response)) proxy.Verdict {
	if left == 0 {
		resp := req.ResponseKind()
		merge(resp)
		return proxy.Verdict{Respond: resp}
	}
	return proxy.Verdict{Forward: req, Merge: merge}
}
