package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// AlterClientQuotas (key 49), v0–v1.
//
// Answered by Tollgate (clientquotas.go, control/alter.go), never
// forwarded: each entry is validated as Kafka's KRaft controller validates
// it (entity shapes, key types, values; Kafka's messages), authorized
// (quota admins only, else CLUSTER_AUTHORIZATION_FAILED), audited with old
// and new values before it is committed to the store (fail-closed with
// audit.required), and applied to the quota engine before the response is
// sent. validate_only validates without applying. Entries whose keys the
// config file names are refused (the file is authoritative for what it
// names).
//
// Differs from a broker: the quotas apply to the whole cluster at once, not
// per broker; the entity type client-id-prefix (Redpanda's: one quota shared
// by every client-id starting with the name), and the per-topic entity
// types topic and topic-prefix (Tollgate's: producer_byte_rate and
// consumer_byte_rate of a user, a client-id-prefix or every client on a
// topic or the topics of a prefix) are accepted where Kafka answers
// INVALID_REQUEST "Unhandled client quota entity type".
func (q *clientQuotas) alter(ctx context.Context, who control.Initiator, req *kmsg.AlterClientQuotasRequest) proxy.Verdict {
	return proxy.Verdict{Respond: q.ctl.Alter(ctx, who, req)}
}
