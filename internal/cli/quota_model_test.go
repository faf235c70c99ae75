package cli

import "testing"

// client-id prefixes, shadow and burst_seconds are Tollgate's (prefixes
// Redpanda's too), so these run against the gateway only: kafka-configs
// style flags, apply files and resolve.
func TestQuotaModelCommands(t *testing.T) {
	tg := startGateway(t)
	s := newSession(t, tg)
	configs := func(args ...string) int {
		return s.run(append([]string{"configs", "--bootstrap-server", "$BOOTSTRAP"}, args...)...)
	}
	s.note("set through the kafka-configs flags: --entity-type client-id-prefixes, or --client-id-prefix")
	configs("--alter", "--entity-type", "client-id-prefixes", "--entity-name", "bar-", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
	configs("--alter", "--client-id-prefix", "bar-etl-", "--add-config", "producer_byte_rate=4096")
	configs("--alter", "--entity-type", "clients", "--entity-name", "bar-vip", "--add-config", "producer_byte_rate=8192")
	configs("--describe", "--entity-type", "client-id-prefixes")
	configs("--describe", "--client-id-prefix", "bar-")
	s.note("a client-id prefix is not a client-id: clients lists only client-ids")
	configs("--describe", "--entity-type", "clients")
	s.note("refused before anything is sent: a default prefix, a prefix with a user, a key of ips")
	if code := configs("--alter", "--entity-type", "client-id-prefixes", "--entity-default", "--add-config", "producer_byte_rate=1"); code != 1 {
		t.Errorf("default prefix: exit %d", code)
	}
	configs("--alter", "--entity-type", "users", "--entity-name", "u", "--entity-type", "client-id-prefixes", "--entity-name", "p", "--add-config", "producer_byte_rate=1")
	configs("--alter", "--client-id-prefix", "p", "--add-config", "connection_creation_rate=1")
	s.note("the server's checks, with its messages")
	configs("--alter", "--client-id-prefix", "p", "--add-config", "producer_byte_rate=1.5")
	configs("--alter", "--client-id-prefix", "bar-etl-", "--delete-config", "producer_byte_rate")

	s.note("resolve: the exact client-id, then the longest prefix, then nothing")
	resolve := func(args ...string) {
		s.run(append([]string{"quotas", "resolve", "--bootstrap-server", "$BOOTSTRAP"}, args...)...)
	}
	resolve("--user", "alice", "--client-id", "bar-vip")
	resolve("--user", "alice", "--client-id", "bar-web-1")
	resolve("--user", "alice", "--client-id", "other")

	s.note("shadow and burst_seconds are keys of the entity, for all its quotas")
	configs("--alter", "--client-id-prefix", "bar-", "--add-config", "shadow=1,burst_seconds=2")
	configs("--describe", "--client-id-prefix", "bar-")
	resolve("--user", "alice", "--client-id", "bar-web-1")
	configs("--alter", "--client-id-prefix", "bar-", "--add-config", "shadow=2")
	configs("--alter", "--client-id-prefix", "bar-", "--add-config", "burst_seconds=-1")
	configs("--alter", "--entity-type", "ips", "--entity-default", "--add-config", "shadow=1")
	s.note("the switch to enforced: delete shadow")
	configs("--alter", "--client-id-prefix", "bar-", "--delete-config", "shadow")
	resolve("--user", "alice", "--client-id", "bar-web-1")

	s.note("apply files take client_id_prefix entries and manage their shape")
	f := s.file("prefixes.yaml", `
- client_id_prefix: "team-a-"
  producer_byte_rate: 1048576
- client_id_prefix: "team-b-"
  consumer_byte_rate: 2097152
  shadow: true
  burst_seconds: 0.5
`)
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--yes", "-f", f)
	configs("--describe", "--entity-type", "client-id-prefixes")
	bad := s.file("bad.yaml", `
- client_id_prefix: ""
  producer_byte_rate: 1
- client_id_prefix: "x-"
  user: alice
  producer_byte_rate: 1
- client_id_prefix: "y-"
  connection_creation_rate: 1
- user: alice
  producer_byte_rate: 1
  burst_seconds: 4000
- ip: 10.0.0.1
  connection_creation_rate: 1
  shadow: true
`)
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--dry-run", "-f", bad)
	s.golden("quota_model")
}

// Per-topic quotas are Tollgate's: set with --on-topic / --on-topic-prefix
// beside the kafka-configs entity flags, described, refused before
// anything is sent, applied from files and resolved with --topic.
func TestTopicQuotaCommands(t *testing.T) {
	tg := startGateway(t)
	s := newSession(t, tg)
	configs := func(args ...string) int {
		return s.run(append([]string{"configs", "--bootstrap-server", "$BOOTSTRAP"}, args...)...)
	}
	s.note("a user's quota on a topic, every client's on a topic prefix, a client-id prefix's on a topic")
	configs("--alter", "--user", "alice", "--on-topic", "orders", "--add-config", "producer_byte_rate=1048576")
	configs("--alter", "--entity-type", "users", "--entity-default", "--on-topic-prefix", "logs-", "--add-config", "consumer_byte_rate=2097152,shadow=1")
	configs("--alter", "--on-topic", "orders", "--add-config", "producer_byte_rate=4194304")
	configs("--alter", "--client-id-prefix", "etl-", "--on-topic", "orders", "--add-config", "producer_byte_rate=524288")
	configs("--alter", "--user", "alice", "--add-config", "producer_byte_rate=8388608")
	s.note("described as kafka-configs describes (strict): every client's quota on orders, alice's on orders; alice's own lists no per-topic one")
	configs("--describe", "--on-topic", "orders")
	configs("--describe", "--user", "alice", "--on-topic", "orders")
	configs("--describe", "--user", "alice")
	s.note("refused before anything is sent")
	configs("--alter", "--on-topic", "a", "--on-topic-prefix", "b", "--add-config", "producer_byte_rate=1")
	configs("--alter", "--client", "app", "--on-topic", "a", "--add-config", "producer_byte_rate=1")
	configs("--alter", "--on-topic", "", "--add-config", "producer_byte_rate=1")
	configs("--alter", "--on-topic", "a", "--add-config", "request_percentage=1")
	s.note("the server's checks")
	configs("--alter", "--on-topic", "a", "--add-config", "producer_byte_rate=0")
	configs("--alter", "--on-topic", "a", "--delete-config", "producer_byte_rate")

	s.note("resolve --topic: the client quotas, then the per-topic quotas on the topic")
	resolve := func(args ...string) {
		s.run(append([]string{"quotas", "resolve", "--bootstrap-server", "$BOOTSTRAP"}, args...)...)
	}
	resolve("--user", "alice", "--client-id", "app", "--topic", "orders")
	resolve("--user", "bob", "--client-id", "etl-1", "--topic", "orders")
	resolve("--user", "bob", "--client-id", "web", "--topic", "logs-web")

	s.note("apply files take topic and topic_prefix entries and manage their shapes")
	f := s.file("topics.yaml", `
- topic: orders
  producer_byte_rate: 2097152
- user: carol
  topic_prefix: "metrics-"
  consumer_byte_rate: 1048576
  burst_seconds: 0
`)
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--dry-run", "-f", f)
	bad := s.file("bad-topics.yaml", `
- topic: ""
  producer_byte_rate: 1
- topic: a
  topic_prefix: b
  producer_byte_rate: 1
- topic: a
  client_id: app
  producer_byte_rate: 1
- topic: a
  user: alice
  client_id_prefix: p
  producer_byte_rate: 1
- topic: a
  controller_mutation_rate: 1
`)
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--dry-run", "-f", bad)
	s.golden("topic_quotas")
}
