package model

// FileEntry is one entity's quotas in a config or quota file, in the shape of
// kafka-configs: a user, a client-id or both, or an IP, each a name or the
// default; or a client-id prefix alone (Redpanda's client-id-prefix).
//
//	quotas:
//	  - user: alice
//	    producer_byte_rate: 1048576
//	  - user: alice
//	    client_id: ingest
//	    producer_byte_rate: 4194304
//	  - default_user: true
//	    consumer_byte_rate: 2097152
//	  - client_id_prefix: "team-a-"
//	    producer_byte_rate: 8388608
//	  - user: alice
//	    topic: orders
//	    producer_byte_rate: 1048576
//	  - topic_prefix: "logs-"
//	    consumer_byte_rate: 4194304
type FileEntry struct {
	User            *string `yaml:"user"`
	DefaultUser     bool    `yaml:"default_user"`
	ClientID        *string `yaml:"client_id"`
	DefaultClientID bool    `yaml:"default_client_id"`
	// ClientIDPrefix is one quota shared by every client-id starting with
	// it; it stands alone (no user, client_id or ip).
	ClientIDPrefix *string `yaml:"client_id_prefix"`
	IP             *string `yaml:"ip"`
	DefaultIP      bool    `yaml:"default_ip"`
	// Topic or TopicPrefix makes the entry a per-topic quota: the
	// principal (user, default_user, client_id_prefix, or none: every
	// client) on that topic, or on every topic starting with the prefix
	// (one bucket for them all). producer_byte_rate and
	// consumer_byte_rate only.
	Topic       *string `yaml:"topic"`
	TopicPrefix *string `yaml:"topic_prefix"`

	ProducerByteRate       *float64 `yaml:"producer_byte_rate"`
	ConsumerByteRate       *float64 `yaml:"consumer_byte_rate"`
	RequestPercentage      *float64 `yaml:"request_percentage"`
	ControllerMutationRate *float64 `yaml:"controller_mutation_rate"`
	// ProducerIDsRate is Tollgate's producer_ids_rate: new producer ids a
	// second (InitProducerId answers), KIP-936's quota.
	ProducerIDsRate        *float64 `yaml:"producer_ids_rate"`
	ConnectionCreationRate *float64 `yaml:"connection_creation_rate"`

	// Shadow marks the entry's quotas shadow (Options.Shadow): measured
	// and shown, not enforced.
	Shadow bool `yaml:"shadow"`
	// BurstSeconds is the start-up burst of the entry's token buckets in
	// seconds of quota (Options.Burst); absent: Kafka's.
	BurstSeconds *float64 `yaml:"burst_seconds"`
}
