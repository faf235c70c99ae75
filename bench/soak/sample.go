//go:build linux

package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
)

// The columns of a sample, in the CSV's order.
const (
	colElapsed = iota
	colRSS
	colHeap
	colGoroutines
	colThreads
	colFDs
	colConns
	colCPU
	colHelperRSS
	colHelperFDs
	colProduced
	colConsumed
	colAdmin
	colShort
	colBare
	colIdle
	colLoginsOK
	colLoginsRefused
	colThrottles
	colRebalances
	colErrors
	colBenchRSS
	numCols
)

var colNames = [numCols]string{
	"elapsed_s", "rss_mib", "heap_inuse_mib", "goroutines", "threads", "fds", "conns_active", "cpu_cores",
	"helper_rss_mib", "helper_fds",
	"produced_mib", "consumed_mib", "admin_rounds", "short_clients", "bare_conns", "idle_opened",
	"logins_ok", "logins_refused", "throttled_responses", "rebalances", "errors",
	"bench_rss_mib",
}

// flat are the columns that must stay flat, with their units for the
// summary.
var flat = []struct {
	col  int
	unit string
}{
	{colRSS, "MiB"}, {colHeap, "MiB"}, {colGoroutines, ""}, {colThreads, ""}, {colFDs, ""}, {colConns, ""},
	{colHelperRSS, "MiB"}, {colHelperFDs, ""},
}

type row [numCols]float64

type sampler struct {
	gw      *gateway
	l       *load
	w       *csv.Writer
	rows    []row
	t0      time.Time
	lastCPU time.Duration
	lastAt  time.Time
}

func newSampler(gw *gateway, l *load, out io.Writer) *sampler {
	s := &sampler{gw: gw, l: l, w: csv.NewWriter(out), t0: time.Now()}
	s.w.Write(colNames[:])
	s.lastCPU, s.lastAt = benchkit.ProcCPU(gw.cmd.Process.Pid), s.t0
	return s
}

// loop samples every interval until duration has passed, ctx ends or
// the gateway dies (returned as an error).
func (s *sampler) loop(ctx context.Context, interval, duration time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := time.Duration(1); n*interval <= duration; n++ {
		select {
		case <-ctx.Done():
			return s.gw.alive()
		case <-t.C:
		}
		if err := s.gw.alive(); err != nil {
			return err
		}
		r, err := s.sample()
		if err != nil {
			fmt.Fprintln(os.Stderr, "sample:", err)
			continue
		}
		s.rows = append(s.rows, r)
		rec := make([]string, numCols)
		for i, v := range r {
			rec[i] = strconv.FormatFloat(v, 'f', -1, 64)
		}
		s.w.Write(rec)
		s.w.Flush()
		errs, kinds := s.l.errorCount()
		fmt.Fprintf(os.Stderr, "%6.0fs rss %.1f MiB heap %.1f MiB goroutines %.0f threads %.0f fds %.0f conns %.0f cpu %.2f | produced %.0f MiB consumed %.0f MiB admin %.0f short %.0f bare %.0f idle %.0f logins %.0f/%.0f throttled %.0f rebalances %.0f errors %d %s | bench rss %.0f MiB\n",
			r[colElapsed], r[colRSS], r[colHeap], r[colGoroutines], r[colThreads], r[colFDs], r[colConns], r[colCPU],
			r[colProduced], r[colConsumed], r[colAdmin], r[colShort], r[colBare], r[colIdle], r[colLoginsOK], r[colLoginsRefused],
			r[colThrottles], r[colRebalances], errs, kinds, r[colBenchRSS])
	}
	return nil
}

