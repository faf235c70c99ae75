// Command passthrough measures what the gateway costs on the data path:
// produce then consume a fixed volume of records three ways, in
// alternating runs after a warm-up: directly to the embedded cluster,
// through a bare TCP forwarder (the physical limit of any proxy), and
// through Tollgate. The forwarder and Tollgate run as separate processes so
// their CPU time can be read from /proc.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/passthrough -tollgate /tmp/tollgate -mib 200 -runs 5
//
// With -kafka VERSION the upstream is a real Apache Kafka instead: the test
// kit's 3-node KRaft cluster (internal/testkit/kafka), started once and
// shared by every run, each run on a topic of its own (replication factor
// 3, min.insync.replicas 2). The bare forwarder cannot front it (a real
// broker advertises its own addresses), so the ways are direct and
// Tollgate.
//
//	go run ./bench/passthrough -tollgate /tmp/tollgate -kafka 4.4.0 -mib 100 -runs 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/bench/internal/benchkit"
	"github.com/tollgate/tollgate/internal/testkit/kafka"
)

func main() {
	forward := flag.String("forward", "", "internal: run as a bare TCP forwarder, listen=target,...")
	tollgate := flag.String("tollgate", "", "path to the tollgate binary")
	mib := flag.Int("mib", 200, "MiB to produce and then consume per run")
	recSize := flag.Int("record", 16<<10, "record size in bytes")
	runs := flag.Int("runs", 5, "measured runs of each way (after one warm-up each)")
	latN := flag.Int("latency-requests", 2000, "sequential small produce requests for the latency probe")
	withQuotas := flag.Bool("quotas", false, "also run Tollgate with producer and consumer quotas far above the traffic (quotas on, never reached), interleaved with the other ways")
	baseline := flag.String("baseline", "", "also run this other tollgate binary (an earlier build), interleaved with the other ways, as the way \"baseline\"")
	kafkaVersion := flag.String("kafka", "", "run against a real Apache Kafka cluster of this version (internal/testkit/kafka) instead of the embedded one")
	flag.Parse()
	if *forward != "" {
		runForwarder(*forward)
		return
	}
	if *tollgate == "" {
		fmt.Fprintln(os.Stderr, "need -tollgate /path/to/tollgate")
		os.Exit(2)
	}
	ways := []string{"direct", "forwarder", "tollgate"}
	if *kafkaVersion != "" {
		c, err := kafka.Start(kafka.Config{Version: *kafkaVersion})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer c.Stop()
		realKafka = c
		fmt.Fprintf(os.Stderr, "Apache Kafka %s: 3 nodes serving after %v\n", c.Version, c.Started.Round(time.Millisecond))
		ways = []string{"direct", "tollgate"}
	}
	if *withQuotas {
		ways = append(ways, "tollgate+quotas")
	}
	if *baseline != "" {
		ways = append(ways, "baseline")
	}
	binFor := func(way string) string {
		if way == "baseline" {
			return *baseline
		}
		return *tollgate
	}
	res := map[string][]result{}
	for run := 0; run <= *runs; run++ {
		for _, w := range ways {
			r, err := once(w, binFor(w), *mib, *recSize, 0)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s run %d: %v\n", w, run, err)
				os.Exit(1)
			}
			if run == 0 {
				fmt.Fprintf(os.Stderr, "warm-up %-9s produce %.1f MB/s consume %.1f MB/s\n", w, r.prodMBs, r.consMBs)
				continue
			}
			fmt.Fprintf(os.Stderr, "run %d %-9s produce %.1f MB/s consume %.1f MB/s cpu %.3f ms/MiB requests/MiB produce %.2f fetch %.2f\n", run, w, r.prodMBs, r.consMBs, r.cpuMsPerMiB, r.prodReqPerMiB, r.fetchReqPerMiB)
			res[w] = append(res[w], r)
		}
	}
	lat := map[string][]time.Duration{}
	for _, w := range ways {
		r, err := once(w, binFor(w), 0, 0, *latN)
		if err != nil {
			fmt.Fprintf(os.Stderr, "latency %s: %v\n", w, err)
			os.Exit(1)
		}
		lat[w] = r.lat
	}
	report(ways, res, lat, *mib, *recSize, *runs, *latN)
}

