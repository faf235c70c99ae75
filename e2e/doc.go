// Package e2e holds Tollgate's end-to-end tests: real clients (franz-go,
// sarama, kafka-go, kcat) speaking the Kafka protocol over loopback sockets
// to a real gateway in front of the embedded cluster.
package e2e
