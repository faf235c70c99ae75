// Package devcluster runs the embedded development cluster: franz-go's
// kfake, in-process, so that `tollgate serve` with no upstream configured
// fronts a working 3-broker cluster on a machine with nothing installed.
// It is for development and tests, not production data: kfake keeps
// everything in memory and enforces no quotas of its own.
package devcluster

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config configures the embedded cluster.
type Config struct {
	// Brokers is the number of brokers (default 3).
	Brokers int `yaml:"brokers"`
	// Partitions is the default partition count of auto-created topics
	// (default 3).
	Partitions int `yaml:"partitions"`
	// Ports are the brokers' ports on 127.0.0.1, one per broker; empty:
	// free ports. Fixed ports let other processes — more Tollgate
	// instances of a Tollgate cluster — use the same embedded cluster.
	Ports []int `yaml:"ports"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Brokers < 0 || c.Brokers > 64 {
		return fmt.Errorf("dev_cluster.brokers %d out of range 1-64", c.Brokers)
	}
	if c.Partitions < 0 {
		return fmt.Errorf("dev_cluster.partitions %d must be positive", c.Partitions)
	}
	if len(c.Ports) > 0 {
		n := c.Brokers
		if n == 0 {
			n = 3
		}
		if len(c.Ports) != n {
			return fmt.Errorf("dev_cluster.ports has %d ports for %d brokers: give one per broker", len(c.Ports), n)
		}
		seen := map[int]bool{}
		for _, p := range c.Ports {
			if p < 1 || p > 65535 || seen[p] {
				return fmt.Errorf("dev_cluster.ports: %d is not a port, or is given twice", p)
			}
			seen[p] = true
		}
	}
	return nil
}

// Cluster is a running embedded cluster.
type Cluster struct {
	*kfake.Cluster
}

// Start starts the cluster. extra options (tests: SASL, an in-memory
// listen function, seed topics) are applied after the defaults.
func Start(cfg Config, extra ...kfake.Opt) (*Cluster, error) {
	if cfg.Brokers == 0 {
		cfg.Brokers = 3
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 3
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(cfg.Brokers),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.ClusterID("tollgate-dev"),
	}
	if len(cfg.Ports) > 0 {
		opts = append(opts, kfake.Ports(cfg.Ports...))
	}
	opts = append(opts, extra...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	return &Cluster{c}, nil
}

// Addrs returns the brokers' addresses.
func (c *Cluster) Addrs() []string { return c.ListenAddrs() }
