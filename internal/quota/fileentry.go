package quota

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
