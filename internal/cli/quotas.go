package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// defaultBootstrap is Tollgate's default listener.
const defaultBootstrap = "127.0.0.1:9092"

const quotasUsage = `usage: tollgate quotas <command> [flags]

commands:
  apply -f FILE [--dry-run] [--yes]   make the cluster's client quotas match FILE
  import --from HOST:PORT [-o FILE]   Tollgate's equivalent of the quotas the
                                      upstream's brokers enforce, as a FILE
  resolve --user U --client-id C [--ip A] [--topic T]
                                      show which quota applies to a client
  suggest (--data-dir DIR | --usage-topic T) [--percentile 99] [--headroom 20%]
                                      byte-rate quotas proposed from the usage
                                      ledger, as a FILE

common flags:
  --bootstrap-server HOST:PORT[,...]  servers to connect to (default 127.0.0.1:9092)
  --command-config FILE               Kafka client properties (as kafka-configs)
`

const applyUsage = `usage: tollgate quotas apply -f FILE [--bootstrap-server HOST:PORT] [--command-config FILE] [--dry-run] [--yes]

Reads the desired client quotas from FILE, describes the quotas set on the
cluster, prints the difference and applies it in one AlterClientQuotas
request: on --yes, or after answering y at the prompt (stdin must then be a
terminal). --dry-run prints the difference only.

FILE is a YAML list of entities (or a mapping whose quotas: key is that list,
so Tollgate's config file can be given as is):

  - user: alice                 # or default_user: true
    client_id: ingest           # or default_client_id: true; optional
    producer_byte_rate: 1048576
    consumer_byte_rate: 2097152
    request_percentage: 50
    controller_mutation_rate: 10
    shadow: true                # Tollgate: measured, not enforced
    burst_seconds: 0            # Tollgate: start-up burst (absent: 10 s)
  - client_id_prefix: team-a-    # Tollgate: shared by every client-id
    producer_byte_rate: 4194304  # starting with team-a-
  - user: alice                 # Tollgate: a per-topic quota (user,
    topic: orders               # default_user, client_id_prefix or none:
    producer_byte_rate: 524288  # every client) on a topic or topic_prefix
  - ip: 10.0.0.7                # or default_ip: true
    connection_creation_rate: 20

What is removed: a key set on the cluster but not in FILE is removed when
its entity is in FILE, or when FILE manages the entity's shape. FILE
manages the shapes of its entries — user, user+client_id, client_id,
client_id_prefix, ip, and the per-topic user+topic, user+topic_prefix,
client_id_prefix+topic, client_id_prefix+topic_prefix, topic, topic_prefix
(names and defaults alike) — and those listed in a top-level manage: list
of the same names.
Entities of other shapes are left alone: a file of user entries never
touches client-id or ip quotas.

flags:
`

const resolveUsage = `usage: tollgate quotas resolve [--user U] [--client-id C] [--ip A] [--topic T] [--bootstrap-server HOST:PORT] [--command-config FILE]

Shows, for each quota key, which configured entity applies to a client and
its value, with Kafka's precedence (user+client-id, user+default client-id,
user, default user+client-id, default user+default client-id, default user,
client-id, then Tollgate's client-id prefix (the longest matching), default
client-id; per key). With --ip, connection_creation_rate:
the exact ip, else (Tollgate) the most specific range, else the default ip.
With --topic (Tollgate), the per-topic quotas of the client on that topic:
its user's, else the default user's, else its longest client-id prefix's,
else every client's; each on the exact topic, else the longest topic prefix.
A request carrying the topic is held by the largest of the throttles.
With --admin-url (Tollgate only), each bucket's live rate and utilization
from the admin HTTP port, which needs a key that may read ($TOLLGATE_API_KEY
or --api-key) unless ANONYMOUS may. When that instance is one of a Tollgate
cluster (cluster.id), the rate is the whole cluster's, THIS INSTANCE is its
own part, and a line under the table lists the cluster's instances.

flags:
`

func runQuotas(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, quotasUsage)
		return 2
	}
	switch args[0] {
	case "apply":
		return runApply(ctx, env, args[1:])
	case "resolve":
		return runResolve(ctx, env, args[1:])
	case "import":
		return runImport(ctx, env, args[1:])
	case "suggest":
		return runSuggest(ctx, env, args[1:], time.Now)
	case "-h", "--help", "help":
		fmt.Fprint(env.Stdout, quotasUsage)
		return 0
	}
	fmt.Fprintf(env.Stderr, "tollgate quotas: unknown command %q\n\n", args[0])
	fmt.Fprint(env.Stderr, quotasUsage)
	return 2
}

