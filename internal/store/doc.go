// Package store is Tollgate's durable configuration store: the client-quota
// entities an administrator sets with AlterClientQuotas, a generic
// namespace of broker-level configs, and the credentials Tollgate manages
// (SCRAM credentials as Kafka formats them, API keys as SHA-256 hashes),
// kept in one bbolt file (tollgate.db) in the gateway's data directory.
//
// The package owns:
//
//   - the wire model of a client-quota entity (Entity, Component): a set of
//     (entity type, name-or-default) pairs with types user, client-id and ip.
//     Names are arbitrary strings kept byte for byte; the default is a flag,
//     never a magic string, so a user literally called "<default>" stays a
//     user;
//   - the canonical, length-prefixed encoding of an entity that is its key in
//     the file, so that equal entities always find the same record whatever
//     order their components came in;
//   - durability: every change is one bbolt read-write transaction, fsync'd
//     on commit (bbolt's default, which Open keeps), so a change the store
//     has acknowledged survives kill -9 and power loss;
//   - a change feed (Subscribe) signalled after every commit that changed
//     something.
//
// The store does not validate quota keys or values: that is Kafka's
// AlterClientQuotas semantics and belongs to the control plane. It only
// refuses what it cannot represent (an empty entity, an unknown or repeated
// entity type, keys too long for bbolt).
//
// It must not import proxy, app, metrics, httpapi or cli.
package store
