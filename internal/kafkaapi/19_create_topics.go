package kafkaapi

// CreateTopics (key 19), v0–v7.
//
// Forwarded. Charged by the quota filter (enforce/mutation.go) to
// controller_mutation_rate: the partitions each topic creates (its
// replica assignment, num_partitions, or the cluster's num.partitions for
// -1). From v6 (KIP-599 strict mode) topics past an exhausted quota are
// answered THROTTLING_QUOTA_EXCEEDED by Tollgate, in request order, and
// only the others are forwarded; below v6 everything is forwarded and the
// connection throttled (permissive mode).
