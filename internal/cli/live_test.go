package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// quotas resolve --admin-url adds the bucket's live rate and utilization
// from Tollgate's HTTP API.
func TestResolveLive(t *testing.T) {
	user, rate := "ANONYMOUS", float64(1<<20)
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &rate}}
		c.Authorization.AllowAnonymousDescribe = true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.DefaultProduceTopic("live"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 100<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	env2 := &Env{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second}
	code := runQuotas(ctx, env2, []string{"resolve", "--bootstrap-server", env.Bootstrap, "--user", "ANONYMOUS",
		"--admin-url", env.App.HTTPAddr()})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "RATE") || !strings.Contains(lines[0], "UTILIZATION") {
		t.Fatalf("no live columns:\n%s", out.String())
	}
	var prod string
	for _, l := range lines {
		if strings.HasPrefix(l, "producer_byte_rate") {
			prod = l
		}
	}
	f := strings.Fields(prod)
	if len(f) < 5 || f[1] != `user=ANONYMOUS` || f[3] == "0/s" || f[3] == "-" || !strings.HasSuffix(f[4], "%") || f[4] == "0.00%" {
		t.Fatalf("producer_byte_rate row %q lacks a live rate:\n%s", prod, out.String())
	}
}
