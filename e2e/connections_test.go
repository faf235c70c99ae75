package e2e

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/testkit"
)

// A client connection's life in the gateway: its upstream connection is
// opened at its first forwarded request, bad input closes it and no other,
// and a shutdown lets its request in flight finish.

// A client connection opens its upstream connection at its first
// forwarded request: connections that never send one cost the cluster
// nothing.
func TestIdleConnectionsOpenNoUpstream(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, func(t *testing.T, up *testkit.Upstream) { idleConnectionsOpenNoUpstream(t, up.Start(t, app.Options{})) })
}

func idleConnectionsOpenNoUpstream(t *testing.T, env *testkit.Env) {
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
	rc := dialRaw(t, env.Bootstrap)
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
	t.Parallel()
	testkit.EachUpstream(t, unauthenticatedClientsOpenNoUpstream)
}

func unauthenticatedClientsOpenNoUpstream(t *testing.T, up *testkit.Upstream) {
	env, _ := startTerminateOn(t, up, map[string]string{"alice": "alice-secret"}, nil)
	topic := up.Topic(t, "lazy")
	const metric = `tollgate_upstream_connections_opened_total{listener="SASL_PLAINTEXT"}`
	opened := func() float64 { return scrapeMetricOr(t, env, metric, 0) }
	ctx := ctxT(t, 30*time.Second)

	// The first ApiVersions on the bootstrap port is forwarded (nothing
	// cached yet); keep its answer.
	first := dialRaw(t, env.Bootstrap)
	fwd, err := first.roundTrip(kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	if opened() != 1 {
		t.Fatalf("the first ApiVersions opened %v upstream connections, want 1", opened())
	}
	// A real client logs in and produces.
	good := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"),
		kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	good.Close() // its own later connections would count too
	before := opened()

	// Ten clients that ask ApiVersions and fail to log in.
	for i := 0; i < 10; i++ {
		rc := dialRaw(t, env.Bootstrap)
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
		if resp := rc.authenticate(t, 1, []byte("\x00alice\x00wrong")); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("a wrong password was answered %d", resp.ErrorCode)
		}
		rc.expectClosed(t, "after a failed login")
	}
	if got := opened(); got != before {
		t.Fatalf("10 unauthenticated clients opened %v upstream connections, want none", got-before)
	}
	// Good clients still work.
	again := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"),
		kgo.DefaultProduceTopic(topic))...)
	if err := again.ProduceSync(ctx, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// KIP-1242 (ApiVersions v5): a request naming this broker of this cluster
// is answered from the cache; one naming another cluster is the broker's
// to judge, and the broker says REBOOTSTRAP_REQUIRED.
func TestPreLoginApiVersionsV5(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, preLoginApiVersionsV5)
}

