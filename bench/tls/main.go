// Command tls measures what Tollgate costs on a TLS listener: produce then
// consume a fixed volume of records, in alternating runs after a warm-up,
// directly to the embedded cluster (no TLS, for scale), through a bare
// TLS-terminating forwarder (Go's crypto/tls towards the client, plain TCP
// to the broker, io.Copy between them: the least any TLS-terminating proxy
// written in Go can cost) and through Tollgate on an SSL listener with a
// plain upstream — the same work as the forwarder's. The forwarder and
// Tollgate run as separate processes so their CPU time can be read from
// /proc. Certificates come from a throwaway test CA.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/tls -tollgate /tmp/tollgate -mib 200 -runs 5
//
// With -plain it also runs the plain TCP forwarder and Tollgate on a
// PLAINTEXT listener (bench/passthrough's ways), to show what TLS adds to
// each.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
)

// The ways, by name.
const (
	direct       = "direct"
	tlsForwarder = "tls-forwarder"
	tollgateSSL  = "tollgate-ssl"
	plainFwd     = "forwarder"
	tollgatePln  = "tollgate"
)

func main() {
	forward := flag.String("forward", "", "internal: run as a bare forwarder, listen=target,...")
	certFile := flag.String("cert", "", "internal: with -forward, terminate TLS with this certificate")
	keyFile := flag.String("key", "", "internal: with -forward, and this key")
	bin := flag.String("tollgate", "", "path to the tollgate binary")
	mib := flag.Int("mib", 200, "MiB to produce and then consume per run")
	recSize := flag.Int("record", 16<<10, "record size in bytes")
	runs := flag.Int("runs", 5, "measured runs of each way (after one warm-up each)")
	waysFlag := flag.String("ways", direct+","+tlsForwarder+","+tollgateSSL, "the ways to run, in this order (also "+plainFwd+" and "+tollgatePln+")")
	plain := flag.Bool("plain", false, "also run the plain TCP forwarder and Tollgate on a PLAINTEXT listener")
	tlsMin := flag.String("tls-min", "TLS1.2", "the TLS listener's and the forwarder's lowest version (TLS1.2 or TLS1.3); clients offer both")
	clientMax := flag.String("client-tls-max", "TLS1.3", "the clients' highest TLS version: TLS1.2 makes every way negotiate TLS 1.2")
	flag.Parse()
	if *forward != "" {
		if err := runForwarder(*forward, *certFile, *keyFile, *tlsMin == "TLS1.3"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "need -tollgate /path/to/tollgate")
		os.Exit(2)
	}
	ways := strings.Split(*waysFlag, ",")
	for _, w := range ways {
		if !slices.Contains([]string{direct, tlsForwarder, tollgateSSL, plainFwd, tollgatePln}, w) {
			fail(fmt.Errorf("-ways: unknown way %q", w))
		}
	}
	if *plain {
		ways = append(ways, plainFwd, tollgatePln)
	}
	b := bench{bin: *bin, tlsMin: *tlsMin, mib: *mib, rec: *recSize}
	if err := b.run(ways, *runs, *clientMax == "TLS1.2"); err != nil {
		fail(err)
	}
}

// run measures every way runs times, alternating, after a warm-up run of
// each, and prints the report.
func (b bench) run(ways []string, runs int, tls12 bool) error {
	dir, err := os.MkdirTemp("", "tgtls")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, srv, err := benchkit.PKI(dir)
	if err != nil {
		return err
	}
	b.dir, b.cert, b.key, b.client = dir, srv.CertFile, srv.KeyFile, ca.ClientConfig()
	if tls12 {
		b.client.MaxVersion = tls.VersionTLS12
	}
	res := map[string][]result{}
	for run := 0; run <= runs; run++ {
		for _, w := range ways {
			r, err := b.once(w)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", w, run, err)
			}
			if run == 0 {
				fmt.Fprintf(os.Stderr, "warm-up %-13s produce %.1f MB/s consume %.1f MB/s (%s)\n", w, r.prodMBs, r.consMBs, r.version)
				continue
			}
			fmt.Fprintf(os.Stderr, "run %d %-13s produce %.1f MB/s consume %.1f MB/s cpu %.3f ms/MiB (%s)\n", run, w, r.prodMBs, r.consMBs, r.cpuMsPerMiB, r.version)
			res[w] = append(res[w], r)
		}
	}
	report(ways, res, b.mib, b.rec, runs)
	return nil
}