type result struct {
	prodMBs, consMBs float64
	cpuMsPerMiB      float64
	lat              []time.Duration
	// produce and fetch requests per MiB moved (what a quota policy's
	// per-request work is multiplied by)
	prodReqPerMiB, fetchReqPerMiB float64
}

// reqCount counts the produce and fetch requests a client writes.
type reqCount struct{ prod, fetch *atomic.Int64 }

func (h reqCount) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case 0:
		h.prod.Add(1)
	case 1:
		h.fetch.Add(1)
	}
}

// realKafka is the real cluster every run shares (-kafka), or nil.
var realKafka *kafka.Cluster

// runs numbers the runs, for a topic of each run's own on a real cluster.
var runs atomic.Int64

// once starts a fresh cluster (and proxy) and measures one way.
func once(way, bin string, mib, recSize, latN int) (result, error) {
	var r result
	var real []net.Listener
	var fwdAddrs, brokers []string
	if realKafka != nil {
		brokers = realKafka.Bootstrap(kafka.Plaintext)
	} else {
		c, rl, fa, err := benchkit.Cluster(way == "forwarder")
		if err != nil {
			return r, err
		}
		defer c.Close()
		brokers, real, fwdAddrs = c.ListenAddrs(), rl, fa
	}
	bootstrap := brokers[0]
	var proc *exec.Cmd
	switch way {
	case "forwarder":
		var pairs []string
		for i, ln := range real {
			pairs = append(pairs, fwdAddrs[i]+"="+ln.Addr().String())
		}
		self, _ := os.Executable()
		proc = exec.Command(self, "-forward", strings.Join(pairs, ","))
		bootstrap = fwdAddrs[0]
	case "tollgate", "tollgate+quotas", "baseline":
		dir, _ := os.MkdirTemp("", "tgbench")
		defer os.RemoveAll(dir)
		cfg := filepath.Join(dir, "tollgate.yaml")
		bootstrap = benchkit.FreeAddr()
		os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir: %s\nlisteners:\n  - name: PLAINTEXT\n    bootstrap: %s\nupstream:\n  bootstrap: [%s]\nhttp:\n  address: \"\"\nlog:\n  level: warn\n",
			filepath.Join(dir, "data"), bootstrap, strings.Join(brokers, ", "))+quotaBlock(way)), 0o600)
		proc = exec.Command(bin, "serve", "--config", cfg)
	}
	if proc != nil {
		proc.Stdout, proc.Stderr = io.Discard, os.Stderr
		if err := proc.Start(); err != nil {
			return r, err
		}
		defer func() { proc.Process.Kill(); proc.Wait() }()
		if err := benchkit.WaitDial(bootstrap); err != nil {
			return r, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topic := "bench"
	if realKafka != nil {
		topic = fmt.Sprintf("bench-%d", runs.Add(1))
	}
	var prodReqs, fetchReqs atomic.Int64
	counts := kgo.WithHooks(reqCount{&prodReqs, &fetchReqs})
	cl, err := kgo.NewClient(counts, kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	if err != nil {
		return r, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		return r, err
	}
	if latN > 0 {
		for i := 0; i < latN; i++ {
			t0 := time.Now()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("ping")}).FirstErr(); err != nil {
				return r, err
			}
			r.lat = append(r.lat, time.Since(t0))
		}
		return r, nil
	}
	n := mib << 20 / recSize
	val := make([]byte, recSize)
	prodReqs.Store(0)
	cpu0 := procCPU(proc)
	t0 := time.Now()
	if err := benchkit.ProduceN(ctx, cl, n, val); err != nil {
		return r, err
	}
	prod := time.Since(t0)
	cons, err := kgo.NewClient(counts, kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(50<<20))
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
	mb := float64(n*recSize) / 1e6
	r.prodMBs, r.consMBs = mb/prod.Seconds(), mb/consume.Seconds()
	r.cpuMsPerMiB = float64(cpu.Milliseconds()) / float64(2*n*recSize>>20)
	r.prodReqPerMiB = float64(prodReqs.Load()) / float64(n*recSize>>20)
	r.fetchReqPerMiB = float64(fetchReqs.Load()) / float64(n*recSize>>20)
	return r, nil
}

