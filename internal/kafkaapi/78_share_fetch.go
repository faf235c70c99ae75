package kafkaapi

// ShareFetch (key 78), v0–v2.
//
// Forwarded. Rewritten (addresses.go): the node endpoints become gateway
// addresses.
//
// Differs from a broker: not charged to consumer_byte_rate yet.
