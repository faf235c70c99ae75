package perf

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/internal/clientconf"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const usageText = `usage: tollgate perf produce|consume [flags]

Generate load through Tollgate (or any Kafka cluster) and report records/s,
MB/s, latency (produce) and the throttling the client was told of, as Kafka's
clients name it (produce-throttle-time-avg/-max, fetch-throttle-time-avg/-max,
in ms, averaged over all produce or fetch responses).

The run is bounded: --num-records, --duration, or both (whichever comes first);
with neither, --duration 30s. A consumer also stops after --timeout (10s)
without a record. SIGINT stops the run and prints the summary (exit status
130).
`

// ExitInterrupted is the exit status of a run stopped by SIGINT or SIGTERM.
const ExitInterrupted = 130

// config is a parsed command line.
type config struct {
	mode          string // produce or consume
	bootstrap     []string
	topic         string
	recordSize    int
	numRecords    int64 // 0: unbounded
	duration      time.Duration
	throughput    float64 // records/s; <= 0 unlimited
	acks          string
	compression   string
	batchSize     int
	clientID      string
	group         string
	fromBeginning bool
	commandConfig string
	json          bool
	interval      time.Duration
	timeout       time.Duration // connect / preflight
	protocol      string        // security.protocol in effect
}

// Run is `tollgate perf`: args are what follows "perf". SIGINT and SIGTERM
// stop the run and print the summary; a second signal kills the process.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the next signal gets the default behaviour
	}()
	return run(ctx, args, stdout, stderr)
}

// run is Run with the interrupt as a context: when ctx is done the run
// stops, prints its summary and returns ExitInterrupted.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "produce" && args[0] != "consume") {
		if len(args) > 0 && args[0] != "-h" && args[0] != "--help" && args[0] != "help" {
			fmt.Fprintf(stderr, "tollgate perf: unknown mode %q\n\n", args[0])
		}
		fmt.Fprint(stderr, usageText, "\nRun 'tollgate perf produce -h' or 'tollgate perf consume -h' for the flags.\n")
		return 2
	}
	cfg, code := parseFlags(args[0], args[1:], stderr)
	if code >= 0 {
		return code
	}
	var err error
	var interrupted bool
	if cfg.mode == "produce" {
		interrupted, err = produce(ctx, cfg, stdout, stderr)
	} else {
		interrupted, err = consume(ctx, cfg, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate perf:", err)
		return 1
	}
	if interrupted {
		return ExitInterrupted
	}
	return 0
}

// parseFlags returns the config, or an exit code >= 0.
func parseFlags(mode string, args []string, stderr io.Writer) (*config, int) {
	cfg := &config{mode: mode}
	fs, bootstrap := flagSet(cfg, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() > 0 {
		return badFlags(stderr, mode, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	for _, s := range strings.Split(*bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.bootstrap = append(cfg.bootstrap, s)
		}
	}
	if err := cfg.check(set); err != nil {
		return badFlags(stderr, mode, err)
	}
	return cfg, -1
}

// flagSet is the flag set of cfg.mode, each flag parsed into cfg but the
// bootstrap list, returned as given.
func flagSet(cfg *config, stderr io.Writer) (*flag.FlagSet, *string) {
	mode := cfg.mode
	fs := flag.NewFlagSet("perf "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tollgate perf %s [flags]\n\nflags:\n", mode)
		fs.PrintDefaults()
	}
	bootstrap := fs.String("bootstrap-server", "127.0.0.1:9092", "comma-separated `host:port` list to bootstrap from")
	fs.StringVar(&cfg.topic, "topic", "", "topic to "+mode+" (required)")
	fs.Int64Var(&cfg.numRecords, "num-records", 0, "stop after this many records `n`")
	fs.DurationVar(&cfg.duration, "duration", 0, "stop after this long (default 30s when --num-records is not given)")
	fs.Float64Var(&cfg.throughput, "throughput", -1, "target records/s; -1 is unlimited")
	fs.StringVar(&cfg.clientID, "client-id", "", "client id (default perf-"+map[string]string{"produce": "producer", "consume": "consumer"}[mode]+"-client, or client.id from --command-config)")
	fs.StringVar(&cfg.commandConfig, "command-config", "", "Kafka client properties `file`: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.* (PEM), client.id")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object per progress line and a final summary object")
	fs.DurationVar(&cfg.interval, "interval", time.Second, "progress line period")
	if mode == "produce" {
		fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "how long to wait for the bootstrap server")
	} else {
		fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "how long to wait for the bootstrap server, and the longest time without a record before the run stops (as in kafka-consumer-perf-test)")
	}
	if mode == "produce" {
		fs.IntVar(&cfg.recordSize, "record-size", 1024, "record value size in `bytes`")
		fs.StringVar(&cfg.acks, "acks", "all", "all, 1 or 0")
		fs.StringVar(&cfg.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
		fs.IntVar(&cfg.batchSize, "batch-size", 16384, "maximum record batch `bytes` per partition (Kafka's batch.size; raised to fit one record)")
	} else {
		fs.StringVar(&cfg.group, "group", "", "consumer group (default: no group, all partitions)")
		fs.BoolVar(&cfg.fromBeginning, "from-beginning", false, "start at the earliest offset rather than the latest (without a committed group offset)")
	}
	return fs, bootstrap
}

// badFlags says what is wrong with the flags and returns the usage
// error's exit code.
func badFlags(stderr io.Writer, mode string, err error) (*config, int) {
	fmt.Fprintf(stderr, "tollgate perf %s: %s\n", mode, err)
	return nil, 2
}

// check says what is wrong with a parsed config, set naming the flags
// given; it defaults the duration and lower-cases the producer's names.
func (cfg *config) check(set map[string]bool) error {
	switch {
	case len(cfg.bootstrap) == 0:
		return errors.New("--bootstrap-server is empty")
	case cfg.topic == "":
		return errors.New("--topic is required")
	case set["num-records"] && cfg.numRecords <= 0:
		return errors.New("--num-records must be positive")
	case set["duration"] && cfg.duration <= 0:
		return errors.New("--duration must be positive")
	case cfg.throughput == 0:
		return errors.New("--throughput must be positive, or -1 for unlimited")
	case cfg.interval <= 0:
		return errors.New("--interval must be positive")
	case cfg.timeout <= 0:
		return errors.New("--timeout must be positive")
	}
	if !set["num-records"] && !set["duration"] {
		cfg.duration = 30 * time.Second
	}
	if cfg.mode != "produce" {
		return nil
	}
	cfg.acks = strings.ToLower(cfg.acks)
	cfg.compression = strings.ToLower(cfg.compression)
	if cfg.recordSize <= 0 {
		return errors.New("--record-size must be positive")
	}
	if _, err := acksOpt(cfg.acks); err != nil {
		return err
	}
	if _, err := compressionOpt(cfg.compression); err != nil {
		return err
	}
	if cfg.batchSize <= 0 {
		return errors.New("--batch-size must be positive")
	}
	return nil
}

// ackValues and compressionValues are what --acks and --compression take.
var (
	ackValues         = map[string]kgo.Acks{"all": kgo.AllISRAcks(), "-1": kgo.AllISRAcks(), "1": kgo.LeaderAck(), "0": kgo.NoAck()}
	compressionValues = map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
)

func acksOpt(s string) (kgo.Acks, error) { return flagValue(ackValues, "--acks", s, "all, 1 or 0") }

func compressionOpt(s string) (kgo.CompressionCodec, error) {
	return flagValue(compressionValues, "--compression", s, "none, gzip, snappy, lz4 or zstd")
}

// flagValue is the value s of flag name in values, case-insensitively;
// want lists them for the error.
func flagValue[V any](values map[string]V, name, s, want string) (V, error) {
	if v, ok := values[strings.ToLower(s)]; ok {
		return v, nil
	}
	var zero V
	return zero, fmt.Errorf("%s %q: want %s", name, s, want)
}

// baseOpts are the client options both roles share.
func baseOpts(cfg *config, defaultClientID string, stderr io.Writer) ([]kgo.Opt, string, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.bootstrap...),
		kgo.DialTimeout(cfg.timeout),
		kgo.DisableClientMetrics(), // no KIP-714 pushes: Close is immediate
	}
	clientID := cfg.clientID
	cfg.protocol = "PLAINTEXT"
	if cfg.commandConfig != "" {
		props, err := clientconf.LoadProps(cfg.commandConfig)
		if err != nil {
			return nil, "", fmt.Errorf("--command-config: %w", err)
		}
		cc, err := clientconf.New(strings.Join(cfg.bootstrap, ","), props, "")
		if err != nil {
			return nil, "", fmt.Errorf("--command-config %s: %w", cfg.commandConfig, err)
		}
		for _, k := range clientconf.Unknown(props) {
			fmt.Fprintf(stderr, "tollgate perf: ignoring property %s (not used by perf)\n", k)
		}
		opts = append(opts, cc.Opts()...)
		cfg.protocol = cc.Protocol
		if clientID == "" {
			clientID = cc.ClientID
		}
	}
	if clientID == "" {
		clientID = defaultClientID
	}
	return append(opts, kgo.ClientID(clientID)), clientID, nil
}

// session is a run's client, its client id and the stats it counts.
type session struct {
	cl       *kgo.Client
	clientID string
	st       *stats
}

// startSession makes a run's client, with the options both roles share
// (defaultClientID unless cfg names another) and then roleOpts', connects
// it and runs checks on it. No session: interrupted, ctx ended first, or
// err.
func startSession(ctx context.Context, cfg *config, defaultClientID string, stderr io.Writer,
	roleOpts func([]kgo.Opt, *config, *stats) []kgo.Opt, checks ...func(context.Context, *kgo.Client, *config) error) (s *session, interrupted bool, err error) {
	opts, clientID, err := baseOpts(cfg, defaultClientID, stderr)
	if err != nil {
		return nil, false, err
	}
	st := newStats(time.Now())
	cl, err := kgo.NewClient(roleOpts(opts, cfg, st)...)
	if err != nil {
		return nil, false, err
	}
	for _, check := range append([]func(context.Context, *kgo.Client, *config) error{connect}, checks...) {
		if err := check(ctx, cl, cfg); err != nil {
			cl.Close()
			if ctx.Err() != nil {
				return nil, true, nil
			}
			return nil, false, err
		}
	}
	return &session{cl: cl, clientID: clientID, st: st}, false, nil
}

// withDuration is ctx ended, with errDuration, after --duration if set.
func withDuration(ctx context.Context, cfg *config) (context.Context, context.CancelFunc) {
	if cfg.duration > 0 {
		return context.WithTimeoutCause(ctx, cfg.duration, errDuration)
	}
	return context.WithCancel(ctx)
}

// window is the measured part of a run: from start, a progress line each
// --interval, records paced to --throughput.
type window struct {
	start time.Time
	rep   *reporter
	pace  pacer
}

// open starts the run's window now.
func (s *session) open(cfg *config, stdout io.Writer) window {
	start := time.Now()
	s.st.roll(start)
	return window{start: start, rep: startReporter(cfg, s.st, stdout, start), pace: pacer{start: start, rate: cfg.throughput}}
}

// close ends the window (no more progress, the stats frozen) and returns
// how long it was.
func (s *session) close(w window) time.Duration {
	w.rep.stop()
	s.st.freeze()
	return time.Since(w.start)
}

// summary prints the run's summary and returns whether the run was
// interrupted, and runErr.
func (s *session) summary(ctx context.Context, cfg *config, stdout io.Writer, elapsed time.Duration, runErr error) (bool, error) {
	interrupted := ctx.Err() != nil && runErr == nil
	printSummary(stdout, cfg, s.clientID, s.st, elapsed, interrupted, runErr)
	return interrupted, runErr
}

// connect makes sure a bootstrap server answers (and authenticates us)
// before the clock starts.
func connect(ctx context.Context, cl *kgo.Client, cfg *config) error {
	pctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	err := cl.Ping(pctx)
	if err == nil || ctx.Err() != nil {
		return ctx.Err()
	}
	sasl := strings.HasPrefix(cfg.protocol, "SASL_")
	var hint string
	var firstEOF *kgo.ErrFirstReadEOF
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("authentication failed at %s: %w", strings.Join(cfg.bootstrap, ","), err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		hint = " (check sasl.mechanism against the listener's)"
	case sasl && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &firstEOF)):
		hint = " (the connection was closed during SASL authentication: is the listener " + cfg.protocol + ", and are sasl.mechanism and the credentials right?)"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &firstEOF):
		hint = " (the connection was closed: if the listener uses TLS or SASL, set security.protocol in --command-config)"
	case errors.Is(err, context.DeadlineExceeded):
		hint = fmt.Sprintf(" (no answer within --timeout %v)", cfg.timeout)
	}
	return fmt.Errorf("cannot connect to bootstrap server %s: %w%s", strings.Join(cfg.bootstrap, ","), err, hint)
}

// pacer holds a loop to a target rate, like Kafka's ThroughputThrottler: the
// i-th record is not sent before start + i/rate.
type pacer struct {
	start time.Time
	rate  float64
}

// wait returns false if ctx ended first.
func (p pacer) wait(ctx context.Context, i int64) bool {
	if p.rate <= 0 {
		return ctx.Err() == nil
	}
	due := p.start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reporter prints a progress line every interval until stopped.
type reporter struct {
	cfg  *config
	st   *stats
	out  io.Writer
	t0   time.Time
	done chan struct{}
	wg   sync.WaitGroup
}

func startReporter(cfg *config, st *stats, out io.Writer, t0 time.Time) *reporter {
	r := &reporter{cfg: cfg, st: st, out: out, t0: t0, done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tk := time.NewTicker(cfg.interval)
		defer tk.Stop()
		for {
			select {
			case <-r.done:
				return
			case now := <-tk.C:
				r.print(now, st.roll(now))
			}
		}
	}()
	return r
}

func (r *reporter) stop() {
	close(r.done)
	r.wg.Wait()
}

// progress is one --json progress line.
type progress struct {
	Type          string   `json:"type"`
	Mode          string   `json:"mode"`
	ElapsedS      float64  `json:"elapsed_s"`
	Records       int64    `json:"records"`
	Bytes         int64    `json:"bytes"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	LatencyAvgMs  *float64 `json:"latency_avg_ms,omitempty"`
	LatencyMaxMs  *float64 `json:"latency_max_ms,omitempty"`
	Throttles     int64    `json:"throttle_count"`
	ThrottleMaxMs float64  `json:"throttle_max_ms"`
}

