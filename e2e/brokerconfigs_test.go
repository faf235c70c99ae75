package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/testkit"
)

// Tollgate's connection limits change live through Kafka's config API,
// like a broker's dynamic configs; keys it does not own still reach the
// upstream cluster, and the answers are merged.
//
// On the real cluster the forwarded half is the broker's: its answers,
// error codes and messages reach the client unchanged, and its dynamic
// configs change through its metadata log, so what it describes is waited
// for (bounded). The cluster is shared: the upstream key set is
// log.retention.ms at the cluster default, at a value no topic notices in a
// test's time (seven days and 123 ms, the default being seven days),
// deleted by the test (and on the cluster straight when it ends, should
// the test stop half-way); the legacy AlterConfigs, which replaces the
// resource's whole dynamic config, names the upstream's own dynamic
// defaults (the real cluster's min.insync.replicas) so that it keeps them.
func TestBrokerConfigsLive(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, brokerConfigsLive)
}

func brokerConfigsLive(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	ctx := ctxT(t, 60*time.Second)
	adm := adminAs(t, env, "127.0.0.2")
	direct := upstreamAdmin(t, env)
	const retention = "604800123"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := direct.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}); err != nil {
			t.Logf("delete the upstream's log.retention.ms: %v", err)
		}
	})

	// Incremental: one owned key and one upstream key in one resource.
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.connections.per.ip", Value: kmsg.StringPtr("2")},
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsg.StringPtr(retention)},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	got := brokerConfigValues(t, ctx, adm)
	if got["max.connections.per.ip"] != "2" {
		t.Errorf("described max.connections.per.ip = %q, want 2 (all: %v)", got["max.connections.per.ip"], got)
	}
	// The upstream cluster got log.retention.ms but not Tollgate's key;
	// the gateway's merged answer shows the upstream's value.
	eventually(t, 15*time.Second, "the upstream's log.retention.ms", func() error {
		upVals := brokerConfigValues(t, ctx, direct)
		if v, ok := upVals["max.connections.per.ip"]; ok && v == "2" {
			t.Fatalf("Tollgate's key reached the upstream cluster")
		}
		if upVals["log.retention.ms"] != retention {
			return fmt.Errorf("upstream log.retention.ms = %q, want %s", upVals["log.retention.ms"], retention)
		}
		if merged := brokerConfigValues(t, ctx, adm); merged["log.retention.ms"] != retention || merged["max.connections.per.ip"] != "2" {
			return fmt.Errorf("through the gateway: log.retention.ms = %q, max.connections.per.ip = %q", merged["log.retention.ms"], merged["max.connections.per.ip"])
		}
		return nil
	})

	// The upstream's refusal of its part passes unchanged: the same
	// (validate-only) request, through the gateway and straight, gets the
	// same code and message, beside Tollgate's key validated in the same
	// resource.
	invalid := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsg.StringPtr("lots")}}
	want, err := direct.ValidateAlterBrokerConfigs(ctx, invalid)
	if err != nil || len(want) != 1 || want[0].Err == nil {
		t.Fatalf("the upstream accepted log.retention.ms=lots: %v %+v", err, want)
	}
	gotBad, err := adm.ValidateAlterBrokerConfigs(ctx, append(invalid, kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("100")}))
	if err != nil || len(gotBad) != 1 || !errors.Is(gotBad[0].Err, want[0].Err) || gotBad[0].ErrMessage != want[0].ErrMessage {
		t.Errorf("through the gateway: %v %+v, want the upstream's %v %q", err, gotBad, want[0].Err, want[0].ErrMessage)
	}

	// The limit is in force: a third connection from one IP is refused.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	served := 0
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if apiVersions(t, c, 3*time.Second) {
			served++
		}
	}
	if served != 2 {
		t.Fatalf("%d of 3 connections from one IP served under max.connections.per.ip=2", served)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	// Invalid values get Kafka's INVALID_CONFIG; non-admins get 31.
	bad, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("lots")}})
	if err != nil || bad[0].Err == nil || !strings.Contains(bad[0].ErrMessage, "Not a number of type INT") {
		t.Errorf("invalid value: %v %+v", err, bad)
	}
	alice := kadm.NewClient(newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.3"))))
	den, err := alice.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.connections", Value: kmsg.StringPtr("5")}})
	if err != nil || den[0].Err == nil || !strings.Contains(den[0].Err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Errorf("non-admin alter: %v %+v", err, den)
	}

	// Delete, split too: back to unlimited, per-IP connections are served
	// again; the upstream's key is gone from the upstream.
	if res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: "max.connections.per.ip"},
		{Op: kadm.DeleteConfig, Name: "log.retention.ms"},
	}); err != nil || res[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, res)
	}
	eventually(t, 15*time.Second, "log.retention.ms deleted upstream", func() error {
		// Gone (Kafka's cluster default lists dynamic defaults only), or
		// back to the default (kfake lists every key).
		if v := brokerConfigValues(t, ctx, direct)["log.retention.ms"]; v == retention {
			return fmt.Errorf("upstream log.retention.ms = %q", v)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the closes above reach the gateway
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if !apiVersions(t, c, 3*time.Second) {
			t.Fatalf("connection %d refused after max.connections.per.ip was deleted", i+1)
		}
	}

	// Legacy AlterConfigs (replace semantics) through a raw request: it
	// names the upstream's dynamic cluster defaults, which it keeps.
	upDefaults := dynamicDefaults(t, ctx, direct)
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	cfg := kmsg.NewAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "max.connection.creation.rate", kmsg.StringPtr("50")
	r.Configs = append(r.Configs, cfg)
	for k, v := range upDefaults {
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, cfg)
	}
	req.Resources = append(req.Resources, r)
	cl := newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.2")))
	aresp, err := req.RequestWith(ctx, cl)
	if err != nil || len(aresp.Resources) != 1 || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, aresp)
	}
	vals := brokerConfigValues(t, ctx, adm)
	if vals["max.connection.creation.rate"] != "50" {
		t.Errorf("after AlterConfigs: max.connection.creation.rate = %q", vals["max.connection.creation.rate"])
	}
	// Every broker applies the change from the metadata log on its own:
	// the one asked may not have it yet.
	eventually(t, 15*time.Second, "the upstream's dynamic defaults kept", func() error {
		if after := dynamicDefaults(t, ctx, direct); !maps.Equal(after, upDefaults) {
			return fmt.Errorf("the upstream's dynamic defaults after AlterConfigs: %v, want %v (and not Tollgate's key)", after, upDefaults)
		}
		return nil
	})
}

