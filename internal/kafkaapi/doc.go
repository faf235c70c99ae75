// Package kafkaapi holds, one file per Kafka API, everything Tollgate does
// to the APIs it answers, rewrites or charges — in the style of franz-go's
// kfake: NN_api_name.go, each opening with a header saying which versions,
// what Tollgate answers itself, what it forwards, what it rewrites and where
// it differs from a broker. "What happens to DescribeConfigs" is answered by
// opening 32_describe_configs.go.
//
// The APIs' code runs as filters of a connection's chain (proxy.Filter);
// chain.go declares the chain and its order in one place. The quota filter
// (Produce, Fetch and the mutation APIs by their content, and every
// forwarded API for request_percentage) lives in package enforce; the SASL
// gate (SaslHandshake, SaslAuthenticate) in package proxy, because it decides
// whether a request may reach the filters at all; their files here say so.
// The usage ledger's ServeHook and mutation counter are here too
// (usage.go), on an interface the ledger (package usage) implements.
//
// kafkaapi sits between the data path and the control side: it imports
// proxy, wire, enforce (a mutation request's partition counts, for the
// usage ledger) and control (the admin APIs are answered from the control
// plane), never app.
package kafkaapi
