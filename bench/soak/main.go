//go:build linux

// Command soak runs `tollgate serve` in front of an embedded 3-broker
// cluster (kfake, in this process) under a mixed load for a long time, and
// samples the gateway's resident memory, goroutines and open descriptors
// every few seconds, to show they stay flat:
//
//   - producers at a steady rate, one of them above its client-id's
//     producer_byte_rate (throttled all the time);
//   - a consumer group whose members are replaced one at a time, and a
//     consumer above its consumer_byte_rate;
//   - admin calls every few seconds: create, describe the configs of and
//     delete a topic, describe the broker configs, set, describe and remove
//     a client quota, list and describe the groups;
//   - connection churn: clients that connect, do a few requests and close;
//     bare connections that close without a request; a pool of idle
//     connections (one ApiVersions each) replaced one at a time; SCRAM logins
//     on a SASL_PLAINTEXT listener, every other one with a wrong password,
//     from rotating source addresses.
//
// Goroutines, threads and the heap come from the admin port's /metrics (the
// Go collector), RSS and descriptors from /proc. The samples go to a CSV
// file and an SVG plot; a summary (first, last, min, max and least-squares
// slope per hour after the warm-up) is printed at the end, or at Ctrl-C.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/soak -tollgate /tmp/tollgate -duration 1h -out /tmp/soak
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
)

type options struct {
	bin                   string
	duration, interval    time.Duration
	warmup                time.Duration
	out                   string
	producers             int
	produceRate           int // bytes per second per producer
	recordSize            int
	groupMembers          int
	rejoinEvery           time.Duration
	adminEvery            time.Duration
	churnPerSec           float64
	idleConns             int
	idleRotateEvery       time.Duration
	saslEvery             time.Duration
	throttledProduceRate  int // the throttled producer's quota
	throttledConsumerRate int // the throttled consumer's quota
}

func main() {
	var o options
	flag.StringVar(&o.bin, "tollgate", "", "path to the tollgate binary")
	flag.DurationVar(&o.duration, "duration", time.Hour, "how long the load runs")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "sample interval")
	flag.DurationVar(&o.warmup, "warmup", 5*time.Minute, "samples before this are left out of the slopes (caches, pools and the heap fill up first)")
	flag.StringVar(&o.out, "out", "soak-out", "directory for soak.csv, soak.svg and the gateway's log")
	flag.IntVar(&o.producers, "producers", 2, "producers at -produce-rate each (plus one throttled producer)")
	flag.IntVar(&o.produceRate, "produce-rate", 256<<10, "bytes per second each producer offers")
	flag.IntVar(&o.recordSize, "record", 1024, "record size in bytes")
	flag.IntVar(&o.groupMembers, "group-members", 2, "members of the consumer group")
	flag.DurationVar(&o.rejoinEvery, "rejoin-every", time.Minute, "replace one group member this often (a rebalance each time)")
	flag.DurationVar(&o.adminEvery, "admin-every", 3*time.Second, "one round of admin calls this often")
	flag.Float64Var(&o.churnPerSec, "churn", 4, "short-lived connections per second (half clients doing a few requests, half bare connect-and-close)")
	flag.IntVar(&o.idleConns, "idle", 100, "idle connections held open")
	flag.DurationVar(&o.idleRotateEvery, "idle-rotate", time.Second, "replace the oldest idle connection this often")
	flag.DurationVar(&o.saslEvery, "sasl-every", time.Second, "one SCRAM login this often, alternately good and with a wrong password")
	flag.IntVar(&o.throttledProduceRate, "throttled-produce-quota", 128<<10, "producer_byte_rate of the throttled producer's client-id (it offers -produce-rate)")
	flag.IntVar(&o.throttledConsumerRate, "throttled-consume-quota", 128<<10, "consumer_byte_rate of the throttled consumer's client-id")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "need -tollgate /path/to/tollgate")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// gateway is the running `tollgate serve`.
type gateway struct {
	cmd                *exec.Cmd
	plain, sasl, admin string
	exited             chan struct{}
	waitErr            error
}

