package usage

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of the usage settings.
const (
	DefaultRetention = 90 * 24 * time.Hour
	DefaultMaxKeys   = 10000
)

// Config is the usage section of tollgate.yaml.
type Config struct {
	// Enabled records the ledger (default true).
	Enabled *bool `yaml:"enabled"`
	// Retention is how long minutes are kept. Files are whole UTC days: a
	// day's file is removed once its last minute is older than this.
	Retention time.Duration `yaml:"retention"`
	// Topic, when set, also produces each written minute to this topic on
	// the upstream cluster (acks=all), keyed by instance and minute so
	// that a compacted topic keeps one record per minute.
	Topic string `yaml:"topic"`
	// MaxKeys bounds the distinct (user, client-id) pairs counted at once;
	// beyond it a user's further client ids are summed in one overflow
	// row, so that a client cycling client ids cannot grow the ledger
	// without bound.
	MaxKeys int `yaml:"max_keys"`
}

// On reports usage.enabled (default true).
func (c Config) On() bool { return c.Enabled == nil || *c.Enabled }

// RetentionOrDefault is usage.retention with its default.
func (c Config) RetentionOrDefault() time.Duration {
	if c.Retention > 0 {
		return c.Retention
	}
	return DefaultRetention
}

// MaxKeysOrDefault is usage.max_keys with its default.
func (c Config) MaxKeysOrDefault() int {
	if c.MaxKeys > 0 {
		return c.MaxKeys
	}
	return DefaultMaxKeys
}

// Validate checks the usage section offline.
func (c Config) Validate() error {
	var errs []error
	if c.Retention < 0 {
		errs = append(errs, errors.New("usage.retention must not be negative"))
	} else if c.Retention > 0 && c.Retention < time.Hour {
		errs = append(errs, fmt.Errorf("usage.retention %s: want at least 1h (files are whole days)", c.Retention))
	}
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("usage.max_keys %d must be positive", c.MaxKeys))
	}
	if c.Topic != "" {
		if err := validTopic(c.Topic); err != nil {
			errs = append(errs, fmt.Errorf("usage.topic %q: %w", c.Topic, err))
		}
	}
	return errors.Join(errs...)
}

// validTopic applies Kafka's topic name rule (Topic.validate).
func validTopic(t string) error {
	if t == "." || t == ".." {
		return errors.New("is not a valid topic name")
	}
	if len(t) > 249 {
		return errors.New("is longer than 249 characters")
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("has the character %q: topic names use [a-zA-Z0-9._-]", c)
		}
	}
	return nil
}
