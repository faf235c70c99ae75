package kafkaapi

// FindCoordinator (key 10), v0–v6.
//
// Forwarded. Rewritten (addresses.go): the coordinator's address (v0–v3) or
// each batched coordinator's (v4+) becomes its gateway port. A coordinator
// the gateway has no port for is answered COORDINATOR_NOT_AVAILABLE
// (retriable) instead of its upstream address.