// procCPU is a child process's CPU time, 0 before it started.
func procCPU(p *exec.Cmd) time.Duration {
	if p == nil || p.Process == nil {
		return 0
	}
	return benchkit.ProcCPU(p.Process.Pid)
}

func runForwarder(spec string) {
	for _, pair := range strings.Split(spec, ",") {
		from, to, _ := strings.Cut(pair, "=")
		ln, err := net.Listen("tcp", from)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
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

func quotaBlock(way string) string {
	if way == "tollgate+quotas" {
		return unreachedQuotas
	}
	return ""
}

// unreachedQuotas makes every client-id's bucket live (recorded on every
// request) with a quota no run can reach.
const unreachedQuotas = "quotas:\n  - default_client_id: true\n    producer_byte_rate: 10000000000\n    consumer_byte_rate: 10000000000\n"

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(ways []string, res map[string][]result, lat map[string][]time.Duration, mib, rec, runs, latN int) {
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
	fmt.Printf("%d MiB of %d B records, acks=all, no compression; median of %d alternating runs after a warm-up\n\n", mib, rec, runs)
	fmt.Printf("| way | produce MB/s | consume MB/s | produce ÷ direct | consume ÷ direct | proxy CPU ms/MiB |\n|---|---|---|---|---|---|\n")
	dp, dc := get("direct", prod), get("direct", cons)
	for _, w := range ways {
		fmt.Printf("| %s | %.1f | %.1f | %.2f | %.2f | %.2f |\n", w, get(w, prod), get(w, cons), get(w, prod)/dp, get(w, cons)/dc, get(w, cpu))
	}
	if len(res["forwarder"]) > 0 {
		fp, fc := get("forwarder", prod), get("forwarder", cons)
		fmt.Printf("\ntollgate ÷ forwarder: produce %.3f, consume %.3f; CPU per MiB %.2f×\n",
			get("tollgate", prod)/fp, get("tollgate", cons)/fc, get("tollgate", cpu)/get("forwarder", cpu))
	}
	fmt.Printf("\nrequests per MiB moved through tollgate: produce %.2f, fetch %.2f\n",
		get("tollgate", func(r result) float64 { return r.prodReqPerMiB }), get("tollgate", func(r result) float64 { return r.fetchReqPerMiB }))
	if len(res["tollgate+quotas"]) > 0 {
		fmt.Printf("\ntollgate+quotas ÷ tollgate: produce %.3f, consume %.3f; CPU per MiB %.3f×\n",
			get("tollgate+quotas", prod)/get("tollgate", prod), get("tollgate+quotas", cons)/get("tollgate", cons),
			get("tollgate+quotas", cpu)/get("tollgate", cpu))
	}
	fmt.Printf("\nlatency of %d sequential 1-record produce requests (acks=all):\n\n| way | p50 | p99 | added p50 | added p99 |\n|---|---|---|---|---|\n", latN)
	d50, d99 := benchkit.Pct(lat["direct"], .5), benchkit.Pct(lat["direct"], .99)
	for _, w := range ways {
		p50, p99 := benchkit.Pct(lat[w], .5), benchkit.Pct(lat[w], .99)
		fmt.Printf("| %s | %v | %v | %v | %v |\n", w, p50.Round(time.Microsecond), p99.Round(time.Microsecond), (p50 - d50).Round(time.Microsecond), (p99 - d99).Round(time.Microsecond))
	}
}
