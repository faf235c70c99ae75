package kafkaapi

// CreatePartitions (key 37), v0–v3.
//
// Forwarded. Charged by the quota filter (enforce/mutation.go) to
// controller_mutation_rate: the partitions each topic gains (the new count
// less the current one, read from the upstream's metadata). Strict mode
// from v3, permissive below, as in CreateTopics.
