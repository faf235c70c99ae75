package control

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/store"
)

// The ends of an audited config change (broker configs, client-metrics
// subscriptions): each records ev with its outcome and returns Kafka's
// error code and message (0 on success).

// denied records ev denied: CLUSTER_AUTHORIZATION_FAILED.
func denied(ctx context.Context, a *audit.Logger, ev audit.Event) (int16, string) {
	return rejectedAs(ctx, a, ev, audit.Denied, errClusterAuthorizationFailed, msgClusterAuthorizationFailed)
}

// rejected records ev rejected with Kafka's code and message.
func rejected(ctx context.Context, a *audit.Logger, ev audit.Event, code int16, msg string) (int16, string) {
	return rejectedAs(ctx, a, ev, audit.Rejected, code, msg)
}

func rejectedAs(ctx context.Context, a *audit.Logger, ev audit.Event, outcome audit.Outcome, code int16, msg string) (int16, string) {
	ev.Outcome, ev.ErrorCode, ev.ErrorMessage = outcome, code, msg
	a.Record(ctx, ev)
	return code, msg
}

// validated records ev validated (validate_only): the answer is a success
// only once the audit log has it.
func validated(ctx context.Context, a *audit.Logger, ev audit.Event) (int16, string) {
	ev.Outcome = audit.Validated
	if err := a.Record(ctx, ev); err != nil {
		return errUnknownServerError, "the change was not validated: the required audit log could not record it (" + err.Error() + ")"
	}
	return 0, ""
}

// commitAudited runs write, a store write whose hook records ev, applied,
// with the changes the store reports (changes) before the commit, and
// then when the first result changed something. It returns Kafka's error
// code and message (0 on success).
func commitAudited[R any](ctx context.Context, a *audit.Logger, ev audit.Event, write func(hook func([]R) error) ([]R, error),
	changes func(R) ([]store.StringChange, bool), then func()) (int16, string) {
	res, err := write(func(rs []R) error {
		ev.Changes = ev.Changes[:0]
		for _, r := range rs {
			cs, _ := changes(r)
			for _, c := range cs {
				ev.Changes = append(ev.Changes, audit.Change{Key: c.Key, Old: strValue(c.Old), New: strValue(c.New)})
			}
		}
		ev.Outcome = audit.Applied
		return a.Record(ctx, ev)
	})
	if err != nil {
		return notApplied(err)
	}
	if len(res) > 0 {
		if _, changed := changes(res[0]); changed {
			then()
		}
	}
	return 0, ""
}

// notApplied is Kafka's answer to a change the store did not take.
func notApplied(err error) (int16, string) {
	return errUnknownServerError, fmt.Sprintf("the change was not applied: %v; nothing was changed", err)
}
