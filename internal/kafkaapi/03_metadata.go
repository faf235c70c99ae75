package kafkaapi

// Metadata (key 3), v0–v13.
//
// Forwarded. Rewritten (addresses.go): every broker's host and port become
// the listener's advertised host and that broker's gateway port; a broker
// seen for the first time gets its port opened before the response leaves,
// and a broker the gateway cannot open a port for is left out. Node ids and
// the cluster id are never changed (ApiVersions v5 validates them).
