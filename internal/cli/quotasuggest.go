package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/internal/usage"
)

const suggestUsage = `usage: tollgate quotas suggest (--data-dir DIR ... | --usage-topic TOPIC [--bootstrap-server HOST:PORT])
                              [--since 7d] [--until T] [--by user|client-id|user,client-id|tenant]
                              [--percentile 99] [--headroom 20%] [--shadow] [-o FILE]

Proposes byte-rate quotas from real usage: reads the usage ledger's minutes
(docs/usage.md) and, for each user, client-id, (user, client-id) or tenant
with traffic in the window, proposes the producer_byte_rate and the
consumer_byte_rate that would have throttled at most (100 - percentile) %
of its active minutes: its rate at that percentile of its minutes, plus the
headroom. Each proposal says how many minutes it would have throttled.

The output is a quota file for "tollgate quotas apply -f" (with --by tenant,
a tenants: list of ceilings for the config file or "tollgate tenants");
with --shadow each entity is marked shadow: measured, not enforced, so the
proposal can be watched before it is enforced.

The ledger: --data-dir reads a data_dir's ledger (repeat it for each
instance of a Tollgate cluster); --usage-topic reads usage.topic from the
upstream cluster, where every instance's minutes meet. The minutes of all
instances are added up minute by minute: the rate a cluster-wide quota
holds. A minute's rate is its bytes / 60: bursts shorter than a minute are
not seen (the headroom is for them, and shadow mode shows what the quota's
own window would do).

flags:
`

func runSuggest(ctx context.Context, env *Env, args []string, now func() time.Time) int {
	fs := newFlagSet("suggest", suggestUsage, env)
	var (
		conn                                   commonFlags
		dirs                                   stringList
		topic, since, until, by, headroom, out string
		percentile                             float64
		shadow                                 bool
	)
	conn.register(fs)
	fs.Var(&dirs, "data-dir", "a data_dir whose ledger to read (`DIR`; repeat for each instance)")
	fs.StringVar(&topic, "usage-topic", "", "read the minutes of usage.topic `TOPIC` from --bootstrap-server")
	fs.StringVar(&since, "since", "7d", "start: a time `ago` (24h, 7d) or a time")
	fs.StringVar(&until, "until", "", "end: a time `ago` or a time (default now)")
	fs.StringVar(&by, "by", usage.ByUser, "propose per `B`: user, client-id, user,client-id or tenant")
	fs.Float64Var(&percentile, "percentile", 99, "share of each one's active minutes the quota covers, in `percent`")
	fs.StringVar(&headroom, "headroom", "20%", "added above the rate at the percentile (`PCT`: 20% or 20)")
	fs.BoolVar(&shadow, "shadow", false, "mark every proposed entity shadow (measured, not enforced)")
	fs.StringVar(&out, "o", "", "write the file to `FILE` rather than stdout")
	if code, done := parseFlags(fs, env, args); done {
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(env.Stderr, "tollgate quotas suggest:", err)
		return code
	}
	if (len(dirs) == 0) == (topic == "") {
		return fail(2, errors.New("read the ledger from --data-dir DIR (one per instance) or from --usage-topic TOPIC, one of the two"))
	}
	h, err := parsePercent(headroom)
	if err != nil {
		return fail(2, fmt.Errorf("--headroom %w", err))
	}
	uq, err := usageQuery(usage.ByUser, since, until, now())
	if err != nil {
		return fail(2, err)
	}
	q := usage.SuggestQuery{Since: uq.Since, Until: uq.Until, By: by, Percentile: percentile, Headroom: h}
	if err := q.Validate(); err != nil {
		return fail(2, err)
	}
	src := usage.DirMinutes(dirs...)
	if topic != "" {
		cl, _, err := conn.client()
		if err != nil {
			return fail(1, err)
		}
		defer cl.Close()
		tctx, cancel := context.WithTimeout(ctx, env.timeout())
		defer cancel()
		src = topicMinutes(tctx, cl, topic, env)
	}
	ps, err := usage.Suggest(src, q)
	if err != nil {
		return fail(1, err)
	}
	file := renderSuggestion(ps, q, headroom, shadow)
	if out == "" {
		fmt.Fprint(env.Stdout, file)
		return 0
	}
	if err := os.WriteFile(out, []byte(file), 0o644); err != nil {
		return fail(1, err)
	}
	fmt.Fprintf(env.Stdout, "Wrote %s: %d proposals.\n", out, len(ps))
	return 0
}

// stringList is a flag that may be repeated.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// parsePercent reads "20%" or "20" as 0.2.
func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v < 0 || v > 10000 {
		return 0, fmt.Errorf("%q: want a percentage from 0 to 10000, as 20%% or 20", s)
	}
	return v / 100, nil
}

