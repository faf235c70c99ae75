// Package usage is Tollgate's usage ledger, for chargeback: per minute and
// per (user, client-id), the produce bytes, fetch bytes, requests,
// throttle time and partition mutations the gateway served, written once
// per minute to an append-only file (one per UTC day) under
// <data_dir>/usage, and read back by queries (`tollgate usage`,
// GET /api/v1/usage).
//
// The counting side (Ledger.Record) is on the gateway's per-frame path: it
// takes one shard lock, hashes nothing but the key's two strings, and
// allocates only for a key it has not seen in the last minute. The
// composition root feeds it from the gateway's ServeHook; this package
// imports nothing of the data path, so the admin port and the CLI can read
// the ledger too.
//
// Exactly once: a minute is written as one JSON line, fsync'd; a restart
// reads the last minute written and counts everything that follows into
// later minutes, so no minute is ever written twice. A killed process
// loses its open minute only.
package usage
