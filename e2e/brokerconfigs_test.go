package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tollgate's connection limits change live through Kafka's config API,
// like a broker's dynamic configs; keys it does not own still reach the
// upstream cluster, and the answers are merged.
func TestBrokerConfigsLive(t *testing.T) {
	t.Parallel()
	env := startControl(t)
	ctx := ctxT(t, 30*time.Second)
	adm := adminAs(t, env, "127.0.0.2")

	// Incremental: one owned key and one upstream key in one resource.
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.connections.per.ip", Value: kmsg.StringPtr("2")},
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kmsg.StringPtr("123456")},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	got := brokerConfigValues(t, ctx, adm)
	if got["max.connections.per.ip"] != "2" {
		t.Errorf("described max.connections.per.ip = %q, want 2 (all: %v)", got["max.connections.per.ip"], got)
	}
	// The upstream cluster got log.retention.ms but not Tollgate's key.
	direct, err := kgo.NewClient(kgo.SeedBrokers(env.App.DevCluster().Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	upVals := brokerConfigValues(t, ctx, kadm.NewClient(direct))
	if upVals["log.retention.ms"] != "123456" {
		t.Errorf("upstream log.retention.ms = %q, want 123456", upVals["log.retention.ms"])
	}
	if v, ok := upVals["max.connections.per.ip"]; ok && v == "2" {
		t.Errorf("Tollgate's key reached the upstream cluster")
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

	// Delete: back to unlimited; per-IP connections are served again.
	if res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.connections.per.ip"}}); err != nil || res[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, res)
	}
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

	// Legacy AlterConfigs (replace semantics) through a raw request.
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	cfg := kmsg.NewAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "max.connection.creation.rate", kmsg.StringPtr("50")
	r.Configs = append(r.Configs, cfg)
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
}

// brokerConfigValues describes the broker configs through adm: key → value.
func brokerConfigValues(t *testing.T, ctx context.Context, adm *kadm.Client) map[string]string {
	t.Helper()
	desc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{}
	for _, r := range desc {
		for _, c := range r.Configs {
			vals[c.Key] = c.MaybeValue()
		}
	}
	return vals
}
