// Package audit records who changed Tollgate's configuration, what changed
// and whether it was applied: one Event per alteration attempt, written as a
// JSON line to every configured Sink.
//
// The package owns:
//
//   - the Event schema (JSON): a unique, time-ordered id; the time
//     (RFC 3339, nanoseconds, UTC); the action (alter_client_quotas, later
//     alter_broker_configs, apikey_create, ...); the outcome (applied,
//     validated, rejected, denied, failed); the Kafka error code and
//     message; the initiator (principal, client id, source address,
//     listener); the target (a client-quota entity with defaults marked
//     explicitly, or a named resource); and each key's old and new value,
//     null when the key is or becomes unset;
//   - the sinks: a JSON-lines file (O_APPEND, one event per line, fsync'd
//     before Write returns), stdout or any io.Writer, and a Kafka topic on
//     the upstream cluster (topic.go: produced with acks=all, synchronous);
//   - the Logger, which fans an event out to its sinks and keeps the most
//     recent events in bounded rings for the HTTP API (denials in a ring of
//     their own, so that they never push the changes out);
//   - the aggregation of denials (aggregate.go): failed logins and refused
//     alterations are things anyone who reaches a port can cause at will,
//     so per action, principal, source address and listener the first of
//     an interval is written and the rest are counted into one event, with
//     a cap on the keys tracked; and denials give way to every other event
//     on the way to the sinks;
//   - the file sink's rotation by size, inside the write, so that no event
//     is lost or split across files.
//
// Fail-closed (Redpanda's choice): a sink may be Required. Record returns an
// error when a required sink could not write the event, and the caller must
// then refuse the alteration. For that to mean anything the caller records
// the event before it applies and acknowledges the change; Record returns
// only once every sink has the event (the file sink after fsync). Required
// sinks are written first; a success ("applied", "validated") a required
// sink could not take goes neither to the optional sinks nor to the ring, so
// they never show an alteration that was refused for want of an audit
// trail, while the refusal that follows (a "rejected" event) still reaches
// them.
//
// The package imports nothing from the rest of the project; it must not
// import proxy, app, metrics, httpapi or cli.
package audit
