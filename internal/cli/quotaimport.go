package cli

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"gopkg.in/yaml.v3"
)

const importUsage = `usage: tollgate quotas import --from HOST:PORT [--from-command-config FILE] [--scale same|brokers] [-o FILE] [--bootstrap-server HOST:PORT] [--command-config FILE]

Adopts a cluster's own client quotas: reads the quotas its brokers enforce
(DescribeClientQuotas straight to the brokers at --from, with the Kafka
client properties of --from-command-config: Tollgate's upstream
credentials) and writes Tollgate's cluster-wide equivalent of each as a
quota file for "tollgate quotas apply -f".

Kafka enforces a quota on each broker: a client whose partitions lead on k
brokers may take k times the value from the cluster. Tollgate enforces it
once, for the whole cluster. --scale chooses the cluster-wide value:

  same     (default) the broker's value. No client takes more from the
           cluster than it could from one broker before: the safe choice,
           and tighter for a client spread over brokers.
  brokers  the value times the cluster's brokers (N). Nothing is throttled
           that was not before, as if every client were spread over every
           broker; a client on one broker may now take N times more of it.

controller_mutation_rate is never scaled: the one active controller
enforces it for the whole cluster already.

With -o FILE the file is written and the difference to the quotas set on
Tollgate (--bootstrap-server) is printed, as "quotas apply --dry-run" would;
without -o the file goes to stdout. Then the brokers still enforce their
own quotas: remove them (tollgate doctor warns while they are there).

flags:
`

func runImport(ctx context.Context, env *Env, args []string) int {
	fs := newFlagSet("import", importUsage, env)
	var (
		tollgate         commonFlags
		from, fromConfig string
		scale, out       string
	)
	tollgate.register(fs)
	fs.StringVar(&from, "from", "", "the upstream cluster's `brokers`, HOST:PORT[,...] (required)")
	fs.StringVar(&fromConfig, "from-command-config", "", "Kafka client properties `file` for the upstream (security.protocol, sasl.*, ssl.*)")
	fs.StringVar(&scale, "scale", "same", "cluster-wide value of a broker's quota: `same` or brokers (times the brokers)")
	fs.StringVar(&out, "o", "", "write the quota file to `FILE` and print its difference to Tollgate's quotas")
	if code, done := parseFlags(fs, env, args); done {
		return code
	}
	if from == "" {
		fmt.Fprintln(env.Stderr, "tollgate quotas import: --from HOST:PORT (the upstream brokers) is required")
		return 2
	}
	if scale != "same" && scale != "brokers" {
		fmt.Fprintf(env.Stderr, "tollgate quotas import: --scale %q: use same or brokers\n", scale)
		return 2
	}
	upstream := commonFlags{bootstrap: from, commandConfig: fromConfig}
	qs, done, ok := upstream.open(ctx, env, "import")
	if !ok {
		return 1
	}
	md, err := kadm.NewClient(qs.cl).BrokerMetadata(qs.ctx)
	done()
	if err != nil {
		fmt.Fprintln(env.Stderr, "tollgate quotas import: the upstream's brokers:", quotasErr(err, qs.watch, env.timeout()))
		return 1
	}
	brokers := len(md.Brokers)
	imported := scaleQuotas(qs.st, scale, brokers)
	file := renderImport(imported, from, scale, brokers)
	if out == "" {
		fmt.Fprint(env.Stdout, file)
		return 0
	}
	if err := os.WriteFile(out, []byte(file), 0o644); err != nil {
		fmt.Fprintln(env.Stderr, "tollgate quotas import:", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Wrote %s: %d entities from %d brokers (--scale %s).\n", out, len(imported), brokers, scale)
	qf, err := loadQuotaFile(out)
	if err != nil {
		fmt.Fprintln(env.Stderr, "tollgate quotas import: the file written does not load:", err)
		return 1
	}
	cur, done, ok := tollgate.open(ctx, env, "import")
	if !ok {
		return 1
	}
	defer done()
	changes := plan(cur.st, qf)
	if len(changes) == 0 {
		fmt.Fprintln(env.Stdout, "No changes: Tollgate's client quotas already match.")
		return 0
	}
	fmt.Fprintln(env.Stdout)
	printPlan(env, changes)
	fmt.Fprintf(env.Stdout, "Apply it with: tollgate quotas apply --bootstrap-server %s -f %s\n", tollgate.bootstrap, out)
	return 0
}

// scaleQuotas is Tollgate's cluster-wide equivalent of the brokers'
// quotas: each value as is, or times the brokers (not
// controller_mutation_rate, which one controller enforces).
func scaleQuotas(st state, scale string, brokers int) state {
	out := state{}
	for e, vals := range st {
		if e.isTopic() || e.prefix.set {
			continue // not Kafka's entities: none of a broker's own
		}
		m := map[string]float64{}
		for k, v := range vals {
			if scale == "brokers" && k != "controller_mutation_rate" {
				v *= float64(max(brokers, 1))
			}
			if k == "producer_byte_rate" || k == "consumer_byte_rate" {
				v = math.Round(v) // whole bytes, as Kafka takes them
			}
			m[k] = v
		}
		out[e] = m
	}
	return out
}

// renderImport writes st as a quota file, entities in listing order.
func renderImport(st state, from, scale string, brokers int) string {
	entities := make([]entity, 0, len(st))
	for e := range st {
		entities = append(entities, e)
	}
	slices.SortFunc(entities, compareEntities)
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, e := range entities {
		m := &yaml.Node{Kind: yaml.MappingNode}
		add := func(k, v string, tag string) {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k},
				&yaml.Node{Kind: yaml.ScalarNode, Value: v, Tag: tag})
		}
		for _, c := range []struct {
			p         part
			key, dflt string
		}{{e.user, "user", "default_user"}, {e.client, "client_id", "default_client_id"}, {e.ip, "ip", "default_ip"}} {
			switch {
			case !c.p.set:
			case c.p.dflt:
				add(c.dflt, "true", "!!bool")
			default:
				add(c.key, c.p.name, "!!str")
			}
		}
		keys := make([]string, 0, len(st[e]))
		for k := range st[e] {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return keyRank(a) - keyRank(b) })
		for _, k := range keys {
			add(k, formatNumber(st[e][k]), "")
		}
		list.Content = append(list.Content, m)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "quotas"}, list}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		panic(err) // a tree of scalars always marshals
	}
	how := "each broker's value"
	if scale == "brokers" {
		how = fmt.Sprintf("each broker's value times the %d brokers (controller_mutation_rate as is)", brokers)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Tollgate's cluster-wide equivalent of the client quotas the brokers at %s enforce\n", from)
	fmt.Fprintf(&sb, "# (%d brokers): %s (tollgate quotas import --scale %s).\n", brokers, how, scale)
	fmt.Fprintln(&sb, "# Apply with tollgate quotas apply -f, then remove the brokers' own quotas.")
	if len(entities) == 0 {
		sb.WriteString("quotas: []\n")
		return sb.String()
	}
	sb.Write(b)
	return sb.String()
}

// formatNumber writes a quota value as a whole number when it is one.
func formatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
