package e2e

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// A client connection opens its upstream connection at its first
// forwarded request: connections that never send one cost the cluster
// nothing.
func TestIdleConnectionsOpenNoUpstream(t *testing.T) {
	env := testkit.Start(t, app.Options{})
	const metric = `tollgate_upstream_connections_opened_total{listener="PLAINTEXT"}`
	opened := func() float64 { return scrapeMetricOr(t, env, metric, 0) }
	before := opened()
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if !env.Logs.WaitFor("reason=client_closed", 5*time.Second) {
		t.Fatal("the idle connections were not closed")
	}
	if got := opened(); got != before {
		t.Fatalf("5 idle connections opened %v upstream connections", got-before)
	}
	rc := dialSASLConn(t, env.Bootstrap)
	if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatal(err)
	}
	if got := opened(); got != before+1 {
		t.Fatalf("a connection that forwarded ApiVersions opened %v upstream connections, want 1", got-before)
	}
}

// On a listener that terminates SASL, ApiVersions before login is answered
// from the last answer the listener passed for that broker: once a first
// client has logged in, clients that never authenticate open no upstream
// connection at all, and they get the same answer a forwarded request
// gets.
func TestUnauthenticatedClientsOpenNoUpstream(t *testing.T) {
	env, _ := startTerminate(t, map[string]string{"alice": "alice-secret"}, nil)
	const metric = `tollgate_upstream_connections_opened_total{listener="SASL_PLAINTEXT"}`
	opened := func() float64 { return scrapeMetricOr(t, env, metric, 0) }
	ctx := ctxT(t, 30*time.Second)

	// The first ApiVersions on the bootstrap port is forwarded (nothing
	// cached yet); keep its answer.
	first := dialSASLConn(t, env.Bootstrap)
	fwd, err := first.roundTrip(kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if opened() != 1 {
		t.Fatalf("the first ApiVersions opened %v upstream connections, want 1", opened())
	}
	// A real client logs in and produces.
	good := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"),
		kgo.DefaultProduceTopic("lazy"), kgo.AllowAutoTopicCreation())...)
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := opened()

	// Ten clients that ask ApiVersions and fail to log in.
	for i := 0; i < 10; i++ {
		rc := dialSASLConn(t, env.Bootstrap)
		got, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
		if err != nil {
			t.Fatalf("pre-login ApiVersions: %v", err)
		}
		if !reflect.DeepEqual(got, fwd) {
			t.Fatalf("the cached ApiVersions answer differs from the forwarded one:\n%+v\n%+v", got, fwd)
		}
		if hs := rc.handshake(t, 1, "PLAIN"); hs.ErrorCode != 0 {
			t.Fatalf("handshake: %d", hs.ErrorCode)
		}
		if resp := rc.authenticate(t, 1, []byte("\x00alice\x00wrong")); resp.ErrorCode != 58 {
			t.Fatalf("a wrong password was answered %d", resp.ErrorCode)
		}
		rc.expectClosed(t, "after a failed login")
	}
	if got := opened(); got != before {
		t.Fatalf("10 unauthenticated clients opened %v upstream connections, want none", got-before)
	}
	// The good client still works.
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
