// Command cluster measures a Tollgate cluster on one machine, with real
// `tollgate serve` processes over loopback: A runs the embedded development
// cluster on fixed (free) ports, B and C front it, and all three share one
// cluster.id (a Tollgate cluster) or none (three gateways that each count
// alone). The runs, chosen with -run:
//
//   - cluster: one quota (producer_byte_rate Q for client-id bench-tenant,
//     set through A's Kafka API) and its client's producers spread unevenly
//     — 1 franz-go via A; 2 franz-go and 2 segmentio/kafka-go via B; 1
//     kafka-go via C — at full speed for -duration. Reported: what the
//     client got acknowledged, in total and per instance, ÷ Q over the
//     steady part (after -skip) and in Q·s over the first 10 s (the start-up
//     burst: Kafka's Q·(N−1)·W = 10 Q·s plus 10 s of Q, about 20 Q·s, for
//     the whole Tollgate cluster — not per instance).
//   - move: the same, and at the midpoint the producer on A stops and one
//     starts on C.
//   - alone: the same producers in front of three instances without
//     cluster.id (the quota set on each): each counts alone, so the client
//     gets about Q per instance carrying traffic.
//   - buckets: the exchange's overhead with -buckets client-ids, each with
//     its own bucket (a default client-id quota), each sending one small
//     Produce request every 1/-bucket-rate s through one instance (client-id
//     k through instance k mod 3) over a few raw connections that cycle the
//     request header's client-id. Run with and without cluster.id: the
//     exchange's bytes per second from /api/v1/cluster and each process's
//     CPU from /proc, over -bucket-measure after -bucket-warmup.
//
// Bytes are counted as the quota counts them: each Produce request's size
// (header and body, after the size prefix) when its response arrives.
// The machine's load average is printed with the results: the numbers are
// only as quiet as the machine.
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/cluster -tollgate /tmp/tollgate -run cluster,move,alone,buckets
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

type options struct {
	bin       string
	runs      []string
	q         float64
	dur, skip time.Duration
	interval  time.Duration

	buckets       int
	bucketRate    float64
	bucketConns   int
	bucketRecord  int
	bucketQ       float64
	bucketWarmup  time.Duration
	bucketMeasure time.Duration
}

var allRuns = []string{"cluster", "move", "alone", "buckets"}