// commonFlags are the connection flags of the quotas commands.
type commonFlags struct {
	bootstrap     string
	commandConfig string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bootstrap, "bootstrap-server", defaultBootstrap, "`servers` to connect to, HOST:PORT[,...]")
	fs.StringVar(&c.commandConfig, "command-config", "", "Kafka client properties `file` (security.protocol, sasl.*, ssl.*)")
}

func (c *commonFlags) client() (*kgo.Client, *connWatch, error) {
	cc, err := loadClientConfig(c.bootstrap, c.commandConfig)
	if err != nil {
		return nil, nil, err
	}
	return newClient(cc)
}

// quotaSession is a quotas command's connection: the Kafka client of its
// flags, a context bounded by --timeout, and the client quotas the
// cluster holds.
type quotaSession struct {
	ctx   context.Context
	cl    *kgo.Client
	watch *connWatch
	st    state
}

// open connects and describes every client quota; done releases what it
// opened. When it fails it has said why, as tollgate quotas cmd, and ok
// is false: the command exits 1.
func (c *commonFlags) open(ctx context.Context, env *Env, cmd string) (qs quotaSession, done func(), ok bool) {
	prefix := "tollgate quotas " + cmd + ":"
	cl, watch, err := c.client()
	if err != nil {
		fmt.Fprintln(env.Stderr, prefix, err)
		return qs, nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, env.timeout())
	done = func() { cancel(); cl.Close() }
	ds, err := describeAll(ctx, cl)
	if err != nil {
		fmt.Fprintln(env.Stderr, prefix, "describing client quotas:", quotasErr(err, watch, env.timeout()))
		done()
		return qs, nil, false
	}
	return quotaSession{ctx: ctx, cl: cl, watch: watch, st: toState(ds)}, done, true
}

