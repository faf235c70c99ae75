// Package diskguard is disk-full protection for the whole cluster (issue
// 25 point 2): it reads every broker's log directories (DescribeLogDirs,
// KIP-827's total and usable bytes, Kafka 3.3+) at an interval and reports
// the cluster low on disk when any directory's free space falls below
// storage.min_free_bytes or storage.min_free_ratio; the quota filter then
// holds and throttles every Produce until it recovers. Pure but for the
// probe it is given; time passed in.
package diskguard

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Dir is one broker log directory's volume, as DescribeLogDirs reports it
// (-1: unreported — a broker before Kafka 3.3, or remote storage).
type Dir struct {
	Broker        int32
	Path          string
	Total, Usable int64
}

// Config is the storage section of tollgate.yaml.
type Config struct {
	// MinFreeBytes: a log directory with less usable space is low (0:
	// no such bound).
	MinFreeBytes int64 `yaml:"min_free_bytes"`
	// MinFreeRatio: a log directory whose usable ÷ total is below it is
	// low (0: no such bound).
	MinFreeRatio float64 `yaml:"min_free_ratio"`
	// CheckInterval is how often the brokers are asked (default 10s).
	CheckInterval time.Duration `yaml:"check_interval"`
	// Hold is how long each Produce is held, and its answer throttled,
	// while the cluster is low (default 5s).
	Hold time.Duration `yaml:"hold"`
	// OnProbeFailure is what a failed probe means: "open" (default: no
	// hold, a warning and a counted failure — Strimzi's plugin's choice
	// once its last reading expires) or "hold" (as low).
	OnProbeFailure string `yaml:"on_probe_failure"`
}

// Defaults.
const (
	DefaultCheckInterval = 10 * time.Second
	DefaultHold          = 5 * time.Second
)

// On reports whether a bound is set.
func (c Config) On() bool { return c.MinFreeBytes > 0 || c.MinFreeRatio > 0 }

func (c Config) withDefaults() Config {
	if c.CheckInterval <= 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.Hold <= 0 {
		c.Hold = DefaultHold
	}
	if c.OnProbeFailure == "" {
		c.OnProbeFailure = "open"
	}
	return c
}

// Validate checks the section offline.
func (c Config) Validate() error {
	switch {
	case c.MinFreeBytes < 0:
		return fmt.Errorf("storage.min_free_bytes %d: want 0 (off) or more", c.MinFreeBytes)
	case !(c.MinFreeRatio >= 0 && c.MinFreeRatio < 1):
		return fmt.Errorf("storage.min_free_ratio %v: want from 0 (off) to less than 1", c.MinFreeRatio)
	case c.CheckInterval < 0 || c.CheckInterval > 0 && c.CheckInterval < time.Second:
		return fmt.Errorf("storage.check_interval %s: want at least 1s", c.CheckInterval)
	case c.Hold < 0 || c.Hold > 5*time.Minute:
		return fmt.Errorf("storage.hold %s: want from 0 (default 5s) to 5m", c.Hold)
	case c.OnProbeFailure != "" && c.OnProbeFailure != "open" && c.OnProbeFailure != "hold":
		return fmt.Errorf("storage.on_probe_failure %q: want open or hold", c.OnProbeFailure)
	}
	return nil
}

// State is the guard's last reading.
type State struct {
	At time.Time
	// Low: a directory is below a bound (or the probe failed and
	// on_probe_failure is hold); Reason says which.
	Low    bool
	Reason string
	Dirs   []Dir
	// Err is the probe's failure, if it failed.
	Err error
}

// Evaluate is the state dirs (or the probe's err) give under c at now.
func Evaluate(c Config, dirs []Dir, err error, now time.Time) State {
	c = c.withDefaults()
	st := State{At: now, Dirs: dirs, Err: err}
	if err != nil {
		st.Low = c.OnProbeFailure == "hold"
		st.Reason = "the brokers' log directories could not be read: " + err.Error()
		return st
	}
	for _, d := range dirs {
		if d.Usable < 0 || d.Total <= 0 {
			continue // unreported: nothing to judge
		}
		switch {
		case c.MinFreeBytes > 0 && d.Usable < c.MinFreeBytes:
			st.Low, st.Reason = true, fmt.Sprintf("broker %d's %s has %d bytes free, below storage.min_free_bytes %d", d.Broker, d.Path, d.Usable, c.MinFreeBytes)
		case c.MinFreeRatio > 0 && float64(d.Usable)/float64(d.Total) < c.MinFreeRatio:
			st.Low, st.Reason = true, fmt.Sprintf("broker %d's %s has %.4g%% free, below storage.min_free_ratio %.4g%%", d.Broker, d.Path,
				100*float64(d.Usable)/float64(d.Total), 100*c.MinFreeRatio)
		}
		if st.Low {
			return st
		}
	}
	return st
}

// Guard probes the brokers and holds the state the quota filter reads.
type Guard struct {
	probe func(context.Context) ([]Dir, error)
	log   *slog.Logger
	now   func() time.Time

	cfg      atomic.Pointer[Config]
	st       atomic.Pointer[State]
	failures atomic.Uint64
	mu       sync.Mutex // one probe at a time
}

// New makes a guard; probe reads every broker's log directories.
func New(c Config, probe func(context.Context) ([]Dir, error), log *slog.Logger, now func() time.Time) *Guard {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	g := &Guard{probe: probe, log: log, now: now}
	g.SetConfig(c)
	g.st.Store(&State{})
	return g
}

// SetConfig applies a new storage section (a live reload).
func (g *Guard) SetConfig(c Config) {
	c = c.withDefaults()
	g.cfg.Store(&c)
}

// Config is the section in force.
func (g *Guard) Config() Config { return *g.cfg.Load() }

// Hold is how long a Produce waits, and its answer is throttled, now: the
// storage.hold while the cluster is low, 0 otherwise. It is on the data
// path: two atomic loads.
func (g *Guard) Hold() time.Duration {
	c := g.cfg.Load()
	if !c.On() || !g.st.Load().Low {
		return 0
	}
	return c.Hold
}

// State is the last reading.
func (g *Guard) State() State { return *g.st.Load() }

// ProbeFailures counts the probes that failed.
func (g *Guard) ProbeFailures() uint64 { return g.failures.Load() }

// Check probes once and stores the state; a change of lowness is logged.
func (g *Guard) Check(ctx context.Context) State {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.Config()
	var dirs []Dir
	var err error
	if c.On() {
		dirs, err = g.probe(ctx)
		if err != nil {
			g.failures.Add(1)
		}
	}
	slices.SortFunc(dirs, func(a, b Dir) int {
		if a.Broker != b.Broker {
			return int(a.Broker - b.Broker)
		}
		if a.Path < b.Path {
			return -1
		}
		return 1
	})
	st := Evaluate(c, dirs, err, g.now())
	if !c.On() {
		st.Low = false
	}
	prev := g.st.Swap(&st)
	switch {
	case st.Low && !prev.Low:
		g.log.Warn("the cluster is low on disk: every Produce is held and throttled until it recovers", "reason", st.Reason, "hold", c.Hold)
	case !st.Low && prev.Low:
		g.log.Info("the cluster's disks recovered: Produce flows again")
	case err != nil && prev.Err == nil:
		g.log.Warn("the brokers' log directories could not be read; storage protection is open until they can", "err", err)
	}
	return st
}

// Run checks every check_interval until ctx ends.
func (g *Guard) Run(ctx context.Context) {
	for {
		g.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.Config().CheckInterval):
		}
	}
}
