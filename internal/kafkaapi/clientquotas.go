package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// clientQuotas answers the client-quota APIs from the control plane: the
// cluster's brokers never see them (Tollgate, not the brokers, enforces
// client quotas).
type clientQuotas struct{ ctl *control.ClientQuotas }

func (*clientQuotas) Name() string { return "client-quotas" }

func (*clientQuotas) Keys() []int16 {
	return []int16{int16(kmsg.DescribeClientQuotas), int16(kmsg.AlterClientQuotas)}
}

func (q *clientQuotas) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return answer(c, r, func(ctx context.Context, who control.Initiator, kr kmsg.Request) proxy.Verdict {
		switch k := kr.(type) {
		case *kmsg.DescribeClientQuotasRequest:
			return q.describe(ctx, who, k)
		case *kmsg.AlterClientQuotasRequest:
			return q.alter(ctx, who, k)
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

// scramCredentials answers the SCRAM credential APIs (KIP-554) from the
// control plane: the credentials are the ones Tollgate checks terminated
// SASL logins against.
type scramCredentials struct{ creds *control.Credentials }

func (*scramCredentials) Name() string { return "scram-credentials" }

func (*scramCredentials) Keys() []int16 {
	return []int16{int16(kmsg.DescribeUserSCRAMCredentials), int16(kmsg.AlterUserSCRAMCredentials)}
}

func (s *scramCredentials) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	return answer(c, r, func(ctx context.Context, who control.Initiator, kr kmsg.Request) proxy.Verdict {
		switch k := kr.(type) {
		case *kmsg.DescribeUserSCRAMCredentialsRequest:
			return s.describe(ctx, who, k)
		case *kmsg.AlterUserSCRAMCredentialsRequest:
			return s.alter(ctx, who, k)
		}
		return proxy.Verdict{}
	})
}
