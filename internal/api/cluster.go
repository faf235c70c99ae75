package api

import "time"

// ClusterStatus is a Tollgate cluster as one instance sees it (GET
// /api/v1/cluster; internal/cluster's Status).
type ClusterStatus struct {
	ClusterID  string          `json:"cluster_id"`
	InstanceID string          `json:"instance_id"`
	Connected  bool            `json:"connected"`
	Live       int             `json:"live"`
	Members    []ClusterMember `json:"instances"`
	ConfigLog  ConfigLogStatus `json:"config_log"`
	Exchange   ExchangeStats   `json:"exchange"`
	// DigestsDiffer: the instances' config files declare different
	// quotas (docs/cluster.md says how file quotas combine).
	DigestsDiffer bool `json:"config_digests_differ"`
}

// ClusterMember is one instance of the Tollgate cluster as this one sees
// it.
type ClusterMember struct {
	ID          string    `json:"instance_id"`
	Incarnation int64     `json:"incarnation"`
	Version     string    `json:"version,omitempty"`
	Addr        string    `json:"admin_addr,omitempty"`
	Digest      string    `json:"config_digest,omitempty"`
	Self        bool      `json:"self"`
	Joined      time.Time `json:"joined"`
	LastSeen    time.Time `json:"last_seen"`
}

// ConfigLogStatus is what the shared configuration log reports about
// itself.
type ConfigLogStatus struct {
	Topic   string    `json:"topic"`
	Ready   bool      `json:"ready"`
	Next    int64     `json:"next_offset"`
	Applied time.Time `json:"last_applied,omitzero"`
	Error   string    `json:"error,omitempty"`
	// Signed: records are signed and checked (cluster.secret_file).
	Signed bool `json:"signed"`
	// Refused counts the records not applied, by reason
	// (tollgate_cluster_refused_total).
	Refused map[string]uint64 `json:"refused,omitempty"`
}

// ExchangeStats counts the usage exchange's traffic.
type ExchangeStats struct {
	Published      uint64 `json:"reports_published"`
	PublishFailed  uint64 `json:"reports_failed"`
	PublishedBytes uint64 `json:"bytes_published"`
	Received       uint64 `json:"reports_received"`
	ReceivedBytes  uint64 `json:"bytes_received"`
	Rejected       uint64 `json:"reports_rejected"`
	Entries        uint64 `json:"entries_published"`
	// Refused counts the report parts whose signature failed, by reason
	// (tollgate_cluster_refused_total); they are in Rejected too.
	Refused map[string]uint64 `json:"refused,omitempty"`
}
