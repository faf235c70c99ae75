package cli

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const applyFile = `# desired client quotas
- user: alice                 # unchanged
  producer_byte_rate: 1048576
- user: bob                   # one change, one addition
  consumer_byte_rate: 2000
  request_percentage: 25
- user: dave                  # new
  producer_byte_rate: 1048576
- client_id: y
  consumer_byte_rate: 5000
- default_client_id: true
  controller_mutation_rate: 2.5
`

func TestQuotasApply(t *testing.T) {
	bothTargets(t, func(t *testing.T, tg *target) {
		tg.seed(t, map[string]map[string]float64{
			"user=alice":               {"producer_byte_rate": 1048576},
			"user=bob":                 {"consumer_byte_rate": 1000},
			"user=carol":               {"request_percentage": 50},
			"user=<default>":           {"producer_byte_rate": 5000},
			"client-id=x":              {"request_percentage": 50},
			"user=alice,client-id=app": {"producer_byte_rate": 4096},
			"ip=<default>":             {"connection_creation_rate": 100},
		})
		s := newSession(t, tg)
		f := s.file("quotas.yaml", applyFile)
		apply := []string{"quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "-f", f}

		s.note("user and client-id entities are managed: carol, the default user and x lose their keys;")
		s.note("(alice, app) and the default ip are of shapes the file does not manage and stay")
		s.run(append(apply, "--dry-run")...)
		s.note("no --yes and stdin is not a terminal: refused")
		if code := s.run(apply...); code != 1 {
			t.Errorf("apply without a terminal: exit %d, want 1", code)
		}
		s.note("a terminal, and the answer is no")
		s.terminal, s.stdin = true, "n\n"
		s.run(apply...)
		s.terminal, s.stdin = false, ""
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--entity-type", "users")
		s.note("--yes")
		s.run(append(apply, "--yes")...)
		s.run(append(apply, "--dry-run")...)
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--entity-type", "users")
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--entity-type", "clients")
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--entity-type", "users", "--entity-type", "clients")
		s.note("manage: declares a shape without entries; here it clears every ip quota; confirmed at the prompt")
		g := s.file("ips.yaml", "manage: [ip]\nquotas:\n  - ip: 10.0.0.0/8\n    connection_creation_rate: 40\n")
		s.terminal, s.stdin = true, "y\n"
		s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "-f", g)
		s.terminal, s.stdin = false, ""
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--entity-type", "ips")
		s.golden("quotas_apply")
	})
}

func TestQuotasApplyFileErrors(t *testing.T) {
	tg := startCluster(t)
	s := newSession(t, tg)
	apply := func(name, content string) {
		f := s.file(name, content)
		s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--dry-run", "-f", f)
	}
	apply("bad-values.yaml", `
- user: alice
  producer_byte_rate: -1
  consumer_byte_rate: 1000.5
  request_percentage: 0
- ip: 10.0.0.1
  producer_byte_rate: 10
- user: bob
  connection_creation_rate: 3
- ip: 10.0.0.2
  connection_creation_rate: 2.5
`)
	apply("bad-entities.yaml", `
- user: alice
  default_user: true
  producer_byte_rate: 1
- user: ""
  producer_byte_rate: 1
- ip: 10.0.0.1
  user: alice
  connection_creation_rate: 1
- producer_byte_rate: 1
- ip: 10.1.2.3/8
  connection_creation_rate: 1
- client_id: app
- client_id: app
  producer_byte_rat: 1
`)
	apply("duplicate.yaml", `
- user: alice
  producer_byte_rate: 1
- user: alice
  producer_byte_rate: 2
`)
	apply("bad-manage.yaml", "manage: [users]\nquotas: []\n")
	apply("not-a-list.yaml", "user: alice\n")
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP")
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "-f", s.dir+"/missing.yaml")
	s.run("quotas", "frobnicate")
	s.golden("quotas_apply_file_errors")
}