type bench struct {
	bin, dir, cert, key string
	client              *tls.Config
	tlsMin              string
	mib, rec            int
}

type result struct {
	prodMBs, consMBs float64
	cpuMsPerMiB      float64
	version          string // what the client negotiated
}

func isTLS(way string) bool { return way == tlsForwarder || way == tollgateSSL }

// once starts a fresh cluster (and proxy) and measures one way.
func (b bench) once(way string) (result, error) {
	var r result
	c, real, fwdAddrs, err := benchkit.Cluster(way == tlsForwarder || way == plainFwd)
	if err != nil {
		return r, err
	}
	defer c.Close()
	bootstrap := c.ListenAddrs()[0]
	var proc *exec.Cmd
	switch way {
	case tlsForwarder, plainFwd:
		var pairs []string
		for i, ln := range real {
			pairs = append(pairs, fwdAddrs[i]+"="+ln.Addr().String())
		}
		self, err := os.Executable()
		if err != nil {
			return r, err
		}
		args := []string{"-forward", strings.Join(pairs, ",")}
		if way == tlsForwarder {
			args = append(args, "-cert", b.cert, "-key", b.key)
			if b.tlsMin == "TLS1.3" {
				args = append(args, "-tls-min", "TLS1.3")
			}
		}
		proc = exec.Command(self, args...)
		bootstrap = fwdAddrs[0]
	case tollgateSSL, tollgatePln:
		cfg := filepath.Join(b.dir, "tollgate.yaml")
		bootstrap = benchkit.FreeAddr()
		listener := fmt.Sprintf("  - name: PLAINTEXT\n    bootstrap: %s\n", bootstrap)
		if way == tollgateSSL {
			listener = fmt.Sprintf("  - name: SSL\n    bootstrap: %s\n    security_protocol: SSL\n    tls:\n      cert_file: %s\n      key_file: %s\n      min_version: %s\n",
				bootstrap, b.cert, b.key, b.tlsMin)
		}
		data := filepath.Join(b.dir, "data")
		os.RemoveAll(data)
		yaml := fmt.Sprintf("data_dir: %s\nlisteners:\n%supstream:\n  bootstrap: [%s]\nhttp:\n  address: \"\"\nlog:\n  level: warn\n",
			data, listener, strings.Join(c.ListenAddrs(), ", "))
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return r, err
		}
		proc = exec.Command(b.bin, "serve", "--config", cfg)
	}
	if proc != nil {
		proc.Stdout, proc.Stderr = io.Discard, os.Stderr
		if err := proc.Start(); err != nil {
			return r, err
		}
		defer func() { proc.Process.Kill(); proc.Wait() }()
		if err := waitReady(bootstrap, isTLS(way), b.client); err != nil {
			return r, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	copts := []kgo.Opt{kgo.SeedBrokers(bootstrap)}
	r.version = "plain"
	if isTLS(way) {
		// A dialer that notes the version the handshake chose.
		var mu sync.Mutex
		cfg := b.client.Clone()
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			mu.Lock()
			r.version = tls.VersionName(cs.Version) + " " + tls.CipherSuiteName(cs.CipherSuite)
			mu.Unlock()
			return nil
		}
		copts = append(copts, kgo.DialTLSConfig(cfg))
	}
	const topic = "bench"
	cl, err := kgo.NewClient(append(copts, kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		return r, err
	}
	n := b.mib << 20 / b.rec
	val := make([]byte, b.rec)
	cpu0 := procCPU(proc)
	t0 := time.Now()
	if err := benchkit.ProduceN(ctx, cl, n, val); err != nil {
		return r, err
	}
	prod := time.Since(t0)
	cons, err := kgo.NewClient(append(copts, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(50<<20))...)
	if err != nil {
		return r, err
	}
	defer cons.Close()
	t1 := time.Now()
	got := 0
	for got < n+1 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return r, err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return r, errs[0].Err
		}
		got += fs.NumRecords()
	}
	consume := time.Since(t1)
	cpu := procCPU(proc) - cpu0
	mb := float64(n*b.rec) / 1e6
	r.prodMBs, r.consMBs = mb/prod.Seconds(), mb/consume.Seconds()
	r.cpuMsPerMiB = float64(cpu.Milliseconds()) / float64(2*n*b.rec>>20)
	return r, nil
}

