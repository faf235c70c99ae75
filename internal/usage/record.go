package usage

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// FormatVersion is the "v" of every minute line this Tollgate writes. A
// field added later (a row's tenant or topic, say) is optional: readers
// ignore what they do not know, so it does not change the version.
const FormatVersion = 1

// Counters are one row's figures for one minute.
type Counters struct {
	// ProduceBytes is the size of Produce requests as Kafka's quotas count
	// them: header and body, everything after the 4-byte size prefix.
	ProduceBytes int64 `json:"produce_bytes"`
	// FetchBytes is the size of Fetch and ShareFetch responses as written
	// to the client, likewise after the size prefix.
	FetchBytes int64 `json:"fetch_bytes"`
	// Requests is every request answered (by the broker or the gateway),
	// and every acks=0 Produce forwarded.
	Requests int64 `json:"requests"`
	// ThrottleMs is the sum of the throttles the gateway gave (each as
	// the whole milliseconds the client was told).
	ThrottleMs int64 `json:"throttle_ms"`
	// PartitionMutations is the partitions created, added or deleted by
	// the CreateTopics, CreatePartitions and DeleteTopics requests the
	// broker accepted.
	PartitionMutations int64 `json:"partition_mutations"`
}

// Add adds o to c.
func (c *Counters) Add(o Counters) {
	c.ProduceBytes += o.ProduceBytes
	c.FetchBytes += o.FetchBytes
	c.Requests += o.Requests
	c.ThrottleMs += o.ThrottleMs
	c.PartitionMutations += o.PartitionMutations
}

// IsZero reports whether nothing was counted.
func (c Counters) IsZero() bool { return c == Counters{} }

// Row is one (user, client-id)'s counters in one minute.
type Row struct {
	User     string `json:"user"`
	ClientID string `json:"client_id"`
	// Tenant is the tenant the user belonged to when the minute was
	// written; omitted for a user in none (and in minutes written before
	// tenants existed).
	Tenant string `json:"tenant,omitempty"`
	// Topic marks a per-topic row: the record bytes the (user, client-id)
	// produced to or fetched from that topic (RecordTopic), beside its
	// row without a topic, which counts everything. Omitted on that row.
	Topic string `json:"topic,omitempty"`
	// Overflow marks the sum of the user's client ids counted beyond
	// usage.max_keys (ClientID is then "").
	Overflow bool `json:"overflow,omitempty"`
	Counters
}

// Minute is one line of the ledger: every row of one minute of one
// instance.
type Minute struct {
	V        int       `json:"v"`
	Minute   time.Time `json:"minute"` // the minute's start, UTC
	Instance string    `json:"instance"`
	Rows     []Row     `json:"rows"`
}

// encode is the minute's line, newline included.
func (m *Minute) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeMinute reads one line (without its newline) and checks it.
func decodeMinute(line []byte) (Minute, error) {
	var m Minute
	if err := json.Unmarshal(line, &m); err != nil {
		return Minute{}, fmt.Errorf("not a usage record: %w", err)
	}
	switch {
	case m.V > FormatVersion:
		return Minute{}, fmt.Errorf("format version %d is newer than this Tollgate's (%d)", m.V, FormatVersion)
	case m.V < 1:
		return Minute{}, errors.New("no format version (v)")
	case m.Minute.IsZero() || !m.Minute.Equal(m.Minute.Truncate(time.Minute)):
		return Minute{}, fmt.Errorf("minute %s is not the start of a minute", m.Minute.Format(time.RFC3339Nano))
	case m.Instance == "":
		return Minute{}, errors.New("no instance")
	}
	m.Minute = m.Minute.UTC()
	return m, nil
}

// unixMinute is t's minute as minutes since the epoch.
func unixMinute(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return (s - 59) / 60
	}
	return s / 60
}

// minuteTime is the start of a unixMinute, UTC.
func minuteTime(m int64) time.Time { return time.Unix(m*60, 0).UTC() }
