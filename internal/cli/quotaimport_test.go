package cli

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestQuotasImport: the quotas a 3-broker cluster enforces itself become
// a quota file — the same values, or times the brokers (but
// controller_mutation_rate) — whose difference to Tollgate's quotas is
// printed, which quotas apply then makes Tollgate's.
func TestQuotasImport(t *testing.T) {
	upstream := startCluster(t, kfake.NumBrokers(3))
	upstream.seed(t, map[string]map[string]float64{
		"user=alice":                     {"producer_byte_rate": 1048576, "consumer_byte_rate": 2097152},
		"user=alice,client-id=<default>": {"request_percentage": 50},
		"user=<default>":                 {"producer_byte_rate": 524288},
		"client-id=batch":                {"controller_mutation_rate": 5, "consumer_byte_rate": 1000},
		"ip=10.0.0.7":                    {"connection_creation_rate": 20},
	})
	gw := startGateway(t)
	gw.seed(t, map[string]map[string]float64{
		"user=alice": {"producer_byte_rate": 1},
		"user=bob":   {"producer_byte_rate": 7},
	})
	s := newSession(t, gw)
	from := upstream.bootstrap
	s.note("the brokers' quotas, each broker's value (--scale same)")
	s.run("quotas", "import", "--from", from)
	s.note("times the 3 brokers, written to a file, and its difference to Tollgate's quotas")
	s.run("quotas", "import", "--from", from, "--scale", "brokers", "-o", s.dir+"/imported.yaml", "--bootstrap-server", "$BOOTSTRAP")
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--yes", "-f", s.dir+"/imported.yaml")
	s.run("quotas", "import", "--from", from, "--scale", "brokers", "-o", s.dir+"/again.yaml", "--bootstrap-server", "$BOOTSTRAP")
	s.note("mistakes")
	if code := s.run("quotas", "import", "--from", from, "--scale", "double"); code != 2 {
		t.Errorf("a bad --scale: exit %d, want 2", code)
	}
	if code := s.run("quotas", "import"); code != 2 {
		t.Errorf("no --from: exit %d, want 2", code)
	}
	s.golden("quotas_import")
}