func run(o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tgsoak")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// Retention keeps the in-process cluster's memory bounded over an hour
	// of produce: the topic keeps a minute, the cleaner runs every 10 s.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3),
		kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "10000"}))
	if err != nil {
		return err
	}
	defer cluster.Close()

	logFile, err := os.Create(filepath.Join(o.out, "tollgate.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	gw, err := startGateway(o, dir, cluster.ListenAddrs(), logFile)
	if err != nil {
		return err
	}
	defer gw.stop()
	fmt.Fprintf(os.Stderr, "gateway pid %d: PLAINTEXT %s, SASL_PLAINTEXT %s, admin %s; cluster %s\n",
		gw.cmd.Process.Pid, gw.plain, gw.sasl, gw.admin, strings.Join(cluster.ListenAddrs(), ","))

	// Ctrl-C ends the soak early, with its summary.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()

	l := newLoad(o, gw.plain, gw.sasl)
	if err := l.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	var wg sync.WaitGroup
	l.start(ctx, &wg)

	csvFile, err := os.Create(filepath.Join(o.out, "soak.csv"))
	if err != nil {
		return err
	}
	defer csvFile.Close()
	s := newSampler(gw, l, csvFile)
	died := s.loop(sigCtx, o.interval, o.duration)
	cancel()
	fmt.Fprintln(os.Stderr, "stopping the load")
	waitTimeout(&wg, 30*time.Second)

	svg := filepath.Join(o.out, "soak.svg")
	if err := os.WriteFile(svg, plotSVG(s.rows, o.warmup), 0o644); err != nil {
		return err
	}
	summary(os.Stdout, o, s.rows, l)
	fmt.Printf("\nsamples: %s\nplot: %s\ngateway log: %s (%d lines)\n", csvFile.Name(), svg, logFile.Name(), countLines(logFile.Name()))
	if died != nil {
		return died
	}
	return nil
}

func startGateway(o options, dir string, upstream []string, log io.Writer) (*gateway, error) {
	gw := &gateway{plain: benchkit.FreeAddr(), sasl: benchkit.FreeAddr(), admin: benchkit.FreeAddr(), exited: make(chan struct{})}
	cfg := filepath.Join(dir, "tollgate.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
listeners:
  - name: PLAINTEXT
    bootstrap: %s
  - name: SASL_PLAINTEXT
    bootstrap: %s
    security_protocol: SASL_PLAINTEXT
    sasl:
      mechanisms: [SCRAM-SHA-256]
      failed_authentication_delay: 100ms
upstream:
  bootstrap: [%s]
http:
  address: %s
log:
  level: warn
authorization:
  quota_admins: [ANONYMOUS]
quotas:
  - client_id: %s
    producer_byte_rate: %d
  - client_id: %s
    consumer_byte_rate: %d
shutdown_timeout: 5s
`, filepath.Join(dir, "data"), gw.plain, gw.sasl, strings.Join(upstream, ", "), gw.admin,
		throttledProducerID, o.throttledProduceRate, throttledConsumerID, o.throttledConsumerRate)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	gw.cmd = exec.Command(o.bin, "serve", "--config", cfg)
	gw.cmd.Stdout, gw.cmd.Stderr = log, log
	if err := gw.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { gw.waitErr = gw.cmd.Wait(); close(gw.exited) }()
	for _, a := range []string{gw.plain, gw.sasl, gw.admin} {
		if err := benchkit.WaitDial(a); err != nil {
			gw.stop()
			return nil, err
		}
	}
	return gw, nil
}

// stop asks the gateway to shut down and kills it if it has not after 15 s.
func (gw *gateway) stop() {
	select {
	case <-gw.exited:
		return
	default:
	}
	gw.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-gw.exited:
	case <-time.After(15 * time.Second):
		gw.cmd.Process.Kill()
		<-gw.exited
	}
}

// alive returns why the gateway is gone, nil while it runs.
func (gw *gateway) alive() error {
	select {
	case <-gw.exited:
		return fmt.Errorf("the gateway exited during the soak: %v", gw.waitErr)
	default:
		return nil
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		fmt.Fprintln(os.Stderr, "some load goroutines did not stop in", d)
	}
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return strings.Count(string(b), "\n")
}

// isCanceled is an error the end of the soak caused.
func isCanceled(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