const mib = 1024 * 1024

func (r *reporter) print(now time.Time, iv interval) {
	secs := now.Sub(iv.start).Seconds()
	if secs <= 0 {
		return
	}
	p := progress{
		Type: "progress", Mode: r.cfg.mode, ElapsedS: round3(now.Sub(r.t0).Seconds()),
		Records: iv.records, Bytes: iv.bytes,
		RecordsPerSec: round3(float64(iv.records) / secs), MBPerSec: round3(float64(iv.bytes) / mib / secs),
		Throttles: iv.throttles, ThrottleMaxMs: ms(iv.throttleMax),
	}
	var avg float64
	if iv.latN > 0 {
		avg = ms(iv.latSum) / float64(iv.latN)
	}
	if r.cfg.mode == "produce" {
		a, m := round3(avg), round3(ms(iv.latMax))
		p.LatencyAvgMs, p.LatencyMaxMs = &a, &m
	}
	if r.cfg.json {
		writeJSON(r.out, p)
		return
	}
	if r.cfg.mode == "produce" {
		fmt.Fprintf(r.out, "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency, throttle %d (max %.0f ms)\n",
			iv.records, p.RecordsPerSec, p.MBPerSec, avg, ms(iv.latMax), iv.throttles, ms(iv.throttleMax))
	} else {
		fmt.Fprintf(r.out, "%d records received, %.1f records/sec (%.2f MB/sec), throttle %d (max %.0f ms)\n",
			iv.records, p.RecordsPerSec, p.MBPerSec, iv.throttles, ms(iv.throttleMax))
	}
}