func main() {
	var o options
	runs := flag.String("run", "cluster,alone,buckets", "runs, in this order: any of "+strings.Join(allRuns, ","))
	flag.StringVar(&o.bin, "tollgate", "", "path to the tollgate binary")
	flag.Float64Var(&o.q, "q", 1<<20, "producer_byte_rate Q of the one quota, bytes per second")
	flag.DurationVar(&o.dur, "duration", 60*time.Second, "how long the producers run (cluster, move, alone)")
	flag.DurationVar(&o.skip, "skip", 15*time.Second, "start of the steady part (after the start-up burst)")
	flag.DurationVar(&o.interval, "interval", 0, "cluster.exchange_interval (0: Tollgate's default, 500ms)")
	flag.IntVar(&o.buckets, "buckets", 10000, "client-ids of the buckets run, each with its own bucket")
	flag.Float64Var(&o.bucketRate, "bucket-rate", 2, "requests per second of each client-id (2: one per default exchange interval)")
	flag.IntVar(&o.bucketConns, "bucket-conns", 3, "connections per instance of the buckets run (spread over the partitions' leaders)")
	flag.IntVar(&o.bucketRecord, "bucket-record", 100, "record size of the buckets run, bytes")
	flag.Float64Var(&o.bucketQ, "bucket-q", 1<<20, "the default client-id producer_byte_rate of the buckets run")
	flag.DurationVar(&o.bucketWarmup, "bucket-warmup", 15*time.Second, "buckets run: not measured (every bucket made, the exchange settled)")
	flag.DurationVar(&o.bucketMeasure, "bucket-measure", 30*time.Second, "buckets run: measured")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "need -tollgate /path/to/tollgate")
		os.Exit(2)
	}
	for _, r := range strings.Split(*runs, ",") {
		if !slices.Contains(allRuns, r) {
			fmt.Fprintf(os.Stderr, "-run: unknown run %q (have %s)\n", r, strings.Join(allRuns, ","))
			os.Exit(2)
		}
		o.runs = append(o.runs, r)
	}
	if o.dur < o.skip+5*time.Second || o.dur < 20*time.Second || o.bucketMeasure < time.Second || o.buckets < 3 ||
		o.bucketRate <= 0 || o.bucketConns < 1 || o.q <= 0 || o.bucketQ <= 0 {
		fmt.Fprintln(os.Stderr, "need -duration ≥ 20s and ≥ -skip + 5s, -buckets ≥ 3, -bucket-measure ≥ 1s, positive rates and -bucket-conns ≥ 1")
		os.Exit(2)
	}
	load0 := loadavg()
	var quotaRuns []*quotaRun
	var bucketRuns []*bucketRun
	for _, r := range o.runs {
		switch r {
		case "cluster", "move", "alone":
			fmt.Fprintf(os.Stderr, "run %s: %v of producers under Q = %.2f MiB/s\n", r, o.dur, o.q/(1<<20))
			qr, err := runQuota(o, r != "alone", r == "move")
			if err != nil {
				fail(fmt.Errorf("run %s: %w", r, err))
			}
			quotaRuns = append(quotaRuns, qr)
		case "buckets":
			for _, clustered := range []bool{true, false} {
				fmt.Fprintf(os.Stderr, "run buckets (%s): %d client-ids, %v warm-up, %v measured\n", way(clustered), o.buckets, o.bucketWarmup, o.bucketMeasure)
				br, err := runBuckets(o, clustered)
				if err != nil {
					fail(fmt.Errorf("run buckets (%s): %w", way(clustered), err))
				}
				bucketRuns = append(bucketRuns, br)
			}
		}
	}
	fmt.Printf("`go run ./bench/cluster %s` — %d CPUs, load average %s before, %s after\n\n",
		strings.Join(os.Args[1:], " "), runtime.NumCPU(), load0, loadavg())
	if len(quotaRuns) > 0 {
		reportQuota(o, quotaRuns)
	}
	if len(bucketRuns) > 0 {
		reportBuckets(o, bucketRuns)
	}
}

func way(clustered bool) string {
	if clustered {
		return "Tollgate cluster"
	}
	return "three alone"
}

func reportQuota(o options, runs []*quotaRun) {
	fmt.Printf("## One quota, three instances\n\n")
	fmt.Printf("producer_byte_rate Q = %.2f MiB/s for client-id %s, set through A's Kafka API (through each instance's when alone). "+
		"Producers at full speed for %v: 1 franz-go via A; 2 franz-go and 2 kafka-go via B; 1 kafka-go via C (4 KiB records, requests of at most 64 KiB, acks=1). "+
		"Counted: Produce request bytes acknowledged (what the quota charges), client-side.\n\n", o.q/(1<<20), tenant, o.dur)
	fmt.Printf("| run | window | total | A | B | C |\n|---|---|---|---|---|---|\n")
	for _, r := range runs {
		name := way(r.clustered)
		if r.move {
			name += ", producer moved A → C at the midpoint"
		}
		for _, w := range r.windows() {
			f := "%.3f"
			if w.qs {
				f = "%.1f"
			}
			fmt.Printf("| %s | %s | "+f+" | "+f+" | "+f+" | "+f+" |\n", name, w.label, r.value(w, -1), r.value(w, 0), r.value(w, 1), r.value(w, 2))
		}
	}
	fmt.Println()
	for _, r := range runs {
		name := way(r.clustered)
		if r.move {
			name += " (move)"
		}
		fmt.Printf("%s — per second, total ÷ Q: %s\n\n", name, r.shape())
		for k, rates := range r.rates {
			when := "at the end"
			if r.move && k == 0 {
				when = "before the move"
			}
			var parts []string
			for i, rt := range rates {
				parts = append(parts, fmt.Sprintf("%s %.2f / %.2f", names[i], rt[0]/r.q, rt[1]/r.q))
			}
			fmt.Printf("%s — the bucket %s, tollgate_quota_rate / tollgate_quota_instance_rate ÷ Q: %s\n\n", name, when, strings.Join(parts, "; "))
		}
		fmt.Printf("%s — CPU over the run: A %.1f s (with the embedded cluster), B %.1f s, C %.1f s\n\n", name,
			r.cpu[0].Seconds(), r.cpu[1].Seconds(), r.cpu[2].Seconds())
	}
}