// dynamicDefaults are the cluster-wide dynamic broker configs adm's cluster
// describes (source DYNAMIC_DEFAULT_BROKER_CONFIG, not sensitive): key →
// value.
func dynamicDefaults(t *testing.T, ctx context.Context, adm *kadm.Client) map[string]string {
	t.Helper()
	vals, err := describeBrokerConfigs(t, ctx, adm, func(c kadm.Config) bool {
		return c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig && !c.Sensitive
	})
	if err != nil {
		t.Fatalf("describe the cluster default: %v", err)
	}
	return vals
}

// brokerConfigValues describes the broker configs through adm: key → value.
func brokerConfigValues(t *testing.T, ctx context.Context, adm *kadm.Client) map[string]string {
	t.Helper()
	vals, _ := describeBrokerConfigs(t, ctx, adm, func(kadm.Config) bool { return true })
	return vals
}

// describeBrokerConfigs describes the broker configs through adm: key →
// value of those keep takes, and the first error a resource came back with.
func describeBrokerConfigs(t *testing.T, ctx context.Context, adm *kadm.Client, keep func(kadm.Config) bool) (map[string]string, error) {
	t.Helper()
	desc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{}
	var rerr error
	for _, r := range desc {
		if r.Err != nil && rerr == nil {
			rerr = r.Err
		}
		for _, c := range r.Configs {
			if keep(c) {
				vals[c.Key] = c.MaybeValue()
			}
		}
	}
	return vals, rerr
}