// waitReady waits for addr to accept connections, with a TLS handshake on
// a TLS way (a bare connect would be logged as a failed handshake).
func waitReady(addr string, withTLS bool, cfg *tls.Config) error {
	if !withTLS {
		return benchkit.WaitDial(addr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: time.Second}}
		if c, err := d.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not come up", addr)
}

// procCPU is a child process's CPU time and its own children's (Tollgate's
// acceptor helper), 0 before it started.
func procCPU(p *exec.Cmd) time.Duration {
	if p == nil || p.Process == nil {
		return 0
	}
	t := benchkit.ProcCPU(p.Process.Pid)
	for _, kid := range benchkit.ChildPIDs(p.Process.Pid) {
		t += benchkit.ProcCPU(kid)
	}
	return t
}

// runForwarder forwards each listen address to its target: a bare TCP
// forwarder, or with a certificate a TLS-terminating one — crypto/tls
// towards the client, plain TCP to the broker, io.Copy both ways.
func runForwarder(spec, certFile, keyFile string, tls13 bool) error {
	var cfg *tls.Config
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return err
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if tls13 {
			cfg.MinVersion = tls.VersionTLS13
		}
	}
	for _, pair := range strings.Split(spec, ",") {
		from, to, _ := strings.Cut(pair, "=")
		ln, err := net.Listen("tcp", from)
		if err != nil {
			return err
		}
		if cfg != nil {
			ln = tls.NewListener(ln, cfg)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					u, err := net.Dial("tcp", to)
					if err != nil {
						c.Close()
						return
					}
					go func() { io.Copy(u, c); u.Close() }()
					io.Copy(c, u)
					c.Close()
				}()
			}
		}()
	}
	select {}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(ways []string, res map[string][]result, mib, rec, runs int) {
	get := func(w string, f func(result) float64) float64 {
		var xs []float64
		for _, r := range res[w] {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	prod := func(r result) float64 { return r.prodMBs }
	cons := func(r result) float64 { return r.consMBs }
	cpu := func(r result) float64 { return r.cpuMsPerMiB }
	fmt.Printf("%d MiB of %d B records, acks=all, no compression; median of %d alternating runs after a warm-up; %s\n\n",
		mib, rec, runs, res[ways[len(ways)-1]][0].version)
	fmt.Printf("| way | produce MB/s | consume MB/s | proxy CPU ms/MiB |\n|---|---|---|---|\n")
	for _, w := range ways {
		fmt.Printf("| %s | %.1f | %.1f | %.2f |\n", w, get(w, prod), get(w, cons), get(w, cpu))
	}
	ratio := func(a, b string) {
		if len(res[a]) == 0 || len(res[b]) == 0 {
			return
		}
		fmt.Printf("\n%s ÷ %s: produce %.3f, consume %.3f; CPU per MiB %.2f×\n", a, b,
			get(a, prod)/get(b, prod), get(a, cons)/get(b, cons), get(a, cpu)/get(b, cpu))
	}
	ratio(tollgateSSL, tlsForwarder)
	ratio(tollgatePln, plainFwd)
	ratio(tlsForwarder, plainFwd)
	ratio(tollgateSSL, tollgatePln)
	if len(res[tollgateSSL]) == 0 || len(res[tlsForwarder]) == 0 {
		return
	}
	// Per-run ratios, paired by run, to show the spread the medians hide.
	fmt.Printf("\nper run, %s ÷ %s (produce, consume, CPU):", tollgateSSL, tlsForwarder)
	for i := range res[tollgateSSL] {
		t, f := res[tollgateSSL][i], res[tlsForwarder][i]
		fmt.Printf(" (%.2f %.2f %.2f)", t.prodMBs/f.prodMBs, t.consMBs/f.consMBs, t.cpuMsPerMiB/f.cpuMsPerMiB)
	}
	fmt.Println()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
