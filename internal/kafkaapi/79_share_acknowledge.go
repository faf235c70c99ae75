package kafkaapi

// ShareAcknowledge (key 79), v0–v2.
//
// Forwarded. Rewritten (addresses.go): the node endpoints become gateway
// addresses.