func reportBuckets(o options, runs []*bucketRun) {
	var cl, alone *bucketRun
	for _, r := range runs {
		if r.clustered {
			cl = r
		} else {
			alone = r
		}
	}
	fmt.Printf("## The exchange with %d active buckets\n\n", o.buckets)
	fmt.Printf("%d client-ids under a default client-id producer_byte_rate of %.2f MiB/s (one bucket each); each sends one %d B record (acks=1) every %.2g s "+
		"through one instance (client-id k through instance k mod 3), over %d raw connections per instance that cycle the header's client-id. "+
		"Measured %.0f s after a %v warm-up; exchange counters from /api/v1/cluster, CPU (process and its acceptor helper) from /proc. "+
		"A also runs the embedded cluster, which serves every instance's produce requests and the exchange topic.\n\n",
		o.buckets, o.bucketQ/(1<<20), o.bucketRecord, 1/o.bucketRate, o.bucketConns, cl.measure.Seconds(), o.bucketWarmup)
	fmt.Printf("| instance | entries per report | reports/s | exchange out, KB/s | exchange in, KB/s | buckets, cluster / alone |\n|---|---|---|---|---|---|\n")
	for i := range names {
		s := cl.measure.Seconds()
		x0, x1 := cl.x0[i], cl.x1[i]
		reps := float64(x1.Published - x0.Published)
		fmt.Printf("| %s | %.0f | %.2f | %.1f | %.1f | %.0f / %.0f |\n", names[i], float64(x1.Entries-x0.Entries)/max(reps, 1), reps/s,
			float64(x1.PublishedBytes-x0.PublishedBytes)/s/1000, float64(x1.ReceivedBytes-x0.ReceivedBytes)/s/1000, cl.buckets[i], alone.buckets[i])
	}
	fmt.Printf("\n(report bytes as encoded, before the producer's zstd; \"in\" includes the instance's own reports, which come back through the topic)\n\n")
	fmt.Printf("| instance | requests/s, cluster / alone | CPU %% of a core, cluster / alone | CPU ms per 1000 requests, cluster / alone | RSS MiB, cluster / alone |\n|---|---|---|---|---|\n")
	for i := range names {
		rc, ra := float64(cl.acked[i])/cl.measure.Seconds(), float64(alone.acked[i])/alone.measure.Seconds()
		fmt.Printf("| %s | %.0f / %.0f | %.1f / %.1f | %.2f / %.2f | %.0f / %.0f |\n", names[i], rc, ra,
			100*cl.cpu[i].Seconds()/cl.measure.Seconds(), 100*alone.cpu[i].Seconds()/alone.measure.Seconds(),
			1e3*cl.cpu[i].Seconds()/max(float64(cl.acked[i])/1000, 1e-9), 1e3*alone.cpu[i].Seconds()/max(float64(alone.acked[i])/1000, 1e-9),
			float64(cl.rssKiB[i])/1024, float64(alone.rssKiB[i])/1024)
	}
	fmt.Println()
	for _, r := range runs {
		var parts []string
		for i := range names {
			parts = append(parts, fmt.Sprintf("%s sent %d, acknowledged %d, failed %d, throttled %d", names[i], r.sent[i], r.acked[i], r.failed[i], r.throttled[i]))
		}
		fmt.Printf("%s, measured %.1f s: %s; buckets %v\n\n", way(r.clustered), r.measure.Seconds(), strings.Join(parts, "; "), r.buckets)
	}
	offered := float64(o.buckets) * o.bucketRate
	for _, r := range runs {
		if got := float64(sum3(r.acked)) / r.measure.Seconds(); got < 0.95*offered {
			fmt.Printf("%s: the machine did not keep up — %.0f requests/s offered, %.0f acknowledged: fewer buckets had traffic in each interval than -buckets says.\n\n",
				way(r.clustered), offered, got)
		}
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
