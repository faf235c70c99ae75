package kafkaapi

// DescribeCluster (key 60), v0–v2.
//
// Forwarded. Rewritten (addresses.go): every broker's address becomes its
// gateway port, as in Metadata.