func (s *sampler) sample() (row, error) {
	var r row
	pid := s.gw.cmd.Process.Pid
	now := time.Now()
	r[colElapsed] = math.Round(now.Sub(s.t0).Seconds())
	rss, err := benchkit.RSSKiB(pid)
	if err != nil {
		return r, err
	}
	r[colRSS] = float64(rss) / 1024
	fds, err := benchkit.OpenFDs(pid)
	if err != nil {
		return r, err
	}
	r[colFDs] = float64(fds)
	m, err := benchkit.Scrape(s.gw.admin)
	if err != nil {
		return r, err
	}
	for _, need := range []string{"go_goroutines", "go_threads", "go_memstats_heap_inuse_bytes"} {
		if _, ok := m[need]; !ok {
			return r, fmt.Errorf("/metrics has no %s", need)
		}
	}
	r[colGoroutines], r[colThreads], r[colHeap] = m["go_goroutines"], m["go_threads"], m["go_memstats_heap_inuse_bytes"]/(1<<20)
	for k, v := range m {
		if strings.HasPrefix(k, "tollgate_connections_active{") {
			r[colConns] += v
		}
	}
	cpu := benchkit.ProcCPU(pid)
	r[colCPU] = (cpu - s.lastCPU).Seconds() / now.Sub(s.lastAt).Seconds()
	s.lastCPU, s.lastAt = cpu, now
	// The acceptor helper (a child process); -1 when there is none.
	r[colHelperRSS], r[colHelperFDs] = -1, -1
	if kids := benchkit.ChildPIDs(pid); len(kids) > 0 {
		if rss, err := benchkit.RSSKiB(kids[0]); err == nil {
			r[colHelperRSS] = float64(rss) / 1024
		}
		if n, err := benchkit.OpenFDs(kids[0]); err == nil {
			r[colHelperFDs] = float64(n)
		}
	}
	l := s.l
	r[colProduced] = float64(l.produced.Load()) / (1 << 20)
	r[colConsumed] = float64(l.consumed.Load()) / (1 << 20)
	r[colAdmin] = float64(l.adminRounds.Load())
	r[colShort] = float64(l.churned.Load())
	r[colBare] = float64(l.bare.Load())
	r[colIdle] = float64(l.idleOpened.Load())
	r[colLoginsOK] = float64(l.loginsOK.Load())
	r[colLoginsRefused] = float64(l.loginsRefused.Load())
	r[colThrottles] = float64(l.throttles.Load())
	r[colRebalances] = float64(l.rebalances.Load())
	errs, _ := l.errorCount()
	r[colErrors] = float64(errs)
	// This process (the cluster and the clients): bounded by the
	// cluster's retention.
	if rss, err := benchkit.RSSKiB(os.Getpid()); err == nil {
		r[colBenchRSS] = float64(rss) / 1024
	}
	return r, nil
}

// slope is the least-squares slope of column col against time, per hour,
// over rows.
func slope(rows []row, col int) float64 {
	n := float64(len(rows))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, r := range rows {
		x, y := r[colElapsed]/3600, r[col]
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// afterWarmup is the rows sampled after the warm-up, or all of them when
// fewer than three are.
func afterWarmup(rows []row, warmup time.Duration) ([]row, bool) {
	for i, r := range rows {
		if r[colElapsed] >= warmup.Seconds() {
			if len(rows)-i >= 3 {
				return rows[i:], true
			}
			break
		}
	}
	return rows, false
}

func summary(w io.Writer, o options, rows []row, l *load) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no samples")
		return
	}
	last := rows[len(rows)-1]
	el := last[colElapsed]
	steady, ok := afterWarmup(rows, o.warmup)
	from := steady[0][colElapsed]
	fmt.Fprintf(w, "soak of %s, sampled every %s (%d samples); slopes by least squares over the samples from %.0f s on", time.Duration(el)*time.Second, o.interval, len(rows), from)
	if !ok {
		fmt.Fprintf(w, " (the run is too short for a %s warm-up: all samples)", o.warmup)
	}
	fmt.Fprintf(w, "\n\n| gateway | first | after warm-up | last | min | max | slope per hour | slope ÷ mean |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range flat {
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, r := range rows {
			lo, hi = math.Min(lo, r[f.col]), math.Max(hi, r[f.col])
		}
		for _, r := range steady {
			sum += r[f.col]
		}
		sl := slope(steady, f.col)
		rel := "–"
		if mean := sum / float64(len(steady)); mean > 0 {
			rel = fmt.Sprintf("%+.1f %%", 100*sl/mean)
		}
		name := colNames[f.col]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %+.2f%s | %s |\n", name, num(rows[0][f.col], f.unit), num(steady[0][f.col], f.unit),
			num(last[f.col], f.unit), num(lo, f.unit), num(hi, f.unit), sl, unit(f.unit), rel)
	}
	var cpu float64
	for _, r := range steady {
		cpu += r[colCPU]
	}
	errs, kinds := l.errorCount()
	fmt.Fprintf(w, "\ngateway CPU after warm-up: %.2f cores on average\n", cpu/float64(len(steady)))
	fmt.Fprintf(w, "\nload over %.0f s: produced %.0f MiB (%.2f MiB/s), consumed %.0f MiB, %.0f admin rounds, %.0f short-lived clients, %.0f bare connections, %.0f idle connections opened (%d held), %.0f SCRAM logins accepted and %.0f wrong passwords refused, %.0f throttled responses, %.0f partition assignments, %d unexpected errors %s\n",
		el, last[colProduced], last[colProduced]/el, last[colConsumed], last[colAdmin], last[colShort], last[colBare], last[colIdle], o.idleConns,
		last[colLoginsOK], last[colLoginsRefused], last[colThrottles], last[colRebalances], errs, kinds)
	l.throttledIDsMu.Lock()
	fmt.Fprintf(w, "throttled responses by client-id, at the end: %v\n", l.throttledBy)
	l.throttledIDsMu.Unlock()
}

func num(v float64, u string) string {
	if u == "MiB" {
		return fmt.Sprintf("%.1f%s", v, unit(u))
	}
	return fmt.Sprintf("%.0f", v)
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}
