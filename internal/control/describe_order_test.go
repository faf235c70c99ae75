package control

import (
	"slices"
	"testing"
)

// TestJavaHashOrder: the order Kafka's broker gives an entity's quota
// values, as measured against Kafka 4.4 (kafka-configs, through the Java
// admin client's own HashMap of four buckets, printed consumer_byte_rate,
// request_percentage, producer_byte_rate): the broker's HashMap of 16
// buckets puts connection_creation_rate (bucket 0), request_percentage (7),
// producer_byte_rate (11), consumer_byte_rate (12),
// controller_mutation_rate (14).
func TestJavaHashOrder(t *testing.T) {
	got := javaHashOrder([]string{"consumer_byte_rate", "controller_mutation_rate", "producer_byte_rate", "request_percentage", "connection_creation_rate"})
	want := []string{"connection_creation_rate", "request_percentage", "producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