// topicMinutes reads every minute record of the usage topic, from its
// start to the end offsets it has now.
func topicMinutes(ctx context.Context, cl *kgo.Client, topic string, env *Env) usage.MinuteSource {
	return func(fn func(*usage.Minute) error) error {
		ends, err := listEnds(ctx, cl, topic)
		if err != nil {
			return fmt.Errorf("usage topic %s: %w", topic, err)
		}
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: startOffsets(ends)})
		left := 0
		for _, end := range ends {
			if end > 0 {
				left++
			}
		}
		for left > 0 {
			fetches := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("usage topic %s: %w", topic, err)
			}
			var ferr error
			fetches.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				return fmt.Errorf("usage topic %s: %w", topic, ferr)
			}
			var cbErr error
			fetches.EachRecord(func(r *kgo.Record) {
				if r.Offset+1 == ends[r.Partition] {
					left--
				}
				if r.Offset >= ends[r.Partition] || cbErr != nil {
					return
				}
				m, err := usage.ParseMinute(r.Value)
				if err != nil {
					fmt.Fprintf(env.Stderr, "warning: %s/%d@%d: %v (skipped)\n", topic, r.Partition, r.Offset, err)
					return
				}
				cbErr = fn(&m)
			})
			if cbErr != nil {
				return cbErr
			}
		}
		return nil
	}
}

// listEnds is each partition's end offset of topic now.
func listEnds(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := lo.Error(); err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(ends) == 0 {
		return nil, errors.New("no such topic")
	}
	return ends, nil
}

// startOffsets reads every partition of ends from its start.
func startOffsets(ends map[int32]int64) map[int32]kgo.Offset {
	out := map[int32]kgo.Offset{}
	for p := range ends {
		out[p] = kgo.NewOffset().AtStart()
	}
	return out
}

// renderSuggestion writes the proposals as a quota file (a tenants: list
// by tenant), each entity under a comment that says what it rests on.
func renderSuggestion(ps []usage.Proposal, q usage.SuggestQuery, headroom string, shadow bool) string {
	type entry struct {
		node  *yaml.Node
		notes []string
	}
	var order []string
	entries := map[string]*entry{}
	for _, p := range ps {
		var id []string
		for _, f := range []struct {
			key  string
			name *string
		}{{"name", p.Tenant}, {"user", p.User}, {"client_id", p.ClientID}} {
			if f.name != nil {
				id = append(id, f.key, *f.name)
			}
		}
		k := strings.Join(id, "\x00")
		e := entries[k]
		if e == nil {
			e = &entry{node: &yaml.Node{Kind: yaml.MappingNode}}
			for i := 0; i < len(id); i += 2 {
				e.node.Content = append(e.node.Content, scalar(id[i], ""), scalar(id[i+1], "!!str"))
			}
			entries[k] = e
			order = append(order, k)
		}
		e.node.Content = append(e.node.Content, scalar(p.Key, ""), scalar(formatNumber(p.Quota), ""))
		e.notes = append(e.notes, fmt.Sprintf("%s: %d active minutes, p%s %s B/s, peak %s B/s; would have throttled %d (%.1f%%)",
			p.Key, p.Minutes, formatNumber(q.Percentile), formatNumber(round1(p.AtPercentile)), formatNumber(round1(p.Peak)),
			p.ThrottledMinutes, 100*float64(p.ThrottledMinutes)/float64(p.Minutes)))
	}
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, k := range order {
		e := entries[k]
		if shadow {
			e.node.Content = append(e.node.Content, scalar("shadow", ""), scalar("true", "!!bool"))
		}
		e.node.HeadComment = strings.Join(e.notes, "\n")
		list.Content = append(list.Content, e.node)
	}
	section := "quotas"
	if q.By == usage.ByTenant {
		section = "tenants"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Byte-rate quotas proposed from the usage ledger's minutes %s to %s (tollgate quotas suggest):\n",
		q.Since.UTC().Format(time.RFC3339), q.Until.UTC().Format(time.RFC3339))
	fmt.Fprintf(&sb, "# per %s, the rate at the %sth percentile of its active minutes plus %s headroom.\n", q.By, formatNumber(q.Percentile), headroom)
	if section == "tenants" {
		fmt.Fprintln(&sb, "# Tenant ceilings: merge them into the config file's tenants, or set them with tollgate tenants.")
	} else {
		fmt.Fprintln(&sb, "# Apply with tollgate quotas apply -f (in shadow mode first: --shadow).")
	}
	if len(list.Content) == 0 {
		sb.WriteString(section + ": []\n")
		return sb.String()
	}
	b, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{scalar(section, ""), list}})
	if err != nil {
		panic(err) // a tree of scalars always marshals
	}
	sb.Write(b)
	return sb.String()
}

func scalar(v, tag string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Tag: tag} }

func round1(v float64) float64 { return math.Round(v*10) / 10 }