func newFlagSet(name, usage string, env *Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns an exit code when the command is done.
func parseFlags(fs *flag.FlagSet, env *Env, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "tollgate quotas %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

// change is one line of a plan.
type change struct {
	entity   entity
	key      string
	kind     byte // '+' add, '~' change, '-' remove
	old, new float64
}

func (c change) String() string {
	switch c.kind {
	case '+':
		return fmt.Sprintf("+ %v %s=%s", c.entity, c.key, formatValue(c.new))
	case '~':
		return fmt.Sprintf("~ %v %s %s -> %s", c.entity, c.key, formatValue(c.old), formatValue(c.new))
	}
	return fmt.Sprintf("- %v %s=%s", c.entity, c.key, formatValue(c.old))
}

// plan computes the changes that make cur match the file, ordered by
// entity and key.
func plan(cur state, qf *quotaFile) []change {
	var out []change
	entities := map[entity]bool{}
	for e := range qf.desired {
		entities[e] = true
	}
	for e := range cur {
		if qf.manages[e.shape()] {
			entities[e] = true
		}
	}
	for e := range entities {
		want, have := qf.desired[e], cur[e]
		for k, v := range want {
			old, ok := have[k]
			switch {
			case !ok:
				out = append(out, change{entity: e, key: k, kind: '+', new: v})
			case old != v:
				out = append(out, change{entity: e, key: k, kind: '~', old: old, new: v})
			}
		}
		for k, v := range have {
			if _, ok := want[k]; !ok {
				out = append(out, change{entity: e, key: k, kind: '-', old: v})
			}
		}
	}
	slices.SortFunc(out, func(a, b change) int {
		if c := compareEntities(a.entity, b.entity); c != 0 {
			return c
		}
		if c := keyRank(a.key) - keyRank(b.key); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

func runApply(ctx context.Context, env *Env, args []string) int {
	fs := newFlagSet("apply", applyUsage, env)
	var (
		common      commonFlags
		file        string
		dryRun, yes bool
	)
	common.register(fs)
	fs.StringVar(&file, "f", "", "quota `file` (YAML)")
	fs.StringVar(&file, "file", "", "quota `file` (YAML)")
	fs.BoolVar(&dryRun, "dry-run", false, "print the changes, apply nothing")
	fs.BoolVar(&yes, "yes", false, "apply without asking")
	fs.BoolVar(&yes, "y", false, "apply without asking")
	if code, done := parseFlags(fs, env, args); done {
		return code
	}
	if file == "" {
		fmt.Fprintln(env.Stderr, "tollgate quotas apply: -f FILE is required")
		return 2
	}
	qf, err := loadQuotaFile(file)
	if err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, err := range errs {
			fmt.Fprintln(env.Stderr, "tollgate quotas apply:", err)
		}
		return 1
	}
	qs, done, ok := common.open(ctx, env, "apply")
	if !ok {
		return 1
	}
	defer done()
	changes := plan(qs.st, qf)
	if len(changes) == 0 {
		fmt.Fprintf(env.Stdout, "No changes: the client quotas match %s.\n", file)
		return 0
	}
	printPlan(env, changes)
	if dryRun {
		fmt.Fprintln(env.Stdout, "Dry run: nothing applied.")
		return 0
	}
	if !yes && !confirmApply(env) {
		return 1
	}
	return applyPlan(qs.ctx, env, qs.cl, qs.watch, changes)
}

// printPlan prints the changes, one a line, and how many of each kind.
func printPlan(env *Env, changes []change) {
	var adds, mods, dels int
	for _, c := range changes {
		fmt.Fprintln(env.Stdout, c)
		switch c.kind {
		case '+':
			adds++
		case '~':
			mods++
		default:
			dels++
		}
	}
	fmt.Fprintf(env.Stdout, "\nPlan: %d to add, %d to change, %d to remove.\n", adds, mods, dels)
}

// confirmApply asks on the terminal whether to apply the plan, and says
// why not when it does not.
func confirmApply(env *Env) bool {
	if !env.isTerminal() {
		fmt.Fprintln(env.Stderr, "tollgate quotas apply: not applying: stdin is not a terminal to confirm on; pass --yes to apply, or --dry-run")
		return false
	}
	fmt.Fprint(env.Stdout, "Apply these changes? [y/N] ")
	answer, _ := bufio.NewReader(env.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(env.Stdout, "Cancelled: nothing applied.")
		return false
	}
	return true
}

// applyPlan alters the client quotas as planned, in one request, and
// reports each entity that failed: the command's exit code.
func applyPlan(ctx context.Context, env *Env, cl *kgo.Client, watch *connWatch, changes []change) int {
	var entities []entity
	ops := map[entity][]op{}
	for _, c := range changes {
		if _, ok := ops[c.entity]; !ok {
			entities = append(entities, c.entity)
		}
		ops[c.entity] = append(ops[c.entity], op{key: c.key, value: c.new, remove: c.kind == '-'})
	}
	res, err := alterQuotas(ctx, cl, entities, ops)
	if err != nil {
		fmt.Fprintln(env.Stderr, "tollgate quotas apply: altering client quotas:", quotasErr(err, watch, env.timeout()))
		return 1
	}
	failed := 0
	for _, r := range res {
		if r.err != nil {
			failed++
			fmt.Fprintf(env.Stderr, "error: %v: %s: %s\n", r.entity, errCode(r.err), r.err.Error())
		}
	}
	if failed > 0 {
		fmt.Fprintf(env.Stdout, "Applied the changes of %d of %d entities; %d failed.\n", len(res)-failed, len(res), failed)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Applied %d changes to %d entities.\n", len(changes), len(entities))
	return 0
}

func errCode(se *serverError) string {
	if ke, ok := se.err.(*kerr.Error); ok {
		return ke.Message
	}
	return "ERROR"
}

// quotasErr phrases an error of the quotas commands.
func quotasErr(err error, w *connWatch, timeout time.Duration) string {
	var se *serverError
	if errors.As(err, &se) {
		return errCode(se) + ": " + se.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		msg := fmt.Sprintf("no answer from the cluster within %v", timeout)
		if p := w.lastProblem(); p != "" {
			msg += "; last problem: " + p
		}
		return msg
	}
	return err.Error()
}

// resolvedRow is one line of `quotas resolve`.
type resolvedRow struct {
	key    string
	entity *entity // nil: no quota applies
	value  float64
	// res is the quota engine's resolution for the user/client-id keys
	// (nil for connection_creation_rate): the bucket tags say who shares
	// the quota.
	res *model.Resolution
	// topic is set for a per-topic quota's row (--topic).
	topic bool
}

// liveSource adds RATE and UTILIZATION columns to `quotas resolve`, and
// what a shadow quota would have throttled. It is the extension point for
// Tollgate's HTTP API (GET /api/v1/resolve returns them per key for a user
// and client_id): a source built on it is passed to resolveWith behind a
// flag naming the HTTP address. runResolve passes nil: the CLI prints the
// configuration only, which is all a plain Kafka cluster can tell.
type liveSource interface {
	// Live returns the row's bucket as the gateway sees it now; ok is false
	// when the bucket is unknown.
	Live(ctx context.Context, user, clientID string, row resolvedRow) (live liveRow, ok bool, err error)
	// Cluster returns the Tollgate cluster the gateway is one instance
	// of; nil outside one.
	Cluster(ctx context.Context) (*api.ClusterStatus, error)
}

// liveRow is one key's bucket as the gateway sees it.
type liveRow struct {
	// rate is the bucket's rate (in a Tollgate cluster, the cluster's) and
	// utilization is of it; instanceRate is the gateway's own part.
	rate, instanceRate, utilization float64
	// shadowed is what a shadow quota's bucket would have throttled; nil
	// when the quota is enforced.
	shadowed *model.ShadowStats
}

func runResolve(ctx context.Context, env *Env, args []string) int {
	return resolveWith(ctx, env, args, nil)
}

func resolveWith(ctx context.Context, env *Env, args []string, live liveSource) int {
	fs := newFlagSet("resolve", resolveUsage, env)
	var (
		common         commonFlags
		user, clientID string
		ipFlag         string
		admin          adminFlags
	)
	common.register(fs)
	admin.register(fs, "", "Tollgate's admin HTTP `address` (e.g. http://127.0.0.1:9644): add each bucket's live rate and utilization")
	fs.StringVar(&user, "user", "ANONYMOUS", "user principal name (ANONYMOUS: unauthenticated connections)")
	fs.StringVar(&clientID, "client-id", "", "client id (empty: a client that sets none)")
	fs.StringVar(&ipFlag, "ip", "", "client IP address, to resolve connection_creation_rate")
	topic := fs.String("topic", "", "a topic, to resolve the client's per-topic quotas on it (Tollgate)")
	if code, done := parseFlags(fs, env, args); done {
		return code
	}
	if admin.url != "" && live == nil {
		c, err := admin.client(env)
		if err != nil {
			fmt.Fprintln(env.Stderr, "tollgate quotas resolve:", err)
			return 2
		}
		live = &httpLive{c: c}
	}
	var ip netip.Addr
	if ipFlag != "" {
		a, err := netip.ParseAddr(ipFlag)
		if err != nil || a.Zone() != "" {
			fmt.Fprintf(env.Stderr, "tollgate quotas resolve: --ip %s is not an IP address\n", ipFlag)
			return 2
		}
		ip = a.Unmap()
	}
	qs, done, ok := common.open(ctx, env, "resolve")
	if !ok {
		return 1
	}
	defer done()
	ctx, st := qs.ctx, qs.st
	rows := resolveRows(st, user, clientID)
	if ip.IsValid() {
		rows = append(rows, resolveIP(st, ip))
	}
	if *topic != "" {
		rows = append(rows, resolveTopicRows(st, user, clientID, *topic)...)
	}

	// In a Tollgate cluster the rate is the whole cluster's: a column of
	// the gateway's own part beside it, and the instances under the table.
	var tc *api.ClusterStatus
	var clusterErr error
	if live != nil {
		tc, clusterErr = live.Cluster(ctx)
	}
	notes := printResolved(ctx, env, rows, live, tc, user, clientID)
	for _, n := range notes {
		fmt.Fprintln(env.Stdout, n)
	}
	switch {
	case tc != nil:
		for _, l := range clusterLines(tc) {
			fmt.Fprintln(env.Stdout, l)
		}
	case clusterErr != nil:
		fmt.Fprintln(env.Stdout, "Tollgate cluster: unknown (the admin API did not answer: "+clusterErr.Error()+")")
	}
	if h, ok := live.(*httpLive); ok && h.err == nil {
		for _, n := range h.tenant {
			fmt.Fprintln(env.Stdout, n)
		}
	}
	return 0
}

// printResolved prints the table of `quotas resolve`, with the live
// columns when there is a live source (and tc, in a Tollgate cluster), and
// returns a note for each shadow quota.
func printResolved(ctx context.Context, env *Env, rows []resolvedRow, live liveSource, tc *api.ClusterStatus, user, clientID string) (notes []string) {
	header := "KEY\tENTITY\tVALUE"
	switch {
	case tc != nil:
		header += "\tCLUSTER RATE\tTHIS INSTANCE\tUTILIZATION"
	case live != nil:
		header += "\tRATE\tUTILIZATION"
	}
	tw := newTable(env.Stdout, header)
	for _, r := range rows {
		ent, val := "none (unlimited)", "-"
		if r.entity != nil {
			ent, val = r.entity.String(), formatValue(r.value)
		}
		if r.res != nil {
			val += optionsNote(r.res.Options)
		}
		line := r.key + "\t" + ent + "\t" + val
		note := "measured, not enforced (--admin-url shows what it would have throttled)"
		if live != nil {
			cols, liveNote := liveColumns(ctx, live, tc != nil, user, clientID, r)
			line += cols
			if liveNote != "" {
				note = liveNote
			}
		}
		fmt.Fprintln(tw, line)
		if r.res != nil && r.res.Options.Shadow {
			notes = append(notes, r.key+" is in shadow mode: "+note)
		}
	}
	tw.Flush()
	return notes
}

// liveColumns returns a row's live columns, the rate (the cluster's and,
// inCluster, this instance's) and the utilization, and what a shadow quota
// would have throttled ("" when there is nothing to say of it).
func liveColumns(ctx context.Context, live liveSource, inCluster bool, user, clientID string, r resolvedRow) (cols, shadowNote string) {
	lr, ok, err := live.Live(ctx, user, clientID, r)
	blank := "\t-\t-"
	if inCluster {
		blank += "\t-"
	}
	switch {
	case r.topic:
		return "\t-\t-", "measured, not enforced" // the admin API's /api/v1/resolve?topic= has them
	case err != nil:
		return strings.ReplaceAll(blank, "-", "?"), "measured, not enforced (the admin API did not answer: " + err.Error() + ")"
	case !ok:
		return blank, "measured, not enforced; no traffic yet"
	}
	cols = fmt.Sprintf("\t%.0f/s", lr.rate)
	if inCluster {
		cols += fmt.Sprintf("\t%.0f/s", lr.instanceRate)
	}
	cols += fmt.Sprintf("\t%.2f%%", 100*lr.utilization)
	if lr.shadowed != nil {
		shadowNote = "measured, not enforced: " + lr.shadowed.String()
	}
	return cols, shadowNote
}

// resolveRows resolves the four client quota keys with the quota engine's
// precedence (internal/quota), from the configured entities.
func resolveRows(st state, user, clientID string) []resolvedRow {
	q, back := engineQuotas(st)
	var rows []resolvedRow
	for _, k := range model.Keys() {
		r := q.Resolve(k, user, clientID)
		row := resolvedRow{key: k.String(), res: &r}
		if r.Limited() {
			e := back[r.Entity]
			row.entity, row.value = &e, r.Quota
		}
		rows = append(rows, row)
	}
	return rows
}

// resolveTopicRows resolves the byte rates' per-topic quotas of a client on
// topic.
func resolveTopicRows(st state, user, clientID, topic string) []resolvedRow {
	q, back := engineQuotas(st)
	var rows []resolvedRow
	for _, k := range []model.Key{model.ProducerByteRate, model.ConsumerByteRate} {
		r := q.ResolveTopic(k, user, clientID, topic)
		row := resolvedRow{key: k.String() + " on topic " + quoteName(topic), res: &r, topic: true}
		if r.Limited() {
			e := back[r.Entity]
			row.entity, row.value = &e, r.Quota
		}
		rows = append(rows, row)
	}
	return rows
}

// engineQuotas builds the quota engine's input from the configured
// entities, and the way back to them.
func engineQuotas(st state) (model.Quotas, map[model.Entity]entity) {
	var q model.Quotas
	back := map[model.Entity]entity{}
	for e, vals := range st {
		qe, ok := e.quotaEntity()
		if !ok {
			continue
		}
		back[qe] = e
		_ = q.SetOptions(qe, options(vals))
		for k, v := range vals {
			if key, ok := model.ParseKey(k); ok {
				_ = q.Set(qe, key, v) // Kafka stores only valid values
			}
		}
	}
	return q, back
}

// resolveIP finds the connection_creation_rate of an address: its exact ip
// entity, else (a Tollgate extension) the most specific range containing
// it, else the default ip entity.
func resolveIP(st state, ip netip.Addr) resolvedRow {
	row := resolvedRow{key: model.KeyConnectionCreationRate}
	bestBits := -1
	for e, vals := range st {
		v, ok := vals[model.KeyConnectionCreationRate]
		if !ok || !e.ip.set {
			continue
		}
		bits := -1 // the default
		if !e.ip.dflt {
			p, err := admission.ParseIPEntity(e.ip.name)
			if err != nil || !p.Contains(ip) {
				continue
			}
			bits = p.Bits()
		}
		better := row.entity == nil || bits > bestBits ||
			(bits == bestBits && comparePart(e.ip, row.entity.ip) < 0)
		if better {
			e := e
			row.entity, row.value, bestBits = &e, v, bits
		}
	}
	return row
}

// optionsNote renders an entity's options after its value in resolve:
// " (shadow, burst 2s)".
func optionsNote(o model.Options) string {
	var parts []string
	if o.Shadow {
		parts = append(parts, "shadow")
	}
	if o.HasBurst {
		parts = append(parts, "burst "+formatValue(o.Burst)+"s")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