func preLoginApiVersionsV5(t *testing.T, up *testkit.Upstream) {
	env, _ := startTerminateOn(t, up, map[string]string{"alice": "alice-secret"}, nil)
	const metric = `tollgate_upstream_connections_opened_total{listener="SASL_PLAINTEXT"}`
	opened := func() float64 { return scrapeMetricOr(t, env, metric, 0) }
	ctx := ctxT(t, 30*time.Second)
	good := franzClient(t, append(franzOpts(env.Bootstrap, nil, "SCRAM-SHA-256", "alice", "alice-secret"),
		kgo.DefaultProduceTopic(up.Topic(t, "v5")), kgo.AllowAutoTopicCreation())...)
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := kadm.NewClient(good).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good.Close() // its own later connections would count too
	b0 := md.Brokers[0]
	addr := net.JoinHostPort(b0.Host, strconv.Itoa(int(b0.Port)))
	// Warm this broker's port: one pre-login ApiVersions v4 is forwarded
	// at most once, then cached.
	v4 := kmsg.NewPtrApiVersionsRequest()
	v4.Version, v4.ClientSoftwareName, v4.ClientSoftwareVersion = 4, "e2e", "1.0"
	warm, err := dialRaw(t, addr).roundTrip(v4)
	if err != nil {
		t.Fatal(err)
	}
	if maxApiVersions(warm.(*kmsg.ApiVersionsResponse)) < 5 {
		// Kafka 3.9: v5 is too new for the broker, and the gateway answers
		// it as a broker does (KIP-511: UNSUPPORTED_VERSION in a v0 body,
		// with the versions it takes), without a dial.
		before := opened()
		rc := dialRaw(t, addr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 5, "e2e", "1.0"
		req.ClusterID, req.NodeID = &md.Cluster, b0.NodeID
		if err := rc.send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := rc.recv(kmsg.NewPtrApiVersionsRequest()) // read as v0
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != kerr.UnsupportedVersion.Code || maxApiVersions(r) != maxApiVersions(warm.(*kmsg.ApiVersionsResponse)) || opened() != before {
			t.Errorf("v5 to a broker that takes v%d at most: error %d, ApiVersions up to v%d, %v upstream dials; want UNSUPPORTED_VERSION, v%[1]d, none", maxApiVersions(warm.(*kmsg.ApiVersionsResponse)), r.ErrorCode, maxApiVersions(r), opened()-before)
		}
		return
	}
	ask := func(cluster string, node int32) (*kmsg.ApiVersionsResponse, float64) {
		t.Helper()
		before := opened()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 5, "e2e", "1.0"
		req.ClusterID, req.NodeID = &cluster, node
		resp, err := dialRaw(t, addr).roundTrip(req)
		if err != nil {
			t.Fatalf("ApiVersions v5 (%s, %d): %v", cluster, node, err)
		}
		return resp.(*kmsg.ApiVersionsResponse), opened() - before
	}
	if resp, dials := ask(md.Cluster, b0.NodeID); resp.ErrorCode != 0 || dials != 0 || len(resp.ApiKeys) == 0 {
		t.Errorf("v5 naming this broker and cluster: error %d, %d keys, %v upstream dials; want an answer from the cache", resp.ErrorCode, len(resp.ApiKeys), dials)
	}
	if resp, dials := ask("another-cluster", b0.NodeID); resp.ErrorCode != kerr.RebootstrapRequired.Code || dials != 1 {
		t.Errorf("v5 naming another cluster: error %d, %v upstream dials; want the broker's REBOOTSTRAP_REQUIRED (129)", resp.ErrorCode, dials)
	}
}

// On every listener a client that has only sent ApiVersions holds no
// upstream connection: after the listener's first client, ApiVersions is
// answered from the last answer it passed for that broker (the same
// answer). When such a client sends its first real request, the session
// dials and replays the client's own ApiVersions first, so the broker still
// sees its KIP-511 software name and version. (Issue "Hold up at scale",
// point 1.)
func TestApiVersionsOnlyClientsHoldNoUpstream(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	var mu sync.Mutex
	var names []string
	env.App.DevCluster().ControlKey(18, func(req kmsg.Request) (kmsg.Response, error, bool) {
		env.App.DevCluster().KeepControl()
		mu.Lock()
		// Tollgate's own clients (its metadata refresh, the usage ledger)
		// are franz-go with its default name; only the tenants' count here.
		if name := req.(*kmsg.ApiVersionsRequest).ClientSoftwareName; name != "kgo" {
			names = append(names, name)
		}
		mu.Unlock()
		return nil, nil, false // observe only
	})
	const metric = `tollgate_upstream_connections_opened_total{listener="PLAINTEXT"}`
	opened := func() float64 { return scrapeMetricOr(t, env, metric, 0) }
	named := func() *kmsg.ApiVersionsRequest {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version, r.ClientSoftwareName, r.ClientSoftwareVersion = 3, "tollgate-e2e-idle", "1.0"
		return r
	}

	first := dialRaw(t, env.Bootstrap) // primes the cache
	fwd, err := first.roundTrip(named())
	if err != nil {
		t.Fatal(err)
	}
	before := opened()
	var idle []*rawConn
	for i := 0; i < 20; i++ {
		rc := dialRaw(t, env.Bootstrap)
		got, err := rc.roundTrip(named())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, fwd) {
			t.Fatalf("the cached ApiVersions answer differs from the forwarded one:\n%+v\n%+v", got, fwd)
		}
		idle = append(idle, rc)
	}
	if got := opened(); got != before {
		t.Fatalf("20 clients that only sent ApiVersions opened %v upstream connections, want none", got-before)
	}

	// One of them asks for metadata: it dials, and the broker hears its
	// ApiVersions first.
	mu.Lock()
	seen := len(names)
	mu.Unlock()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	if _, err := idle[0].roundTrip(md); err != nil {
		t.Fatal(err)
	}
	if got := opened(); got != before+1 {
		t.Fatalf("the first Metadata opened %v upstream connections, want 1", got-before)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != seen+1 || names[seen] != "tollgate-e2e-idle" {
		t.Fatalf("the broker saw ApiVersions from %q after the dial, want the client's own (tollgate-e2e-idle)", names[seen:])
	}
}

// maxApiVersions is the highest ApiVersions version resp lists.
func maxApiVersions(resp *kmsg.ApiVersionsResponse) int16 {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.ApiVersions) {
			return k.MaxVersion
		}
	}
	return -1
}

