package kafkaapi

// DeleteTopics (key 20), v0–v6.
//
// Forwarded. Charged by the quota filter (enforce/mutation.go) to
// controller_mutation_rate: the partitions each topic had (read from the
// upstream's metadata). Strict mode from v5, permissive below, as in
// CreateTopics.
