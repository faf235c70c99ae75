//go:build linux

// Command idle measures what an idle client connection costs Tollgate: it
// starts `tollgate serve` (the embedded development cluster in the same
// process), opens N connections from several loopback source addresses,
// each sending one ApiVersions and reading its answer — what a client does
// first — and keeps them open. It reports the gateway's RSS growth per
// connection, the upstream connections it opened, and how long accepting
// took.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/idle -tollgate /tmp/tollgate -conns 100000
//
// It raises its own open-file limit (and so the gateway's) as far as the
// system allows: run it as root for 100 000 connections.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
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

	"github.com/tollgate/tollgate/bench/internal/benchkit"
)

func main() {
	bin := flag.String("tollgate", "", "path to the tollgate binary")
	conns := flag.Int("conns", 100000, "idle connections to open")
	sources := flag.Int("sources", 8, "loopback source addresses (127.0.0.2 on) to spread them over")
	workers := flag.Int("workers", 64, "connections opened concurrently")
	settle := flag.Duration("settle", 30*time.Second, "how long the connections stay idle before the gateway's RSS is read")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "need -tollgate /path/to/tollgate")
		os.Exit(2)
	}
	raiseNoFile(uint64(*conns)*2 + 10000)

	dir, err := os.MkdirTemp("", "tgidle")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	boot, admin := benchkit.FreeAddr(), benchkit.FreeAddr()
	cfg := filepath.Join(dir, "tollgate.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`data_dir: %s
listeners:
  - name: PLAINTEXT
    bootstrap: %s
http:
  address: %s
log:
  level: warn
`, filepath.Join(dir, "data"), boot, admin)), 0o600)
	cmd := exec.Command(*bin, "serve", "--config", cfg)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := benchkit.WaitDial(boot); err != nil {
		fail(err)
	}
	// The listener's first client: its ApiVersions is forwarded (nothing
	// cached yet) and opens one upstream connection.
	first, err := dialHello(boot, "")
	if err != nil {
		fail(err)
	}
	defer first.Close()
	time.Sleep(2 * time.Second) // let the gateway settle
	runtime.GC()
	rss0 := rssKiB(cmd.Process.Pid)
	up0 := scrape(admin, `tollgate_upstream_connections_opened_total{listener="PLAINTEXT"}`)

	held := make([]net.Conn, *conns)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *conns {
					return
				}
				src := "127.0.0." + strconv.Itoa(2+i%*sources)
				c, err := dialHello(boot, src)
				if err != nil {
					if failed.Add(1) <= 5 {
						fmt.Fprintf(os.Stderr, "connection %d: %v\n", i, err)
					}
					continue
				}
				held[i] = c
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	time.Sleep(*settle) // idle: the gateway's GC and scavenger return what the handshakes used
	rss1 := rssKiB(cmd.Process.Pid)
	up1 := scrape(admin, `tollgate_upstream_connections_opened_total{listener="PLAINTEXT"}`)
	open := *conns - int(failed.Load())
	fmt.Printf("idle connections: %d open (%d failed) from %d source addresses, each after one ApiVersions\n", open, failed.Load(), *sources)
	fmt.Printf("accept: %v in all, %.0f connections/s (dial + ApiVersions round trip, %d at a time)\n", took.Round(time.Millisecond), float64(open)/took.Seconds(), *workers)
	fmt.Printf("gateway RSS: %d KiB before, %d KiB after: %.2f KiB per idle connection\n", rss0, rss1, float64(rss1-rss0)/float64(open))
	fmt.Printf("upstream connections opened by the idle clients: %.0f\n", up1-up0)
	for _, c := range held {
		if c != nil {
			c.Close()
		}
	}
}

// dialHello connects from src (any address when "") and does one
// ApiVersions v3 round trip, as a client's first request.
func dialHello(addr, src string) (net.Conn, error) {
	return benchkit.DialHello(addr, src, "tollgate-bench-idle", "idle", 30*time.Second)
}

func rssKiB(pid int) int64 {
	n, _ := benchkit.RSSKiB(pid)
	return n
}

// scrape reads one sample from the admin port's /metrics.
func scrape(admin, sample string) float64 {
	c, err := net.Dial("tcp", admin)
	if err != nil {
		return -1
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
	b, _ := io.ReadAll(c)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// raiseNoFile lifts the open-file limit (the child inherits it).
func raiseNoFile(n uint64) {
	var l syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	if l.Max < n {
		l.Max = n // needs CAP_SYS_RESOURCE
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	fmt.Fprintf(os.Stderr, "open-file limit: %d\n", l.Cur)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
