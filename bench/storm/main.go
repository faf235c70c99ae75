//go:build linux

// Command storm measures connection admission under a connection storm on
// loopback: many goroutines open connections from 127.0.0.2 as fast as they
// can (bounded in time) against a per-IP connection_creation_rate, while an
// established producer on 127.0.0.1 keeps producing. It reports the storm's
// attempt rate, how many connections per second were actually served (each
// connection sends an ApiVersions request; a parked connection is never
// answered), the producer's produce latency before and during the storm,
// and the gateway's CPU during the storm (Tollgate runs as its own process).
//
// It runs -rounds rounds of baseline then storm (12 s apart, so the per-IP
// sensor starts fresh each time) and reports each round and the p99s over
// all rounds' samples: on a shared two-core machine a single baseline's
// p99 moves by 2× between runs.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/storm -tollgate /tmp/tollgate -rate 50 -storm 23s -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
)

func main() {
	bin := flag.String("tollgate", "", "path to the tollgate binary")
	worker := flag.String("storm-worker", "", "internal: run the storm against this address and print the counts")
	rate := flag.Int("rate", 50, "connection_creation_rate of the default ip entity")
	stormFor := flag.Duration("storm", 20*time.Second, "storm duration")
	workers := flag.Int("workers", 256, "storm goroutines")
	target := flag.Int("attempts", 20000, "target connection attempts per second")
	rounds := flag.Int("rounds", 3, "rounds of baseline then storm; the p99s are over all rounds' samples")
	flag.BoolVar(&send, "send", true, "each storm connection writes an ApiVersions request before it closes (false: connect and close)")
	flag.IntVar(&stormCPU, "storm-cpu", runtime.NumCPU()-1, "pin the storm process to this CPU (taskset); -1: not pinned")
	control := flag.Bool("control", false, "control run: aim the storm at a minimal accept-hold-close server in a process of its own instead of the gateway")
	acceptorProc := flag.Bool("acceptor-process", true, "the gateway's socket.acceptor_process")
	controlPrio := flag.String("control-prio", "normal", "control run: the server's CPU priority: normal, nice19 or idle (SCHED_IDLE)")
	holdServer := flag.String("hold-server", "", "internal: run the control's accept-hold-close server on this address")
	stormAt := flag.String("storm-at", "", "control run: aim the storm at this address (e.g. a bare accept-and-close server) instead of the gateway")
	flag.Parse()
	if *worker != "" {
		bootAddr = *worker
		runStorm(*stormFor, *workers, *target)
		return
	}
	if *holdServer != "" {
		runHoldServer(*holdServer)
		return
	}
	serverPid := 0 // whose CPU is reported: the gateway's, or the control's server
	serverName := "gateway"
	if *control {
		addr := benchkit.FreeAddr()
		self, _ := os.Executable()
		hs := exec.Command(self, "-hold-server", addr)
		switch *controlPrio {
		case "idle":
			hs = exec.Command("chrt", "--idle", "0", self, "-hold-server", addr)
		case "nice19":
			hs = exec.Command("nice", "-n", "19", self, "-hold-server", addr)
		case "normal":
		default:
			fmt.Fprintln(os.Stderr, "-control-prio: normal, nice19 or idle")
			os.Exit(2)
		}
		if err := hs.Start(); err != nil {
			panic(err)
		}
		defer func() { hs.Process.Kill(); hs.Wait() }()
		waitDial(addr)
		*stormAt = addr
		serverPid = hs.Process.Pid
		serverName = "control server"
	}
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "need -tollgate")
		os.Exit(2)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.AllowAutoTopicCreation())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	dir, _ := os.MkdirTemp("", "tgstorm")
	defer os.RemoveAll(dir)
	httpAddr := benchkit.FreeAddr()
	boot := benchkit.FreeAddr()
	cfg := filepath.Join(dir, "tollgate.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`data_dir: %s
listeners:
  - name: PLAINTEXT
    bootstrap: %s
upstream:
  bootstrap: [%s]
http:
  address: %s
log:
  level: error
socket:
  acceptor_process: %t
quotas:
  - default_ip: true
    connection_creation_rate: %d
`, filepath.Join(dir, "data"), boot, strings.Join(c.ListenAddrs(), ", "), httpAddr, *acceptorProc, *rate)), 0o600)
	proc := exec.Command(*bin, "serve", "--config", cfg)
	proc.Stdout, proc.Stderr = io.Discard, os.Stderr
	if err := proc.Start(); err != nil {
		panic(err)
	}
	defer func() { proc.Process.Kill(); proc.Wait() }()
	waitDial(boot)

	ctx := context.Background()
	prod, err := kgo.NewClient(kgo.SeedBrokers(boot), kgo.DefaultProduceTopic("steady"), kgo.AllowAutoTopicCreation(),
		kgo.WithHooks(connHook{}))
	if err != nil {
		panic(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		panic(err)
	}
	latency := func(d time.Duration) []time.Duration {
		var out []time.Duration
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			t0 := time.Now()
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 1024)}).FirstErr(); err != nil {
				panic(err)
			}
			out = append(out, time.Since(t0))
			if el := time.Since(t0); el > debugSlow && os.Getenv("STORM_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, "%.3f slow produce: %v\n", time.Since(benchStart).Seconds(), el)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return out
	}
	var base, during []time.Duration
	var cpu time.Duration
	var attemptRates []float64
	var perSec []float64
	for r := 0; r < *rounds; r++ {
		if r > 0 {
			// Let the per-IP sensor forget the last storm (N·W), so
			// every round starts as the first.
			time.Sleep(12 * time.Second)
		}
		// The baseline is as long as the storm's measurement, so both
		// p99s rest on as many samples.
		b := latency(*stormFor - time.Second)
		pid := proc.Process.Pid
		if serverPid != 0 {
			pid = serverPid
		}
		d, c, rate, ps := storm(boot, httpAddr, pid, *stormAt, *stormFor, *workers, *target, latency)
		fmt.Printf("round %d: producer p99 before %v, during %v (%.2f×); %.0f attempts/s; %s %.2f cores\n",
			r+1, pct(b, .99), pct(d, .99), float64(pct(d, .99))/float64(pct(b, .99)), rate, serverName, c.Seconds()/(*stormFor-time.Second).Seconds())
		base, during = append(base, b...), append(during, d...)
		cpu += c
		attemptRates = append(attemptRates, rate)
		perSec = append(perSec, ps...)
	}
	fmt.Printf("\nstorm: %d workers from 127.0.0.2 for %v, %d rounds; default ip connection_creation_rate=%d (quota.window.num=11, 1 s)\n\n", *workers, *stormFor, *rounds, *rate)
	var total float64
	var ps []string
	for _, v := range perSec {
		total += v
		ps = append(ps, strconv.FormatFloat(v, 'f', 0, 64))
	}
	var meanRate float64
	for _, v := range attemptRates {
		meanRate += v / float64(len(attemptRates))
	}
	// The gateway counts every address's connections; the new client's
	// (2/s from 127.0.0.1) are taken out of the storm's.
	probes := 0
	for _, d := range newClient {
		if d >= 0 {
			probes++
		}
	}
	storm := total - float64(probes)
	fmt.Printf("| attempts/s | admitted from 127.0.0.2 | mean/s | admitted per second, all addresses (the new client adds 2) |\n|---|---|---|---|\n")
	fmt.Printf("| %.0f | %.0f | %.1f | %s |\n\n", meanRate, storm, storm/float64(len(perSec)), strings.Join(ps, " "))
	fmt.Printf("| established producer, all rounds | samples | p50 | p99 | max |\n|---|---|---|---|---|\n")
	fmt.Printf("| before the storm | %d | %v | %v | %v |\n", len(base), pct(base, .5), pct(base, .99), pct(base, 1))
	fmt.Printf("| during the storm | %d | %v | %v | %v |\n\n", len(during), pct(during, .5), pct(during, .99), pct(during, 1))
	fmt.Printf("p99 during ÷ before, all rounds: %.2f×\n", float64(pct(during, .99))/float64(pct(base, .99)))
	var notServed int
	var servedIn []time.Duration
	for _, d := range newClient {
		if d < 0 {
			notServed++
		} else {
			servedIn = append(servedIn, d)
		}
	}
	if len(servedIn) > 0 {
		fmt.Printf("a new client from 127.0.0.1 during the storm (%d tries): served in p50 %v, p99 %v, max %v; not served within 10 s: %d\n",
			len(newClient), pct(servedIn, .5), pct(servedIn, .99), pct(servedIn, 1), notServed)
	}
	span := float64(*rounds) * (*stormFor - time.Second).Seconds()
	fmt.Printf("%s CPU during the storm: %.2f cores", serverName, cpu.Seconds()/span)
	if helperCPU > 0 {
		fmt.Printf(" (of which the acceptor helper %.2f)", helperCPU.Seconds()/span)
	}
	fmt.Println()
}

// storm runs one storm process against the gateway (or stormAt) while the
// producer measures latency, and returns the latencies, the gateway's CPU
// time, the attempt rate and the gateway's admitted connections per second.
func storm(boot, httpAddr string, pid int, stormAt string, stormFor time.Duration, workers, target int,
	latency func(time.Duration) []time.Duration) ([]time.Duration, time.Duration, float64, []float64) {
	// The storm, from 127.0.0.2, in a process of its own so that its
	// goroutines do not share a scheduler with the producer.
	self, _ := os.Executable()
	// On a real deployment the storm comes from other machines; here it
	// shares two cores with the gateway, the cluster and the producer, so
	// it runs on one core (-storm-cpu, the last by default) as SCHED_IDLE:
	// it takes only CPU time nothing else wants, and its own work (which
	// with connect, bind and the client side of every handshake is more
	// than the gateway's) does not show up as the gateway's cost.
	stormTarget := boot
	if stormAt != "" {
		stormTarget = stormAt
	}
	args := []string{"chrt", "--idle", "0", self, "-storm-worker", stormTarget, "-storm", stormFor.String(),
		"-workers", strconv.Itoa(workers), "-attempts", strconv.Itoa(target), "-send=" + strconv.FormatBool(send)}
	if stormCPU >= 0 {
		args = append([]string{"taskset", "-c", strconv.Itoa(stormCPU)}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	if os.Getenv("STORM_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "%.3f storm starts\n", time.Since(benchStart).Seconds())
	}
	// The gateway's own count of admitted connections, each second.
	var perSec []float64
	scrapeDone := make(chan struct{})
	go func() {
		defer close(scrapeDone)
		last := accepted(httpAddr)
		for i := 0; i < int(stormFor.Seconds()); i++ {
			time.Sleep(time.Second)
			v := accepted(httpAddr)
			perSec = append(perSec, v-last)
			last = v
		}
	}()
	// The gateway's CPU includes its acceptor helper's (a child process).
	children := benchkit.ChildPIDs(pid)
	treeCPU := func() (own, kids time.Duration) {
		for _, c := range children {
			kids += benchkit.ProcCPU(c)
		}
		return benchkit.ProcCPU(pid), kids
	}
	own0, kids0 := treeCPU()
	// Meanwhile a new client from another address (127.0.0.1) connects
	// twice a second: how long until it is served (connect and an
	// ApiVersions answered) through the storm?
	newConnDone := make(chan struct{})
	go func() {
		defer close(newConnDone)
		end := time.Now().Add(stormFor - time.Second)
		for time.Now().Before(end) {
			newClient = append(newClient, timeToServe(stormTarget))
			time.Sleep(500 * time.Millisecond)
		}
	}()
	during := latency(stormFor - time.Second)
	<-newConnDone
	own1, kids1 := treeCPU()
	cpu := own1 - own0 + kids1 - kids0
	if len(children) > 0 {
		helperCPU += kids1 - kids0
	}
	res, _ := io.ReadAll(outPipe)
	cmd.Wait()
	<-scrapeDone
	var attemptsPerSec float64
	fmt.Sscan(string(res), &attemptsPerSec)
	return during, cpu, attemptsPerSec, perSec
}

// runStorm is the storm process: connections opened as fast as the
// workers can, each written one ApiVersions request and closed at once
// (whether it was admitted is counted by the gateway). It prints the
// attempt rate.
func runStorm(stormFor time.Duration, workers, target int) {
	var attempts atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), stormFor)
	defer cancel()
	start := time.Now()
	interval := time.Duration(float64(time.Second) * float64(workers) / float64(target))
	var wg sync.WaitGroup
	// From 127.0.0.2, with IP_BIND_ADDRESS_NO_PORT as load generators
	// bind a source address: the port is then chosen at connect, for the
	// whole four-tuple, instead of by bind's search for a port free on
	// that address alone, which at thousands of sockets a second in
	// TIME_WAIT costs the storm's machine — here, the gateway's — more
	// CPU than the gateway spends on the storm.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second,
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
	var f kmsg.RequestFormatter
	req := f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now()
			for ctx.Err() == nil {
				next = next.Add(interval)
				attempts.Add(1)
				if c, err := d.Dial("tcp", bootAddr); err == nil {
					if send {
						c.Write(req)
					}
					c.Close()
				}
				if s := time.Until(next); s > 0 {
					time.Sleep(s)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%.0f\n", float64(attempts.Load())/time.Since(start).Seconds())
}

// runHoldServer is the control run's server: it accepts every connection,
// holds it about a second without reading, and closes it — the least a Go
// server can do per parked socket, in a process of its own.
func runHoldServer(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic(err)
	}
	type held struct {
		c  net.Conn
		at time.Time
	}
	var mu sync.Mutex
	var q []held
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			now := time.Now()
			mu.Lock()
			i := 0
			for i < len(q) && q[i].at.Before(now) {
				q[i].c.Close()
				i++
			}
			q = q[i:]
			mu.Unlock()
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		mu.Lock()
		q = append(q, held{c, time.Now().Add(time.Second)})
		mu.Unlock()
	}
}

// accepted scrapes the gateway's tollgate_connections_accepted_total.
func accepted(httpAddr string) float64 {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "tollgate_connections_accepted_total{") {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			return v
		}
	}
	return 0
}

var bootAddr string

var send bool

var stormCPU int

// helperCPU sums the acceptor helper's share of the gateway CPU reported.
var helperCPU time.Duration

// newClient collects the time a new client from 127.0.0.1 took to be
// served during the storms (-1: not served within 10 s).
var newClient []time.Duration

// timeToServe connects to addr from 127.0.0.1, sends ApiVersions and
// returns how long until the answer came.
func timeToServe(addr string) time.Duration {
	t0 := time.Now()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return -1
	}
	defer c.Close()
	var f kmsg.RequestFormatter
	c.Write(f.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
	c.SetReadDeadline(t0.Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return -1
	}
	return time.Since(t0)
}

// debugSlow is the produce latency STORM_DEBUG reports (STORM_DEBUG=3ms;
// any other value means 5ms).
var debugSlow = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("STORM_DEBUG")); err == nil {
		return d
	}
	return 5 * time.Millisecond
}()

var benchStart = time.Now()

// pct is a percentile rounded for the tables.
func pct(ds []time.Duration, p float64) time.Duration {
	return benchkit.Pct(ds, p).Round(10 * time.Microsecond)
}

// waitDial waits for a server the bench started; it must come up.
func waitDial(addr string) {
	if err := benchkit.WaitDial(addr); err != nil {
		panic(err)
	}
}

type connHook struct{}

func (connHook) OnBrokerConnect(m kgo.BrokerMetadata, d time.Duration, _ net.Conn, err error) {
	if os.Getenv("STORM_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "%s producer connect to node %d took %v err=%v\n", time.Now().Format("05.000"), m.NodeID, d, err)
	}
}
