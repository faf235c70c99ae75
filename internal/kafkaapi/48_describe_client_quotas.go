package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// DescribeClientQuotas (key 48), v0–v1.
//
// Answered by Tollgate (clientquotas.go, control/describe.go), never
// forwarded: the quotas in force are Tollgate's — the store's entities with
// the config file's laid over them — with Kafka's KRaft semantics: match
// types EXACT, DEFAULT and ANY on user, client-id and ip, strict mode, and
// Kafka's error codes and messages word for word. Any authenticated
// principal may describe; ANONYMOUS only with
// authorization.allow_anonymous_describe.
//
// Differs from a broker: the brokers' own quotas are not shown (Tollgate
// enforces instead of them); filters may name client-id-prefix (EXACT and
// ANY; Redpanda's entity type) and topic and topic-prefix (Tollgate's
// per-topic quotas), which Kafka answers UNSUPPORTED_VERSION; per-topic
// entities are listed only to filters naming topic or topic-prefix, and to
// the empty filter.
func (q *clientQuotas) describe(ctx context.Context, who control.Initiator, req *kmsg.DescribeClientQuotasRequest) proxy.Verdict {
	return proxy.Verdict{Respond: q.ctl.Describe(ctx, who, req)}
}
