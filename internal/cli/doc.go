// Package cli is Tollgate's client-side command line: `tollgate configs`
// and `tollgate quotas`. Both are Kafka admin clients (franz-go) that speak
// only DescribeClientQuotas, AlterClientQuotas and, for kafka-configs'
// user listing, DescribeUserScramCredentials, so they work the same
// against Tollgate and against any Kafka cluster.
//
// `tollgate configs` takes the quota flags of Apache Kafka's
// kafka-configs.sh and prints what it prints:
//
//	Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0
//	Completed updating config for user alice.
//	Completed updating default config for users in the cluster.
//
// down to Java's Double.toString for values and the iteration order of the
// Java client's HashMap for entities and keys (java.go). Describe fetches
// every quota and applies kafka-configs' strict filter client-side with the
// broker's semantics (a type without a name matches names and the default),
// so the output does not depend on how a server implements filters.
// Deliberate departures: --alter --entity-type ips without a name alters
// the default ip (KIP-612), ip entities may be CIDR ranges (Tollgate), and
// a server error is printed as "ExceptionName: server message" without a
// Java stack trace.
//
// `tollgate quotas apply` makes the cluster match a YAML file: it describes
// everything, computes a plan (+ add, ~ change, - remove), prints it, and
// applies it as one AlterClientQuotas request after --yes or a "y" typed
// on a terminal. Removal is limited to what the file manages: a key on the
// cluster but not in the file is removed only when its entity is in the
// file or the entity's shape (user, user+client_id, client_id, ip) is one
// the file has an entry of or lists under manage:. A file of user entries
// never removes client-id or ip quotas.
//
// `tollgate quotas resolve` tells which entity's quota applies to a (user,
// client-id[, ip]) per key, resolving with internal/quota so that the CLI
// and the gateway share one implementation of Kafka's precedence.
//
// --command-config is a Kafka client properties file: security.protocol,
// sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with sasl.jaas.config,
// and PEM TLS material (conn.go).
package cli
