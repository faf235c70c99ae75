// Package control is Tollgate's control plane on the Kafka protocol: the
// admin requests the gateway answers itself instead of forwarding, starting
// with DescribeClientQuotas (API 48) and AlterClientQuotas (API 49).
//
// The package owns:
//
//   - Kafka's KRaft semantics of those APIs, word for word in their error
//     codes and messages (the entity and key checks of
//     ClientQuotaControlManager, the filter rules of ClientQuotasImage), and
//     the iteration order of the Java HashMaps that decide which error an
//     entity with several problems gets and the order of a response
//     (javamap.go);
//   - who may use them (Authorizer, Admins): quota administrators alter,
//     authenticated principals describe, ANONYMOUS describes only if allowed;
//   - auditing: one audit event per AlterClientQuotas entry, recorded before
//     the change is committed and before the response exists;
//   - turning the store's entities into the quota engine's input (Quotas).
//
// Ordering of an applied change (fail-closed audit): the store computes the
// entity's old and new values inside its bbolt write transaction; the
// "applied" event is recorded there, every required sink syncing it; only
// then does the transaction commit (fsync), and only after the commit is
// the response built. A required sink that fails aborts the transaction:
// nothing is applied and the entry is answered -1. A crash between the
// event and the commit can leave an "applied" event for a change that never
// landed: the audit log may over-report but never under-reports. A commit
// that fails after the event is followed by a "failed" event that
// supersedes it.
//
// Each handler's comment lists its behaviour and where Tollgate departs
// from Kafka.
//
// It must not import proxy, app, metrics, httpapi or cli.
package control
