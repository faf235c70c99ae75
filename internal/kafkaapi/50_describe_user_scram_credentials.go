package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// DescribeUserSCRAMCredentials (key 50), v0.
//
// Answered by Tollgate (clientquotas.go, control/scram.go), never
// forwarded: the SCRAM credentials Tollgate checks terminated logins
// against (mechanism and iterations, never salts or keys), with Kafka's
// errors (RESOURCE_NOT_FOUND for an unknown user, DUPLICATE_RESOURCE for a
// user named twice).
//
// Differs from a broker: the brokers' own SCRAM users are not shown.
func (s *scramCredentials) describe(ctx context.Context, who control.Initiator, req *kmsg.DescribeUserSCRAMCredentialsRequest) proxy.Verdict {
	return proxy.Verdict{Respond: s.creds.DescribeUserScramCredentials(ctx, who, req)}
}
