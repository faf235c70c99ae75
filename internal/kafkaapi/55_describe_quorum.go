package kafkaapi

// DescribeQuorum (key 55), v0–v2.
//
// Forwarded. Rewritten (addresses.go): the controllers' listeners are
// removed — they are controller addresses, which a client-facing gateway
// has no port for.