// Each kind of bad input closes only its own connection, with a log line
// that says why, while a well-behaved client keeps producing.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	t.Parallel()
	env := testkit.Start(t, app.Options{})
	ctx := ctxT(t, 60*time.Second)
	good := newClient(t, env, nil, kgo.DefaultProduceTopic("steady"), kgo.AllowAutoTopicCreation())
	produce := func(step string) {
		t.Helper()
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte(step)}).FirstErr(); err != nil {
			t.Fatalf("after %s: the good client could not produce: %v", step, err)
		}
	}
	produce("start")

	frame := func(payload []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(payload))) // size prefix
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	// A Produce v7 whose body stops inside the transactional id.
	truncatedProduce := append(header(0, 7), 0x00, 0x10, 'a')

	cases := []struct {
		name   string
		send   []byte
		reason string
	}{
		{"frame over socket.request.max.bytes", binary.BigEndian.AppendUint32(nil, 104857601), "reason=frame_too_large"},
		{"negative length", binary.BigEndian.AppendUint32(nil, 0xfffffff0), "reason=malformed_frame"},
		{"garbage bytes", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "reason=frame_too_large"},
		{"unknown API key", append(frame(header(200, 0)), header(200, 0)...), "reason=unknown_api_key"},
		{"negative API key", append(frame(header(-3327, 0)), header(-3327, 0)...), "reason=unknown_api_key"},
		{"version newer than the gateway parses", append(frame(header(3, 99)), header(3, 99)...), "reason=unsupported_version"},
		{"frame shorter than a header", append(frame([]byte{0, 3, 0}), 0, 3, 0), "reason=malformed_frame"},
		{"unparseable produce", append(frame(truncatedProduce), truncatedProduce...), "reason=malformed_frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", env.Bootstrap)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			if !env.Logs.WaitFor(tc.reason, 5*time.Second) {
				t.Errorf("no log line with %q", tc.reason)
			}
			produce(tc.name)
		})
	}

	t.Run("TLS hello on the plaintext port", func(t *testing.T) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", env.Bootstrap, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			t.Fatal("TLS handshake succeeded against a plaintext listener")
		}
		if !env.Logs.WaitFor("reason=tls_on_plaintext", 5*time.Second) {
			t.Error("no log line with reason=tls_on_plaintext")
		}
		produce("tls")
	})

	t.Run("too-new ApiVersions gets the KIP-511 answer", func(t *testing.T) {
		c, err := net.Dial("tcp", env.Bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 9 // newer than anything kmsg knows
		var f kmsg.RequestFormatter
		// The formatter needs a version it can encode; v9 has v3+'s layout.
		b := f.AppendRequest(nil, req, 42)
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		body, err := readFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(body)); corr != 42 {
			t.Fatalf("correlation id %d, want 42", corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body[4:]); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != int16(kmsg.ApiVersions) || resp.ApiKeys[0].MaxVersion != 5 {
			t.Fatalf("got %+v, want error 35 and [{18 0 5}]", resp)
		}
	})
}

// Shutdown stops accepting at once but lets a request already in flight (a
// long-polling fetch) get its response.
func TestShutdownFinishesInFlight(t *testing.T) {
	// Not parallel: bounds the shutdown's wall time.
	testkit.EachUpstream(t, shutdownFinishesInFlight)
}

func shutdownFinishesInFlight(t *testing.T, up *testkit.Upstream) {
	env := up.Start(t, app.Options{})
	ctx := ctxT(t, 30*time.Second)
	drain := up.Topic(t, "drain")
	cl := newClient(t, env, nil, kgo.DefaultProduceTopic(drain), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var leader int32 = -1
	for _, tp := range md.Topics {
		if tp.Topic != nil && *tp.Topic == drain {
			leader = tp.Partitions[0].Leader
		}
	}
	fetch := fetchOne(drain, 0, 1)
	fetch.MaxWaitMillis = 1500
	fetch.MinBytes = 1 << 20 // more than there is: the broker waits the full 1.5 s
	fetch.Version = 11       // by topic name

	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := cl.Broker(int(leader)).Request(ctx, fetch)
		done <- result{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // let the fetch reach the broker

	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- env.App.Stop(context.Background()) }()
	// New connections are refused promptly.
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", env.Bootstrap, 200*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the gateway still accepts connections during shutdown")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("in-flight fetch failed during shutdown: %v", r.err)
	}
	if fr := r.resp.(*kmsg.FetchResponse); fr.ErrorCode != 0 || len(fr.Topics) != 1 {
		t.Fatalf("in-flight fetch got %+v", fr)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Fatalf("shutdown took %v", el)
	}
}
