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

	"github.com/tollgate/tollgate/internal/api"
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
	// Not a Tollgate cluster: nothing about one.
	if strings.Contains(out.String(), "CLUSTER") || strings.Contains(out.String(), "Tollgate cluster") {
		t.Errorf("cluster output outside a cluster:\n%s", out.String())
	}
}

// In a Tollgate cluster (a one-instance one here), quotas resolve
// --admin-url gives the cluster's rate and the instance's own part, and
// lists the instances under the table.
func TestResolveCluster(t *testing.T) {
	user, rate := "ANONYMOUS", float64(1<<20)
	env := testkit.Start(t, app.Options{}, func(c *app.Config) {
		c.Quotas = []app.QuotaEntry{{User: &user, ProducerByteRate: &rate}}
		c.Authorization.AllowAnonymousDescribe = true
		c.Cluster.ID = "cli"
		c.Cluster.InstanceID = "tg-cli"
		c.Cluster.ExchangeInterval = 200 * time.Millisecond
		// Generous: a loaded machine delays reports, and this test is not
		// about being cut off.
		c.Cluster.SessionTimeout = 3 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if st, ok := env.App.Cluster(); ok && st.Live == 1 && st.ConfigLog.Ready {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the instance did not join its Tollgate cluster")
		case <-time.After(20 * time.Millisecond):
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.DefaultProduceTopic("live-cluster"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// This instance's part is its traffic of the last exchange intervals:
	// traffic runs (bounded: 200 records at most) until resolve has asked,
	// which is once the exchange has reported some.
	done := make(chan struct{})
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	go func() {
		defer close(done)
		for i := 0; i < 200 && trafficCtx.Err() == nil; i++ {
			cl.ProduceSync(trafficCtx, &kgo.Record{Value: make([]byte, 10<<10)})
		}
	}()
	for {
		if st, _ := env.App.Cluster(); st.Exchange.Entries > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the exchange reported no traffic")
		case <-time.After(20 * time.Millisecond):
		}
	}
	var out, errb bytes.Buffer
	env2 := &Env{Stdout: &out, Stderr: &errb, Timeout: 20 * time.Second}
	code := runQuotas(ctx, env2, []string{"resolve", "--bootstrap-server", env.Bootstrap, "--user", "ANONYMOUS",
		"--admin-url", env.App.HTTPAddr()})
	stopTraffic()
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Logf("resolve:\n%s", out.String())
	lines := strings.Split(out.String(), "\n")
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "KEY ENTITY VALUE CLUSTER RATE THIS INSTANCE UTILIZATION" {
		t.Fatalf("header %q", lines[0])
	}
	var prod []string
	for _, l := range lines {
		if strings.HasPrefix(l, "producer_byte_rate") {
			prod = strings.Fields(l)
		}
	}
	if len(prod) != 6 || prod[1] != "user=ANONYMOUS" || prod[3] == "0/s" || prod[4] == "0/s" ||
		!strings.HasSuffix(prod[3], "/s") || !strings.HasSuffix(prod[4], "/s") || !strings.HasSuffix(prod[5], "%") {
		t.Fatalf("producer_byte_rate row %q lacks the cluster's rate and this instance's:\n%s", prod, out.String())
	}
	want := "Tollgate cluster cli, as tg-cli sees it: 1 live instance: tg-cli (this instance, admin " + env.App.HTTPAddr() + ")\n"
	if !strings.Contains(out.String(), "%\n"+want) {
		t.Errorf("the line under the table is not %q:\n%s", want, out.String())
	}
}

// What resolve says under its table about a Tollgate cluster in trouble.
func TestClusterLines(t *testing.T) {
	v := api.ClusterStatus{ClusterID: "prod", InstanceID: "tg-a", Live: 2, DigestsDiffer: true}
	v.ConfigLog.Error = "NOT_LEADER_FOR_PARTITION"
	v.Members = []api.ClusterMember{{ID: "tg-a", Version: "1.2.0", Addr: "10.0.0.1:9644", Self: true}, {ID: "tg-b"}}
	got := strings.Join(clusterLines(&v), "\n")
	want := `Tollgate cluster prod, as tg-a sees it: 2 live instances: tg-a (this instance, 1.2.0, admin 10.0.0.1:9644), tg-b
warning: tg-a does not hear the usage exchange (cut off): the others' part of each rate is an estimate
warning: tg-a has not read the shared configuration topic yet: NOT_LEADER_FOR_PARTITION
warning: the instances' config files declare different quotas: a client's quota can depend on the instance it connects to`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
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
