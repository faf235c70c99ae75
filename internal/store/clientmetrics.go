package store

import (
	"errors"

	bolt "go.etcd.io/bbolt"
)

// ClientMetrics is one client-metrics subscription (KIP-714, Kafka's
// CLIENT_METRICS config resource): its name and configs.
type ClientMetrics struct {
	Name   string
	Values map[string]string
}

// ClientMetricsChange is a list of ops on one subscription, applied in
// order; the subscription exists while it has a config.
type ClientMetricsChange struct {
	Name string
	Ops  []ConfigOp
}

// ClientMetricsResult is the effect of one ClientMetricsChange.
type ClientMetricsResult struct {
	Name    string
	Changes []StringChange
	Changed bool
}

// ClientMetrics returns every subscription, by name.
func (s *Store) ClientMetrics() ([]ClientMetrics, error) {
	var out []ClientMetrics
	err := s.readScopes(bucketMetrics, func(k []byte, vals map[string]string) error {
		out = append(out, ClientMetrics{Name: string(k), Values: vals})
		return nil
	})
	return out, err
}

// SetClientMetricsFunc applies the changes in one transaction, with a hook
// called before the commit, as AlterClientQuotasFunc.
func (s *Store) SetClientMetricsFunc(changes []ClientMetricsChange, before func([]ClientMetricsResult) error) ([]ClientMetricsResult, error) {
	return alterAll(s, bucketMetrics, changes, func(root *bolt.Bucket, ch ClientMetricsChange) (ClientMetricsResult, error) {
		if ch.Name == "" || len(ch.Name) > bolt.MaxKeySize {
			return ClientMetricsResult{}, errors.New("store: invalid client-metrics subscription name")
		}
		r := ClientMetricsResult{Name: ch.Name}
		var err error
		r.Changes, r.Changed, err = applyOps(root, []byte(ch.Name), ch.Ops, "config", stringCodec)
		return r, err
	}, func(r ClientMetricsResult) bool { return r.Changed }, func(r ClientMetricsResult) []leaf {
		return leavesOf(bucketMetrics, []byte(r.Name), r.Changes)
	}, before)
}
