package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// AlterUserSCRAMCredentials (key 51), v0.
//
// Answered by Tollgate (clientquotas.go, control/scram.go), never
// forwarded: upsertions (salted client-side, as kafka-configs does) and
// deletions of the credentials Tollgate checks terminated logins against,
// validated with Kafka's rules and messages, authorized (quota admins),
// audited and durable; a new credential works for the next login.
//
// Differs from a broker: the brokers' SCRAM users are untouched; in
// pass-through mode the brokers, not Tollgate, check logins.
func (s *scramCredentials) alter(ctx context.Context, who control.Initiator, req *kmsg.AlterUserSCRAMCredentialsRequest) proxy.Verdict {
	return proxy.Verdict{Respond: s.creds.AlterUserScramCredentials(ctx, who, req)}
}
