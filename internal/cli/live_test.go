package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// quotas resolve --admin-url adds the bucket's live rate and utilization
// from Tollgate's HTTP API, and the user's tenant's ceilings.
func TestResolveLive(t *testing.T) {
	user, rate, ceiling := "ANONYMOUS", float64(1<<20), float64(1<<30)
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &rate}}
		c.Tenants = []app.TenantEntry{{Name: "team", Principals: []string{user}, ProducerByteRate: &ceiling}}
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
	if !strings.Contains(out.String(), "ANONYMOUS is bounded by tenant team too (the tightest wins): producer_byte_rate ceiling 1073741824") {
		t.Fatalf("no tenant line:\n%s", out.String())
	}
}

// A shadow quota: resolve marks it and, with --admin-url, says what it
// would have throttled; the producer was not throttled. Removing shadow
// from the apply file is the one change that enforces it.
func TestResolveShadow(t *testing.T) {
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Authorization.QuotaAdmins = []string{"ANONYMOUS"}
	})
	tg := &target{name: "gateway", bootstrap: env.Bootstrap}
	s := newSession(t, tg)
	shadow := s.file("shadow.yaml", "- user: ANONYMOUS\n  producer_byte_rate: 1000\n  shadow: true\n")
	if code := s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--yes", "-f", shadow); code != 0 {
		t.Fatalf("apply: %s", s.out.String())
	}
	hook := &throttles{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.DefaultProduceTopic("shadow"), kgo.AllowAutoTopicCreation(), kgo.WithHooks(hook),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 100<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if hook.n.Load() != 0 {
		t.Errorf("a shadow quota throttled the producer %d times", hook.n.Load())
	}
	s.run("quotas", "resolve", "--bootstrap-server", "$BOOTSTRAP", "--user", "ANONYMOUS", "--admin-url", env.App.HTTPAddr())
	out := s.out.String()
	if !strings.Contains(out, "1000 (shadow)") ||
		!regexp.MustCompile(`producer_byte_rate is in shadow mode: measured, not enforced: would have throttled [0-9.]+ % of [0-9]+ requests, by up to 30s`).MatchString(out) {
		t.Fatalf("resolve output:\n%s", out)
	}
	enforced := s.file("enforced.yaml", "- user: ANONYMOUS\n  producer_byte_rate: 1000\n")
	s.run("quotas", "apply", "--bootstrap-server", "$BOOTSTRAP", "--yes", "-f", enforced)
	if !strings.Contains(s.out.String(), "- user=ANONYMOUS shadow=1\n\nPlan: 0 to add, 0 to change, 1 to remove.\nApplied 1 changes to 1 entities.") {
		t.Fatalf("the switch:\n%s", s.out.String())
	}
	// Enforced from a fresh bucket: 20 KiB is over the 10 000-byte
	// start-up burst, and its own response carries the throttle.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 20<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if hook.n.Load() == 0 {
		t.Error("the enforced quota did not throttle 20 KiB against 1000 B/s")
	}
}

type throttles struct{ n atomic.Int64 }

func (h *throttles) OnBrokerThrottle(kgo.BrokerMetadata, time.Duration, bool) { h.n.Add(1) }
