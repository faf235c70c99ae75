package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/proxy"
)

// The quota-model scenarios (issue "Quotas for how teams really work"):
// one tenant of ten principals under a ceiling, and a client-id prefix
// group of twenty client-ids under one quota, in real time.

const (
	tenantUsers   = 10
	groupClients  = 20
	tenantOwnPart = 0.3 // a principal's own quota, × the tenant's ceiling
)

// groupsSetup adds what the scenarios need to cfg: a SASL_PLAINTEXT
// listener whose API keys log the tenant's principals in, each principal's
// own quota, the tenant, and the prefix group's quota. It returns the
// keys, by principal.
func groupsSetup(cfg *app.Config, dir string) ([]string, []string) {
	var f auth.CredentialFile
	var users, keys []string
	for i := range tenantUsers {
		u := fmt.Sprintf("svc-team-%02d", i)
		plaintext, k, err := auth.NewAPIKey(u)
		if err != nil {
			panic(err)
		}
		users, keys = append(users, u), append(keys, plaintext)
		f.APIKeys = append(f.APIKeys, auth.NewCredentialFileAPIKey(k))
		own := *tenantC * tenantOwnPart
		cfg.Quotas = append(cfg.Quotas, app.QuotaEntry{User: &users[i], ProducerByteRate: &own})
	}
	data, err := f.Marshal()
	if err != nil {
		panic(err)
	}
	cfg.CredentialsFile = filepath.Join(dir, "credentials.yaml")
	if err := os.WriteFile(cfg.CredentialsFile, data, 0o600); err != nil {
		panic(err)
	}
	cfg.Listeners = append(cfg.Listeners, proxy.ListenerConfig{Name: "SASL_PLAINTEXT", SecurityProtocol: "SASL_PLAINTEXT", Bootstrap: "127.0.0.1:0"})
	c := *tenantC
	cfg.Tenants = append(cfg.Tenants, app.TenantEntry{Name: "team", PrincipalPrefixes: []string{"svc-team-"}, ProducerByteRate: &c})
	prefix, gq := "bench-group-", *groupQ
	cfg.Quotas = append(cfg.Quotas, app.QuotaEntry{ClientIDPrefix: &prefix, ProducerByteRate: &gq})
	return users, keys
}

// fullSpeed runs one franz-go producer per client option set at full
// speed for the warm-up and the measured period, and returns each one's
// produce bytes per second over the measured period, as the quota counts
// them.
func fullSpeed(boot, topic string, opts [][]kgo.Opt) []float64 {
	total := *warmup + *measure
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	meters := make([]*meter, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		meters[i] = newMeter()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(boot), kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64 << 10),
			kgo.WithHooks(wireHook{prod: meters[i]})}, o...)...)
		if err != nil {
			panic(err)
		}
		wg.Go(func() {
			defer cl.Close()
			produceLoop(ctx, cl, topic, 8<<10)
		})
	}
	wg.Wait()
	rates := make([]float64, len(meters))
	for i, m := range meters {
		rates[i] = m.over(*warmup, *measure)
	}
	return rates
}

func tenantScenario(saslBoot string, users, keys []string) {
	var opts [][]kgo.Opt
	for i := range users {
		opts = append(opts, []kgo.Opt{kgo.ClientID("bench-tenant"),
			kgo.SASL(plain.Auth{User: "token", Pass: keys[i]}.AsMechanism())})
	}
	rates := fullSpeed(saslBoot, "bench-tenant", opts)
	c, own := *tenantC, *tenantC*tenantOwnPart
	var sum float64
	for _, r := range rates {
		sum += r
	}
	sorted := append([]float64(nil), rates...)
	sort.Float64s(sorted)
	fmt.Printf("## One tenant, %d principals at full speed, ceiling C = %.2f MiB/s, each principal's own quota %.1f C\n\n", len(users), c/(1<<20), tenantOwnPart)
	fmt.Printf("| tenant total ÷ C | principal min ÷ (C/%d) | median | max | max ÷ own quota |\n|---|---|---|---|---|\n", len(users))
	share := c / float64(len(users))
	fmt.Printf("| %.4f | %.4f | %.4f | %.4f | %.4f |\n\n", sum/c, sorted[0]/share, sorted[len(sorted)/2]/share, sorted[len(sorted)-1]/share, sorted[len(sorted)-1]/own)
}

func prefixScenario(boot string) {
	var opts [][]kgo.Opt
	for i := range groupClients {
		opts = append(opts, []kgo.Opt{kgo.ClientID(fmt.Sprintf("bench-group-%02d", i))})
	}
	rates := fullSpeed(boot, "bench-group", opts)
	var sum float64
	for _, r := range rates {
		sum += r
	}
	sort.Float64s(rates)
	fmt.Printf("## A client-id prefix group: %d client-ids at full speed under one quota Q = %.2f MiB/s on bench-group-\n\n", groupClients, *groupQ/(1<<20))
	fmt.Printf("| group total ÷ Q | client-id min ÷ (Q/%d) | median | max |\n|---|---|---|---|\n", groupClients)
	share := *groupQ / groupClients
	fmt.Printf("| %.4f | %.4f | %.4f | %.4f |\n\n", sum / *groupQ, rates[0]/share, rates[len(rates)/2]/share, rates[len(rates)-1]/share)
}