// summary is the --json final object. The throttle metrics carry Kafka's
// client metric names; only the pair of the run's mode is present.
type summary struct {
	Type          string   `json:"type"`
	Mode          string   `json:"mode"`
	Topic         string   `json:"topic"`
	ClientID      string   `json:"client_id"`
	Interrupted   bool     `json:"interrupted"`
	Error         string   `json:"error,omitempty"`
	ElapsedS      float64  `json:"elapsed_s"`
	Records       int64    `json:"records"`
	Bytes         int64    `json:"bytes"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	LatencyAvgMs  *float64 `json:"latency_avg_ms,omitempty"`
	LatencyP50Ms  *float64 `json:"latency_p50_ms,omitempty"`
	LatencyP95Ms  *float64 `json:"latency_p95_ms,omitempty"`
	LatencyP99Ms  *float64 `json:"latency_p99_ms,omitempty"`
	LatencyP999Ms *float64 `json:"latency_p999_ms,omitempty"`
	LatencyMaxMs  *float64 `json:"latency_max_ms,omitempty"`

	ProduceThrottleTimeAvg *float64 `json:"produce-throttle-time-avg,omitempty"`
	ProduceThrottleTimeMax *float64 `json:"produce-throttle-time-max,omitempty"`
	FetchThrottleTimeAvg   *float64 `json:"fetch-throttle-time-avg,omitempty"`
	FetchThrottleTimeMax   *float64 `json:"fetch-throttle-time-max,omitempty"`
	// Responses is the number of produce (or fetch) responses the averages
	// are over; ThrottledResponses how many of them had a throttle.
	Responses          int64 `json:"responses"`
	ThrottledResponses int64 `json:"throttled_responses"`
}

func printSummary(out io.Writer, cfg *config, clientID string, st *stats, elapsed time.Duration, interrupted bool, runErr error) {
	t := st.totals()
	secs := elapsed.Seconds()
	var rps, mbps float64
	if secs > 0 {
		rps, mbps = float64(t.records)/secs, float64(t.bytes)/mib/secs
	}
	s := summary{
		Type: "summary", Mode: cfg.mode, Topic: cfg.topic, ClientID: clientID, Interrupted: interrupted,
		ElapsedS: round3(secs), Records: t.records, Bytes: t.bytes,
		RecordsPerSec: round3(rps), MBPerSec: round3(mbps),
		Responses: t.responses, ThrottledResponses: t.throttled,
	}
	if runErr != nil {
		s.Error = runErr.Error()
	}
	avg, mx := round3(t.throttleAvgMs), t.throttleMaxMs
	if cfg.mode == "produce" {
		s.ProduceThrottleTimeAvg, s.ProduceThrottleTimeMax = &avg, &mx
		f := func(d time.Duration) *float64 { v := round3(ms(d)); return &v }
		s.LatencyAvgMs, s.LatencyMaxMs = f(t.latAvg), f(t.latMax)
		s.LatencyP50Ms, s.LatencyP95Ms, s.LatencyP99Ms, s.LatencyP999Ms = f(t.p50), f(t.p95), f(t.p99), f(t.p999)
	} else {
		s.FetchThrottleTimeAvg, s.FetchThrottleTimeMax = &avg, &mx
	}
	if cfg.json {
		writeJSON(out, s)
		return
	}
	if cfg.mode == "produce" {
		fmt.Fprintf(out, "%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.1f ms 50th, %.1f ms 95th, %.1f ms 99th, %.1f ms 99.9th.\n",
			t.records, rps, mbps, ms(t.latAvg), ms(t.latMax), ms(t.p50), ms(t.p95), ms(t.p99), ms(t.p999))
		fmt.Fprintf(out, "produce-throttle-time-avg=%.1f produce-throttle-time-max=%.1f (ms, over %d produce responses, %d throttled)\n",
			avg, mx, t.responses, t.throttled)
	} else {
		fmt.Fprintf(out, "%d records received in %.1f s, %.1f records/sec (%.2f MB/sec).\n",
			t.records, secs, rps, mbps)
		fmt.Fprintf(out, "fetch-throttle-time-avg=%.1f fetch-throttle-time-max=%.1f (ms, over %d fetch responses, %d throttled)\n",
			avg, mx, t.responses, t.throttled)
	}
}

func writeJSON(out io.Writer, v any) {
	b, _ := json.Marshal(v) // plain structs of numbers and strings
	out.Write(append(b, '\n'))
}

func round3(f float64) float64 {
	return float64(int64(f*1000+0.5)) / 1000
}
