package api

// Bucket is one live quota bucket: Kafka's tags user and client_id, or a
// client-id prefix group (client_id_prefix set, user and client_id ""); a
// per-topic quota's bucket also has its topic, or its topic prefix.
type Bucket struct {
	Quota          string       `json:"quota"`
	User           string       `json:"user"`
	ClientID       string       `json:"client_id"`
	ClientIDPrefix string       `json:"client_id_prefix,omitempty"`
	Topic          string       `json:"topic,omitempty"`
	TopicPrefix    string       `json:"topic_prefix,omitempty"`
	Level          string       `json:"level"`
	Entity         []EntityPart `json:"entity,omitempty"`
	Limit          *float64     `json:"limit"`
	BucketRate
	Throttled  int64  `json:"throttled"`
	ThrottleMs int64  `json:"throttle_ms_total"`
	LastActive string `json:"last_active"`
	// A shadow bucket's Throttled and ThrottleMs stay 0: Shadowed says
	// what it would have done.
	QuotaMode
}

// BucketRate is a bucket's rate per second; in a Tollgate cluster the
// whole cluster's as this instance knows it (tollgate_quota_rate), and
// Utilization is of it. InstanceRate is this instance's own part
// (tollgate_quota_instance_rate): Rate outside a cluster.
type BucketRate struct {
	Rate         float64 `json:"rate"`
	InstanceRate float64 `json:"instance_rate"`
	Utilization  float64 `json:"utilization"`
}

// QuotaMode is how a quota applies. Shadow is set for a quota in shadow
// mode (measured, not enforced); Shadowed is then what its bucket would
// have throttled. BurstSeconds is the entity's start-up burst in seconds
// of quota, when it sets one (absent: Kafka's).
type QuotaMode struct {
	Shadow       bool     `json:"shadow,omitempty"`
	Shadowed     *Shadow  `json:"shadowed,omitempty"`
	BurstSeconds *float64 `json:"burst_seconds,omitempty"`
}

// Buckets is GET /api/v1/buckets's answer: the busiest buckets, up to the
// limit asked, of Total.
type Buckets struct {
	Buckets []Bucket `json:"buckets"`
	Total   int      `json:"total"`
}

// Shadow is what a shadow quota's bucket would have throttled (since it
// was created or last switched to shadow): of its records (produce
// requests, fetch responses, partition mutations), how many, what share,
// by how much in all and at most.
type Shadow struct {
	Records          int64   `json:"records"`
	Throttled        int64   `json:"throttled"`
	ThrottledPercent float64 `json:"throttled_percent"`
	ThrottleMsTotal  int64   `json:"throttle_ms_total"`
	ThrottleMsMax    int64   `json:"throttle_ms_max"`
}

// EntityPart is one (type, name) pair of a quota entity, as in Kafka's
// DescribeClientQuotas: Default marks the default entity (name absent), so
// a literal name "<default>" stays distinct.
type EntityPart struct {
	Type    string  `json:"type"`
	Name    *string `json:"name"`
	Default bool    `json:"default,omitempty"`
}

// Resolved is the answer for one quota key.
type Resolved struct {
	Quota      string       `json:"quota"`
	Level      string       `json:"level"`
	Entity     []EntityPart `json:"entity,omitempty"`
	Value      *float64     `json:"value"`
	BucketUser string       `json:"bucket_user"`
	BucketCID  string       `json:"bucket_client_id"`
	// BucketPrefix is set when the bucket is a client-id prefix group:
	// every client-id starting with it shares it (BucketCID is then "").
	BucketPrefix string `json:"bucket_client_id_prefix,omitempty"`
	// BucketTopic and BucketTopicPrefix name a per-topic quota's bucket
	// (the answer for a topic asked with topic=).
	BucketTopic       string `json:"bucket_topic,omitempty"`
	BucketTopicPrefix string `json:"bucket_topic_prefix,omitempty"`
	// The mode of the quota that applies, and its bucket's rate (0 while
	// the bucket does not exist).
	QuotaMode
	BucketRate
}

// Resolve is GET /api/v1/resolve's answer: what applies to a (user,
// client-id) for every quota key, the tenant whose ceilings bound the
// user too, and, when asked, the per-topic quotas on a topic and the
// connection_creation_rate of an address. (Fields in the order of their
// names, as the answer has always listed them.)
type Resolve struct {
	ClientID    string         `json:"client_id"`
	IP          *ResolvedIP    `json:"ip,omitempty"`
	Quotas      []Resolved     `json:"quotas"`
	Tenant      *ResolveTenant `json:"tenant,omitempty"`
	Topic       *string        `json:"topic,omitempty"`
	TopicQuotas []Resolved     `json:"topic_quotas,omitempty"`
	User        string         `json:"user"`
}

// ResolveTenant is the tenant of a resolved user and its ceilings' use.
type ResolveTenant struct {
	Name  string          `json:"name"`
	Usage []TenantCeiling `json:"usage"`
}

// ResolvedIP is the connection_creation_rate of an address: Value and
// Entity absent when none applies; Rate and Connections, the address's
// now, absent without admission.
type ResolvedIP struct {
	Connections *int         `json:"connections,omitempty"`
	Entity      []EntityPart `json:"entity,omitempty"`
	IP          string       `json:"ip"`
	Quota       string       `json:"quota"`
	Rate        *float64     `json:"rate,omitempty"`
	Value       *int         `json:"value"`
}

// Listener is one listener's connections and limits.
type Listener struct {
	Name             string   `json:"name"`
	Exempt           bool     `json:"exempt"`
	Sessions         int      `json:"sessions"`
	Active           int      `json:"active"`
	MaxConnections   *float64 `json:"max_connections"`
	MaxCreationRate  *float64 `json:"max_connection_creation_rate"`
	AcceptRate       float64  `json:"connection_accept_rate"`
	Accepted         uint64   `json:"accepted"`
	Throttled        uint64   `json:"throttled"`
	Blocked          uint64   `json:"blocked"`
	Parked           uint64   `json:"parked"`
	Rejected         uint64   `json:"rejected"`
	BlockedPercent1m float64  `json:"acceptor_blocked_percent"`
}
