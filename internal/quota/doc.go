// Package quota is Tollgate's client-quota engine: it decides, with Apache
// Kafka's semantics, how much a (user, client-id) may send or fetch and how
// long a connection must be muted when it exceeds its quota.
//
// The package owns:
//
//   - the byte-rate, request and controller-mutation quotas built on the
//     arithmetic of package rate (Kafka's sampled rate, throttle formula
//     and token bucket), with the caps Tollgate adds, and the strict and
//     permissive mutation modes (Mutation);
//   - the buckets of quota entities, on package model's eight
//     user/client-id levels and Kafka's two-step precedence algorithm
//     (model.Quotas: the enabled-levels bitmask as changed by KAFKA-19282,
//     the empty client-id quirk; Entity, Quotas and the other model names
//     are package model's, which the engine's callers import too);
//   - the Engine the gateway calls on the hot path, which keeps one bucket
//     per metric-tag pair exactly like Kafka keeps one sensor, expires idle
//     buckets and reports usage for metrics, and the per-connection Client
//     handle that skips the bucket lookup;
//   - tenants (TenantSet, tenantstate.go): named sets of principals whose
//     ceilings nest over the client buckets, shared out by a fair-share
//     rule (work-conserving, ceiling ÷ active principals while it binds).
//
// The package is pure: it does no I/O, starts no goroutines and has no global
// state. Time is always a parameter (a time.Time here, int64 milliseconds in
// package rate), so every behaviour is reproducible in a test without
// sleeping. It must not import anything from the rest of the project but the
// leaf packages rate and quota/model; the gateway depends on it, never the
// reverse.
//
// Where Tollgate departs from Kafka on purpose it says so: byte-rate
// throttles are capped at EngineConfig.MaxThrottle (quota.max.throttle.ms),
// which Kafka does not do.
package quota