// One AlterClientQuotas request: entities the server rejects are reported
// one by one, the others are applied.
func TestQuotasApplyPartialFailure(t *testing.T) {
	tg := startCluster(t)
	tg.cluster.Fault(kfake.Fault{
		Keys:     []kmsg.Key{kmsg.AlterClientQuotas},
		Resource: "mallory",
		Err:      &kerr.Error{Message: "Quota producer_byte_rate must be greater than 0", Code: kerr.InvalidRequest.Code},
		Count:    -1,
	})
	s := newSession(t, tg)
	f := s.file("quotas.yaml", `
- user: alice
  producer_byte_rate: 1024
- user: mallory
  producer_byte_rate: 1024
- user: trent
  consumer_byte_rate: 1024
`)
	if code := s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--yes", "-f", f); code != 1 {
		t.Errorf("partial failure: exit %d, want 1", code)
	}
	s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--describe", "--entity-type", "users")
	s.golden("quotas_apply_partial_failure")
}

func TestQuotasResolve(t *testing.T) {
	bothTargets(t, func(t *testing.T, tg *target) {
		tg.seed(t, map[string]map[string]float64{
			// producer_byte_rate at all eight levels
			"user=alice,client-id=app":           {"producer_byte_rate": 1},
			"user=alice,client-id=<default>":     {"producer_byte_rate": 2},
			"user=alice":                         {"producer_byte_rate": 3, "consumer_byte_rate": 30},
			"user=<default>,client-id=app":       {"producer_byte_rate": 4},
			"user=<default>,client-id=<default>": {"producer_byte_rate": 5},
			"user=<default>":                     {"producer_byte_rate": 6, "consumer_byte_rate": 60},
			"client-id=app":                      {"producer_byte_rate": 7, "consumer_byte_rate": 70, "request_percentage": 50},
			"client-id=<default>":                {"producer_byte_rate": 8, "consumer_byte_rate": 80, "request_percentage": 20},
			"ip=10.0.0.1":                        {"connection_creation_rate": 5},
			"ip=10.0.0.0/8":                      {"connection_creation_rate": 10},
			"ip=<default>":                       {"connection_creation_rate": 100},
		})
		s := newSession(t, tg)
		resolve := func(args ...string) {
			s.run(append([]string{"quotas", "resolve", "--bootstrap-server", "$BOOTSTRAP"}, args...)...)
		}
		s.note("producer_byte_rate walks the eight levels; consumer_byte_rate has user and client-id levels:")
		s.note("a user-level entity that exists for the user decides the bucket's shape, so client-id quotas lose;")
		s.note("request_percentage has client-id levels only; controller_mutation_rate has none")
		resolve("--user", "alice", "--client-id", "app", "--ip", "10.0.0.1")
		resolve("--user", "alice", "--client-id", "other", "--ip", "10.2.3.4")
		resolve("--user", "bob", "--client-id", "app", "--ip", "192.168.1.1")
		resolve("--user", "bob", "--client-id", "other")
		s.note("no flags: the unauthenticated user (ANONYMOUS) with no client-id")
		resolve()
		resolve("--ip", "::ffff:10.0.0.1", "--client-id", "app")
		s.note("without user-level consumer_byte_rate, client-id quotas apply")
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--alter", "--user", "alice", "--delete-config", "consumer_byte_rate")
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--alter", "--user-defaults", "--delete-config", "consumer_byte_rate")
		resolve("--user", "alice", "--client-id", "app")
		resolve("--user", "alice", "--client-id", "other")
		s.note("without an ip default, an address no entity covers is unlimited")
		s.run("configs", "--bootstrap-server", "$BOOTSTRAP", "--alter", "--ip-defaults", "--delete-config", "connection_creation_rate")
		resolve("--user", "alice", "--ip", "192.168.1.1")
		resolve("--ip", "not-an-ip")
		s.golden("quotas_resolve")
	})
}
