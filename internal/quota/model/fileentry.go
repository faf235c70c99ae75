package model

import "errors"

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
	ConnectionCreationRate *float64 `yaml:"connection_creation_rate"`

	// Shadow marks the entry's quotas shadow (Options.Shadow): measured
	// and shown, not enforced.
	Shadow bool `yaml:"shadow"`
	// BurstSeconds is the start-up burst of the entry's token buckets in
	// seconds of quota (Options.Burst); absent: Kafka's.
	BurstSeconds *float64 `yaml:"burst_seconds"`
}

// Options returns the entry's options.
func (e FileEntry) Options() Options {
	o := Options{Shadow: e.Shadow}
	if e.BurstSeconds != nil {
		o.Burst, o.HasBurst = *e.BurstSeconds, true
	}
	return o
}

// Entity returns the entry's quota entity.
func (e FileEntry) Entity() (Entity, error) {
	if e.Topic != nil || e.TopicPrefix != nil {
		return e.topicEntity()
	}
	var ent Entity
	if e.ClientIDPrefix != nil {
		switch {
		case e.User != nil || e.DefaultUser || e.ClientID != nil || e.DefaultClientID:
			return ent, errors.New("client_id_prefix stands alone: it cannot be combined with user, default_user, client_id or default_client_id")
		case *e.ClientIDPrefix == "":
			return ent, errors.New("client_id_prefix must not be empty (default_client_id: true is every client-id)")
		}
		return ClientPrefixEntity(*e.ClientIDPrefix), nil
	}
	switch {
	case e.User != nil && e.DefaultUser:
		return ent, errors.New("user and default_user are exclusive")
	case e.User != nil:
		ent.User = Exact(*e.User)
	case e.DefaultUser:
		ent.User = Default()
	}
	switch {
	case e.ClientID != nil && e.DefaultClientID:
		return ent, errors.New("client_id and default_client_id are exclusive")
	case e.ClientID != nil:
		ent.Client = Exact(*e.ClientID)
	case e.DefaultClientID:
		ent.Client = Default()
	}
	if !ent.User.IsSet() && !ent.Client.IsSet() {
		return ent, errors.New("an entry needs user, default_user, client_id, default_client_id or client_id_prefix")
	}
	return ent, nil
}

// topicEntity is the entity of a per-topic entry.
func (e FileEntry) topicEntity() (Entity, error) {
	var ent Entity
	switch {
	case e.Topic != nil && e.TopicPrefix != nil:
		return ent, errors.New("topic and topic_prefix are exclusive: a quota is on one topic or on the topics of a prefix")
	case e.Topic != nil && *e.Topic == "":
		return ent, errors.New("topic must not be empty")
	case e.TopicPrefix != nil && *e.TopicPrefix == "":
		return ent, errors.New("topic_prefix must not be empty")
	case e.ClientID != nil || e.DefaultClientID:
		return ent, errors.New("a topic quota is for a user (user, default_user), a client-id prefix (client_id_prefix) or every client (none of them), not a client_id")
	case e.IP != nil || e.DefaultIP:
		return ent, errors.New("a topic quota cannot be for an ip")
	case e.ClientIDPrefix != nil && (e.User != nil || e.DefaultUser):
		return ent, errors.New("client_id_prefix cannot be combined with user or default_user")
	case e.ClientIDPrefix != nil && *e.ClientIDPrefix == "":
		return ent, errors.New("client_id_prefix must not be empty")
	case e.User != nil && e.DefaultUser:
		return ent, errors.New("user and default_user are exclusive")
	case e.User != nil && *e.User == "":
		return ent, errors.New("user must not be empty (default_user: true is every user, one bucket each)")
	}
	switch {
	case e.User != nil:
		ent.User = Exact(*e.User)
	case e.DefaultUser:
		ent.User = Default()
	case e.ClientIDPrefix != nil:
		ent.Client = Prefix(*e.ClientIDPrefix)
	}
	if e.Topic != nil {
		ent.Topic = Exact(*e.Topic)
	} else {
		ent.Topic = Prefix(*e.TopicPrefix)
	}
	return ent, ent.Validate()
}
