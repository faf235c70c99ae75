package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// controlAPIs is the filter of a describe and an alter API (requests D
// and A) answered from the control plane: the cluster's brokers never see
// them.
type controlAPIs[D, A kmsg.Request] struct {
	name     string
	describe func(context.Context, control.Initiator, D) proxy.Verdict
	alter    func(context.Context, control.Initiator, A) proxy.Verdict
}

func (f *controlAPIs[D, A]) Name() string { return f.name }

// Keys are D's and A's (Key reads no field: a nil request has one).
func (*controlAPIs[D, A]) Keys() []int16 {
	var d D
	var a A
	return []int16{d.Key(), a.Key()}
}

func (f *controlAPIs[D, A]) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return answer(c, r, func(ctx context.Context, who control.Initiator, kr kmsg.Request) proxy.Verdict {
		switch k := kr.(type) {
		case D:
			return f.describe(ctx, who, k)
		case A:
			return f.alter(ctx, who, k)
		}
		return proxy.Verdict{}
	})
}

// answer decodes a control-plane request and has fn answer it for the
// connection's principal, within controlTimeout (an audited, durable
// change); a body kmsg cannot read closes the connection.
func answer(c proxy.Conn, r *proxy.Request, fn func(context.Context, control.Initiator, kmsg.Request) proxy.Verdict) proxy.Verdict {
	kr, err := r.Decode()
	if err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	return fn(ctx, control.FromConn(c.Info(), r.ClientID), kr)
}

// clientQuotas answers the client-quota APIs from the control plane
// (Tollgate, not the brokers, enforces client quotas).
type clientQuotas struct{ ctl *control.ClientQuotas }

func newClientQuotas(ctl *control.ClientQuotas) proxy.Filter {
	q := &clientQuotas{ctl: ctl}
	return &controlAPIs[*kmsg.DescribeClientQuotasRequest, *kmsg.AlterClientQuotasRequest]{
		name: "client-quotas", describe: q.describe, alter: q.alter,
	}
}

// scramCredentials answers the SCRAM credential APIs (KIP-554) from the
// control plane: the credentials are the ones Tollgate checks terminated
// SASL logins against.
type scramCredentials struct{ creds *control.Credentials }

func newScramCredentials(creds *control.Credentials) proxy.Filter {
	s := &scramCredentials{creds: creds}
	return &controlAPIs[*kmsg.DescribeUserSCRAMCredentialsRequest, *kmsg.AlterUserSCRAMCredentialsRequest]{
		name: "scram-credentials", describe: s.describe, alter: s.alter,
	}
}
