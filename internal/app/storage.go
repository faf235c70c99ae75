package app

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/diskguard"
)

// storageRun is the disk-full protection: the guard and its probe's
// client to the upstream (storage.*, docs/quotas.md), made at the first
// check: with no bound set (the default) Tollgate opens no connection for
// it.
type storageRun struct {
	guard  *diskguard.Guard
	cancel context.CancelFunc
	done   sync.WaitGroup
	once   sync.Once

	mu    sync.Mutex
	cl    *kgo.Client
	probe func(context.Context) ([]diskguard.Dir, error)
}

// startStorage makes the guard, which probes the brokers at
// storage.check_interval while a bound is set (a reload may set one
// later: the guard always runs, and asks nothing while none is).
func (a *App) startStorage(context.Context) error {
	opts, err := a.upstreamClientOpts(a.upstream, "tollgate-storage")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &storageRun{cancel: cancel}
	r.guard = diskguard.New(a.cfg.Storage, func(ctx context.Context) ([]diskguard.Dir, error) {
		r.mu.Lock()
		if r.cl == nil {
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				r.mu.Unlock()
				return nil, err
			}
			r.cl, r.probe = cl, diskguard.KafkaProbe(cl)
		}
		probe := r.probe
		r.mu.Unlock()
		return probe(ctx)
	}, a.log, nil)
	a.storage = r
	a.metrics.RegisterStorage(r.guard)
	r.done.Add(1)
	go func() { defer r.done.Done(); r.guard.Run(ctx) }()
	return nil
}

// storageHold is the quota filter's hold of a Produce while the cluster
// is low on disk.
func (a *App) storageHold() func() time.Duration {
	if a.storage == nil {
		return nil
	}
	return a.storage.guard.Hold
}

func (a *App) stopStorage() {
	r := a.storage
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.cancel()
		r.done.Wait()
		r.mu.Lock()
		if r.cl != nil {
			r.cl.Close()
		}
		r.mu.Unlock()
	})
}
