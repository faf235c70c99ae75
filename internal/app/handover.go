package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tollgate/tollgate/internal/accept"
)

// DefaultHandoverTimeout is handover_timeout's default.
const DefaultHandoverTimeout = 30 * time.Second

// reacquireWait bounds the wait for data_dir's lock after a failed
// handover (the new process has been killed and waited for: its lock is
// gone).
const reacquireWait = 10 * time.Second

// HandOver starts exe with args as this process's successor and hands it
// every listening socket (the listeners' ports and the admin port) and
// data_dir (see accept/handover.go for the exchange). It returns nil once
// the new process serves: this one has then stopped accepting, its admin
// port is shut, and the caller drains it (Stop) and exits. On error —
// the new process exited, or did not serve within handover_timeout, or
// ctx ended — the new process is killed, this one takes data_dir back and
// carries on: it never stopped accepting.
//
// Between the new process taking data_dir and this one stopping (a moment,
// then the drain), control-plane requests answered here fail with a clear
// error and change nothing, and the usage this process serves is not
// written to the ledger (docs/operations.md, Upgrades).
func (a *App) HandOver(ctx context.Context, exe string, args []string) (err error) {
	defer func() {
		if err != nil {
			a.log.Error("handover failed; this process serves on", "err", err)
		}
	}()
	if !a.handover.TryLock() {
		return errors.New("handover: one is already in progress")
	}
	defer a.handover.Unlock()
	if a.handedOver {
		return errors.New("handover: already handed over")
	}
	if a.dev != nil {
		return errors.New("handover: needs upstream.bootstrap (the embedded development cluster lives in this process)")
	}
	socks, err := a.gw.Sockets()
	if err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	if a.httpTCP != nil {
		hs, err := accept.ListenerSocket(accept.HTTPSocket, a.httpTCP)
		if err != nil {
			closeSockets(socks)
			return fmt.Errorf("handover: %w", err)
		}
		socks = append(socks, hs)
	}
	succ, err := accept.StartSuccessor(exe, args, socks, os.Stdout, os.Stderr)
	closeSockets(socks) // the new process has its own copies
	if err != nil {
		return fmt.Errorf("handover: start %s: %w", exe, err)
	}
	a.log.Info("handover: new process started", "pid", succ.Pid(), "exe", exe, "sockets", len(socks))
	ctx, cancel := context.WithTimeout(ctx, a.cfg.HandoverTimeout)
	defer cancel()
	if err := succ.AwaitPrepared(ctx); err != nil {
		succ.Abort()
		return fmt.Errorf("handover: %w", err)
	}
	a.releaseDataDir()
	a.log.Info("handover: data_dir released to the new process", "pid", succ.Pid())
	err = succ.DataDirReleased()
	if err == nil {
		err = succ.AwaitServing(ctx)
	}
	if err != nil {
		succ.Abort()
		if rerr := a.reacquireDataDir(); rerr != nil {
			a.log.Error("handover: cannot take data_dir back: the control plane fails until a restart", "err", rerr)
			return errors.Join(fmt.Errorf("handover: %w", err), rerr)
		}
		return fmt.Errorf("handover: %w", err)
	}
	succ.Close()
	a.handedOver = true
	a.log.Info("handover: the new process serves; this one stops accepting and drains", "pid", succ.Pid())
	a.gw.StopAccepting()
	if a.httpSrv != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
		if err := a.httpSrv.Shutdown(hctx); err != nil {
			a.log.Warn("handover: admin port shutdown", "err", err)
		}
		hcancel()
		a.httpSrv = nil
	}
	return nil
}

func closeSockets(socks []accept.Socket) {
	for _, s := range socks {
		s.File.Close()
	}
}

// releaseDataDir lets a new process open data_dir while this one keeps
// serving: the usage ledger writes what it has counted (the open minute
// too) and stops writing, and the store closes its file (its reads and
// writes fail with store.ErrReleased). The audit log needs nothing: its
// file is opened for each event, so both processes append to it.
func (a *App) releaseDataDir() {
	if u := a.usage; u != nil {
		if err := u.pause(); err != nil {
			a.log.Error("handover: usage ledger", "err", err)
		}
	}
	if err := a.store.Release(); err != nil {
		a.log.Error("handover: closing the store", "err", err)
	}
}

// reacquireDataDir takes data_dir back after a failed handover, and
// re-reads what the failed process may have changed there.
func (a *App) reacquireDataDir() error {
	err := a.store.Reacquire(reacquireWait)
	if u := a.usage; u != nil {
		if uerr := u.resume(a.clock()()); uerr != nil {
			a.log.Error("handover: usage ledger", "err", uerr)
		}
	}
	if err != nil {
		return err
	}
	if err := a.creds.Load(); err != nil {
		a.log.Error("handover: reloading credentials", "err", err)
	}
	if err := a.refreshQuotas(); err != nil {
		a.log.Error("handover: reloading quotas", "err", err)
	}
	a.log.Info("handover: data_dir taken back; serving as before")
	return nil
}

// pause stops the flush loop and closes the ledger (writing the open
// minute). Counting goes on in memory, for resume.
func (u *usageRun) pause() error {
	if !u.started || u.paused {
		return nil
	}
	close(u.stop)
	<-u.done
	u.paused = true
	return u.l.Close()
}

// resume reopens the ledger and restarts its flush loop.
func (u *usageRun) resume(now time.Time) error {
	if !u.paused {
		return nil
	}
	err := u.l.Reopen(now)
	u.stop, u.done = make(chan struct{}), make(chan struct{})
	u.paused = false
	go u.loop()
	return err
}
