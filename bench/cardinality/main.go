// Command cardinality shows that quota state keyed by client-chosen strings
// stays bounded: it sends one Produce request for each of a million distinct
// client-ids through the quota policy (the same calls the gateway makes for a
// Produce request and its response), on an explicit clock, under a default
// client-id quota (so every client-id is a bucket of its own, the worst
// case), and reports the engine's buckets, routes and evictions, the Go heap,
// the process RSS and the size and time of a /metrics scrape at the start,
// the middle and the end. Then it times scrapes with 100 000 live buckets,
// with the default series cap and with every bucket exported.
//
//	go run ./bench/cardinality
//	go run ./bench/cardinality -ids 1000000 -step 1ms -scrape-buckets 100000
//
// No network and no cluster: the engine, the policy and the metrics
// registry are Tollgate's own, driven in-process; it runs for seconds.
package main

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/enforce"
	"github.com/tollgate/tollgate/internal/metrics"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit/proc"
)

var (
	ids           = flag.Int("ids", 1_000_000, "distinct client-ids, one Produce request each")
	step          = flag.Duration("step", time.Millisecond, "clock advance per request (explicit clock)")
	maxBuckets    = flag.Int("max-buckets", 0, "quota.max_buckets (0: the default)")
	maxRoutes     = flag.Int("max-routes", 0, "quota.max_routes (0: the default)")
	maxSeries     = flag.Int("metrics-max-buckets", 0, "quota.metrics_max_buckets (0: the default)")
	alg           = flag.String("algorithm", app.DefaultByteRateAlgorithm, "quota.byte_rate_algorithm")
	scrapeBuckets = flag.Int("scrape-buckets", 100_000, "live buckets for the scrape timing (0: skip)")
	scrapes       = flag.Int("scrapes", 5, "scrapes timed per configuration")
	cpuProfile    = flag.String("cpuprofile", "", "write a CPU profile of the client-id run to this file")
)

func main() {
	flag.Parse()
	if *maxSeries == 0 {
		*maxSeries = app.DefaultMetricsMaxBuckets
	}
	a, err := quota.ParseByteRateAlgorithm(*alg)
	check(err)
	start := time.UnixMilli(1_700_000_000_000)
	now := start
	eng, pol, reg := setup(a, *maxSeries, func() time.Time { return now })

	fmt.Printf("%d distinct client-ids, one %s Produce each, clock +%v per request; max_buckets %d, max_routes %d, metrics_max_buckets %d\n",
		*ids, a, *step, eng.Config().MaxBuckets, eng.Config().MaxRoutes, *maxSeries)
	fmt.Printf("%-9s %9s %8s %9s %9s %9s %10s %8s %9s %9s %8s\n",
		"ids", "buckets", "routes", "evicted", "ev.route", "expired", "heap MiB", "RSS MiB", "/metrics", "scrape", "ns/req")
	report := func(done int, perReq time.Duration) {
		s := eng.Stats()[model.ProducerByteRate]
		size, took := scrape(reg)
		fmt.Printf("%-9d %9d %8d %9d %9d %9d %10.1f %8.1f %8.1fk %9v %8d\n", done, s.Buckets, s.Routes,
			s.EvictedBuckets, s.EvictedRoutes, s.ExpiredBuckets, heapMiB(), rssMiB(), float64(size)/1024,
			took.Round(time.Microsecond), perReq.Nanoseconds())
	}
	report(0, 0)
	// One connection per client-id, as a real client has: the filter's
	// instance for an ANONYMOUS connection.
	ci := &proxytest.Conn{ConnInfo: principal.ConnInfo{Principal: principal.AnonymousPrincipal}}
	checkpoints := map[int]bool{*ids / 4: true, *ids / 2: true, 3 * *ids / 4: true, *ids: true}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		check(err)
		check(pprof.StartCPUProfile(f))
	}
	t0, last := time.Now(), 0
	for i := 1; i <= *ids; i++ {
		r := &proxy.Request{Key: int16(kmsg.Produce), Version: 9, ClientID: "id-" + strconv.Itoa(i), Size: 1000, Acks: 1}
		pol.OnRequest(ci, r)
		pol.Throttle(ci, r, 100)
		now = now.Add(*step)
		if checkpoints[i] {
			report(i, time.Since(t0)/time.Duration(i-last))
			t0, last = time.Now(), i
		}
	}

	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if *scrapeBuckets > 0 {
		fmt.Printf("\nscrape with %d live buckets (best and median of %d, promhttp, uncompressed)\n", *scrapeBuckets, *scrapes)
		for _, series := range []int{*maxSeries, *scrapeBuckets} {
			now := start
			eng, pol, reg := setup(a, series, func() time.Time { return now })
			for i := range *scrapeBuckets {
				r := &proxy.Request{Key: int16(kmsg.Produce), Version: 9, ClientID: "live-" + strconv.Itoa(i), Size: 1000, Acks: 1}
				pol.OnRequest(ci, r)
				pol.Throttle(ci, r, 100)
				now = now.Add(time.Millisecond / 10)
			}
			var times []time.Duration
			var size int
			for range *scrapes {
				var d time.Duration
				size, d = scrape(reg)
				times = append(times, d)
			}
			best, med := minMed(times)
			fmt.Printf("  metrics_max_buckets %-7d buckets %d: /metrics %.1f KiB, scrape best %v, median %v\n",
				series, eng.Stats()[model.ProducerByteRate].Buckets, float64(size)/1024, best.Round(time.Microsecond), med.Round(time.Microsecond))
		}
	}
}

// setup returns an engine with a default client-id producer quota that is
// never reached, the policy over it on clock now, and a metrics registry.
func setup(a quota.ByteRateAlgorithm, series int, now func() time.Time) (*quota.Engine, *enforce.Filter, *metrics.Metrics) {
	eng, err := quota.NewEngine(quota.EngineConfig{ByteRate: a, SharedDeadline: true, MaxBuckets: *maxBuckets, MaxRoutes: *maxRoutes})
	check(err)
	var q model.Quotas
	check(q.Set(model.Entity{Client: model.Default()}, model.ProducerByteRate, 1e9))
	eng.SetQuotas(q)
	pol, err := enforce.New(enforce.Config{Engine: eng, Now: now})
	check(err)
	m := metrics.New()
	m.RegisterQuotasAt(eng, series, now)
	return eng, pol, m
}

// scrape serves /metrics once, as Prometheus would fetch it (no gzip), and
// returns its size and how long it took.
func scrape(m *metrics.Metrics) (int, time.Duration) {
	h := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	t := time.Now()
	h.ServeHTTP(rec, req)
	return rec.Body.Len(), time.Since(t)
}

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// rssMiB is VmRSS from /proc/self/status, 0 where there is none.
func rssMiB() float64 {
	kb, _ := proc.RSSKiB(0)
	return float64(kb) / 1024
}

func minMed(ds []time.Duration) (time.Duration, time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[0], s[len(s)/2]
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
