package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/kafkaapi"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/usage"
)

// The usage ledger's wiring: the gateway's ServeHook counts every answered
// request and the last filter of the chain the partitions of the mutation
// requests the broker accepted (kafkaapi/usage.go), a loop writes each
// closed minute (usage.Ledger.Flush), and an optional publisher produces
// each written minute to usage.topic (usage.Publisher).

// usageFlushEvery is how often the loop looks for a closed minute: a
// minute is written within this much of its end.
const usageFlushEvery = time.Second

// usageRun is the running ledger and what feeds it.
type usageRun struct {
	l    *usage.Ledger
	pub  *usage.Publisher
	now  func() time.Time
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error
	// started: the loop and the publisher run (startUsage).
	started bool
	// paused: data_dir is released to a new process; the ledger is
	// closed and its loop stopped (handover.go).
	paused bool
}

// clock is the app's clock: Options.Now, or time.Now.
func (a *App) clock() func() time.Time {
	if a.opts.Now != nil {
		return a.opts.Now
	}
	return time.Now
}

// openUsage reads (or makes) the instance id and, unless usage.enabled is
// false, opens the ledger under <data_dir>/usage.
func (a *App) openUsage(upstream []string) error {
	id, err := usage.InstanceID(a.cfg.dataDir())
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if !a.cfg.Usage.On() {
		return nil
	}
	dir := filepath.Join(a.cfg.dataDir(), "usage")
	u := &usageRun{now: a.clock(), log: a.log, stop: make(chan struct{}), done: make(chan struct{})}
	var written func(*usage.Minute, []byte)
	if t := a.cfg.Usage.Topic; t != "" {
		pub, err := a.newUsagePublisher(upstream, dir, t, id)
		if err != nil {
			return fmt.Errorf("usage.topic: %w", err)
		}
		u.pub = pub
		written = pub.Written
	}
	l, err := usage.Open(usage.Options{
		Dir:       dir,
		Instance:  id,
		Retention: a.cfg.Usage.RetentionOrDefault(),
		MaxKeys:   a.cfg.Usage.MaxKeysOrDefault(),
		Log:       a.log,
		Written:   written,
		TenantOf: func(user string) string {
			t, _ := a.engine.TenantOf(user)
			return t
		},
	}, u.now())
	if err != nil {
		if u.pub != nil {
			u.pub.Close(context.Background())
		}
		return err
	}
	u.l = l
	if u.pub != nil {
		if err := u.pub.CatchUp(); err != nil {
			a.log.Warn("usage.topic: cannot read the minutes left to produce", "err", err)
		}
	}
	a.usage = u
	if last, ok := l.LastWritten(); ok {
		a.log.Info("usage ledger opened", "dir", dir, "instance", id, "last_minute", last)
	} else {
		a.log.Info("usage ledger opened", "dir", dir, "instance", id)
	}
	return nil
}

// usageLedger is the ledger the chain counts into, or nil (kafkaapi.Deps).
func (a *App) usageLedger() kafkaapi.Ledger {
	if a.usage == nil {
		return nil
	}
	return a.usage.l
}

// topicUsage hears the topics' record bytes as per-topic quotas charge
// them, for the ledger's per-topic rows (nil when usage.enabled is false).
func (a *App) topicUsage() func(user, clientID string, topic []byte, produce bool, n int, now time.Time) {
	if a.usage == nil {
		return nil
	}
	return a.usage.l.RecordTopic
}

// usageHooks registers the ServeHook.
func (a *App) usageHooks() []proxy.Option {
	if a.usage == nil {
		return nil
	}
	return []proxy.Option{proxy.WithHooks(kafkaapi.UsageHook(a.usage.l, a.usage.now))}
}

// startUsage starts the flush loop and the publisher. Call it before the
// gateway accepts.
func (a *App) startUsage() {
	u := a.usage
	if u == nil {
		return
	}
	u.started = true
	go u.loop()
	if u.pub != nil {
		u.pub.Start()
	}
}

func (u *usageRun) loop() {
	defer close(u.done)
	t := time.NewTicker(usageFlushEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-u.stop:
			return
		case <-t.C:
		}
		err := u.l.Flush(u.now())
		switch {
		case err != nil && !failing:
			u.log.Error("usage ledger: cannot write", "err", err)
		case err == nil && failing:
			u.log.Info("usage ledger: writing again")
		}
		failing = err != nil
	}
}

// Usage is the usage ledger, or nil when usage.enabled is false.
func (a *App) Usage() *usage.Ledger {
	if a.usage == nil {
		return nil
	}
	return a.usage.l
}

// usageDrain bounds how long a stop waits for the publisher.
const usageDrain = 5 * time.Second

// stopUsage writes every minute counted, the open one included, once the
// gateway has stopped serving, and gives the publisher up to usageDrain
// (within ctx) to produce what is left (the rest is produced after the
// next start).
func (a *App) stopUsage(ctx context.Context) error {
	u := a.usage
	if u == nil {
		return nil
	}
	u.once.Do(func() {
		if u.started && !u.paused {
			close(u.stop)
			<-u.done
		}
		u.err = u.l.Close()
		if u.pub != nil {
			ctx, cancel := context.WithTimeout(ctx, usageDrain)
			defer cancel()
			u.pub.Close(ctx)
		}
	})
	return u.err
}

// usageSource answers GET /api/v1/usage from the ledger's files (nil when
// usage.enabled is false).
func (a *App) usageSource() func(usage.Query) (*usage.Report, error) {
	if a.usage == nil {
		return nil
	}
	dir := a.usage.l.Dir()
	return func(q usage.Query) (*usage.Report, error) { return usage.Read(dir, q) }
}

// suggestSource answers GET /api/v1/quotas/suggest from the ledger's
// files (nil when usage.enabled is false).
func (a *App) suggestSource() func(usage.SuggestQuery) ([]usage.Proposal, error) {
	if a.usage == nil {
		return nil
	}
	src := usage.DirMinutes(a.usage.l.Dir())
	return func(q usage.SuggestQuery) ([]usage.Proposal, error) { return usage.Suggest(src, q) }
}

func (a *App) newUsagePublisher(upstream []string, dir, topic, instance string) (*usage.Publisher, error) {
	opts, err := a.upstreamClientOpts(upstream, "tollgate-usage")
	if err != nil {
		return nil, err
	}
	return usage.NewPublisher(usage.PublisherOptions{Dir: dir, Topic: topic, Instance: instance, Client: opts, Log: a.log})
}
