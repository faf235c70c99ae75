package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/testkit"
)

// clientMetricsCommand is kafka-client-metrics' main class
// (bin/kafka-client-metrics.sh), in every release since 3.7.
const clientMetricsCommand = "org.apache.kafka.tools.ClientMetricsCommand"

// Kafka's own kafka-client-metrics (and kafka-configs --entity-type
// client-metrics), unchanged, differentially (issue 21 point 4):
// subscriptions created, altered, listed, described and deleted through
// Tollgate, which owns them (it answers its clients'
// GetTelemetrySubscriptions), print what the same commands print against
// the real broker, Kafka's invalid inputs included.
func TestKafkaClientMetricsAgainstKafka(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, againstTheBroker(clientMetricsDifferential))
}

func clientMetricsDifferential(t *testing.T, up *testkit.Upstream) {
	env := startLoopbackAdmin(t, up)
	p := up.Topic(t, "cm")
	sub, other := p+"-sub", p+"-other"
	cfgMain := configCommand(javaVersion(up))
	rows := []toolRow{
		{name: "create", args: []string{"--alter", "--name", sub, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "1000", "--match", "client_id=" + p + ".*,client_software_name=apache-kafka-java"}},
		{name: "describe", args: []string{"--describe", "--name", sub}},
		{name: "list", args: []string{"--list"}, only: []string{p}},
		{name: "alter the interval", args: []string{"--alter", "--name", sub, "--interval", "2000"}},
		{name: "describe after alter", args: []string{"--describe", "--name", sub}},
		{name: "remove the match", args: []string{"--alter", "--name", sub, "--match", ""}},
		{name: "describe without match", args: []string{"--describe", "--name", sub}},
		{name: "a second, every metric", args: []string{"--alter", "--name", other, "--metrics", "*"}},
		{name: "describe all", args: []string{"--describe"}}, // this test alone makes subscriptions on the cluster
		{name: "kafka-configs: describe", args: []string{cfgMain, "--describe", "--entity-type", "client-metrics", "--entity-name", sub}},
		{name: "kafka-configs: alter", args: []string{cfgMain, "--alter", "--entity-type", "client-metrics", "--entity-name", sub, "--add-config", "interval.ms=5000"}},
		{name: "kafka-configs: describe after alter", args: []string{cfgMain, "--describe", "--entity-type", "client-metrics", "--entity-name", sub}},
		{name: "kafka-configs: delete one", args: []string{cfgMain, "--alter", "--entity-type", "client-metrics", "--entity-name", sub, "--delete-config", "metrics"}},
		{name: "describe after delete one", args: []string{"--describe", "--name", sub}},
		// Kafka's invalid inputs.
		{name: "invalid: interval too short", args: []string{"--alter", "--name", sub, "--interval", "50"}},
		{name: "invalid: interval too long", args: []string{"--alter", "--name", sub, "--interval", "3600001"}},
		{name: "invalid: an unknown match key", args: []string{"--alter", "--name", sub, "--match", "client_colour=red"}},
		{name: "invalid: a match with no value", args: []string{"--alter", "--name", sub, "--match", "client_id="}},
		{name: "invalid: a match that is no regex", args: []string{"--alter", "--name", sub, "--match", "client_id=("}},
		{name: "invalid: an unknown config", args: []string{cfgMain, "--alter", "--entity-type", "client-metrics", "--entity-name", sub, "--add-config", "colour=red"}},
		{name: "invalid: interval not a number", args: []string{cfgMain, "--alter", "--entity-type", "client-metrics", "--entity-name", sub, "--add-config", "interval.ms=often"}},
		{name: "describe an unknown one: nothing", args: []string{"--describe", "--name", p + "-nobody"}},
		{name: "delete", args: []string{"--delete", "--name", sub}},
		{name: "describe after delete: nothing", args: []string{"--describe", "--name", sub}},
		{name: "delete the second", args: []string{"--delete", "--name", other}},
		{name: "list after delete: nothing", args: []string{"--list"}, only: []string{p}},
	}
	// Differences on purpose: none with Kafka 4. Kafka 3.9's broker
	// describes only the configs set, without their synonyms, and answers
	// an interval that is no number UNKNOWN_SERVER_ERROR; Tollgate
	// describes and refuses as Kafka 4 does.
	diffs := map[string]toolDiff{
		// Kafka lists the subscriptions in its map's order.
		"describe all": {"the subscriptions by name", func(o, e string) (string, string) { return kafka4Describe(o), e }},
	}
	if strings.HasPrefix(up.Kafka.Version, "3.") {
		const why = "Kafka 4's describe: every config, defaults included, each set one its own synonym"
		for _, r := range rows {
			if slices.Contains(r.args, "--describe") {
				diffs[r.name] = toolDiff{why, func(o, e string) (string, string) { return kafka4Describe(o), e }}
			}
		}
		diffs["invalid: interval not a number"] = toolDiff{"Kafka 4's error", func(o, e string) (string, string) {
			return o, strings.ReplaceAll(e, "org.apache.kafka.common.errors.UnknownServerException: The server experienced an unexpected error when processing the request.",
				"org.apache.kafka.common.errors.InvalidConfigurationException: Invalid value often for configuration interval.ms: Not a number of type INT")
		}}
	}
	toolsDifferential(t, up, env, clientMetricsCommand, rows, diffs)
}

// kafka4Describe is what the describe output of kafka-client-metrics or
// kafka-configs (--entity-type client-metrics), as printed against Kafka
// 3.9, prints against Kafka 4: kafka-client-metrics lists every config of
// each subscription, defaults included, by name, and the subscriptions by
// name; kafka-configs, which lists the dynamic configs only, shows each
// with its synonym.
func kafka4Describe(out string) string {
	defaults := map[string]string{"interval.ms": "300000", "match": "", "metrics": ""}
	var blocks [][]string // a header line and its configs
	var rest []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Client metrics configs for "):
			blocks = append(blocks, []string{l})
		case strings.HasPrefix(l, "  ") && strings.Contains(l, " synonyms={}"):
			kv, _, _ := strings.Cut(strings.TrimPrefix(l, "  "), " sensitive=")
			rest = append(rest, strings.Replace(l, "synonyms={}", "synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:"+kv+"}", 1))
		case strings.HasPrefix(l, "  ") && len(blocks) > 0:
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], l)
		default:
			rest = append(rest, l)
		}
	}
	if len(blocks) == 0 {
		return strings.Join(rest, "\n")
	}
	slices.SortFunc(blocks, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	var lines []string
	for _, b := range blocks {
		set := map[string]bool{}
		for _, l := range b[1:] {
			k, _, _ := strings.Cut(strings.TrimPrefix(l, "  "), "=")
			set[k] = true
		}
		kvs := b[1:]
		for k, v := range defaults {
			if !set[k] {
				kvs = append(kvs, "  "+k+"="+v)
			}
		}
		slices.Sort(kvs)
		lines = append(append(lines, b[0]), kvs...)
	}
	return strings.Join(append(lines, rest...), "\n")
}
