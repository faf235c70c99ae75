package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// The KIP-612 example through Tollgate: kafka-configs' broker-default
// alter of max.connection.creation.rate, then describe.
func TestConfigsBrokers(t *testing.T) {
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
	})
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		e := &Env{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second}
		code := runConfigs(context.Background(), e, append([]string{"--bootstrap-server", env.Bootstrap}, args...))
		return out.String(), errb.String(), code
	}
	out, errs, code := run("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "max.connection.creation.rate=50")
	if code != 0 || out != "Completed updating default config for brokers in the cluster.\n" {
		t.Fatalf("alter: %d %q %q", code, out, errs)
	}
	out, errs, code = run("--entity-type", "brokers", "--entity-default", "--describe")
	// As Kafka's kafka-configs prints it against a broker (the cluster
	// default holds its dynamic configs only: e2e/kafka_configs_test.go).
	want := "Default configs for brokers in the cluster are:\n  max.connection.creation.rate=50 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:max.connection.creation.rate=50}\n"
	if code != 0 || out != want {
		t.Fatalf("describe: %d\n got %q\nwant %q\n%s", code, out, want, errs)
	}
	out, errs, code = run("--entity-type", "brokers", "--entity-default", "--alter", "--delete-config", "max.connection.creation.rate")
	if code != 0 || !strings.Contains(out, "Completed updating default config") {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
	if out, _, _ = run("--entity-type", "brokers", "--entity-default", "--describe"); strings.Contains(out, "max.connection.creation.rate") {
		t.Fatalf("still described after delete: %q", out)
	}
	_, errs, code = run("--entity-type", "brokers", "--entity-name", "x", "--describe")
	if code != 1 || !strings.Contains(errs, "must be a valid integer broker id") {
		t.Fatalf("bad broker id: %d %q", code, errs)
	}
	_, errs, code = run("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "max.connections=many")
	if code != 1 || !strings.Contains(errs, "Not a number of type INT") {
		t.Fatalf("bad value: %d %q", code, errs)
	}
}
