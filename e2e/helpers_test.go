package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Helpers that tests across this package share. Helpers of one family stay
// with it: the authentication clients in auth_helpers_test.go, kcat's in
// clients_test.go, the synctest quota clients in quota_synctest_test.go.

// ctxT is a context that ends after d or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func ptrF(f float64) *float64 { return &f }

// Clients.

// franzClient is a franz-go client with opts, closed when the test ends.
func franzClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newClient is a franz-go client of env's bootstrap, dialing through d
// when it is set, closed when the test ends.
func newClient(t *testing.T, env *testkit.Env, d *testkit.Dialer, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(env.Bootstrap)}
	if d != nil {
		base = append(base, kgo.Dialer(d.DialContext))
	}
	return franzClient(t, append(base, opts...)...)
}

// checkDialsGatewayOnly checks that who dialed the bootstrap and the three
// broker ports (four addresses at least) and no address but the gateway's.
func checkDialsGatewayOnly(t *testing.T, who string, env *testkit.Env, dialed []string) {
	t.Helper()
	gw := env.GatewayAddrs()
	sort.Strings(dialed)
	if len(dialed) < 4 {
		t.Errorf("%s dialed %v; expected the bootstrap and 3 broker ports", who, dialed)
	}
	for _, a := range dialed {
		if !gw[a] {
			t.Errorf("%s dialed %s, which is not a gateway address (gateway: %v)", who, a, keys(gw))
		}
	}
}

// keys lists a set's members, sorted, for messages.
func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// The control plane.

// startControl runs a gateway whose principals come from the listener's
// principals_by_cidr: connections from 127.0.0.2 are "admin" (a quota
// admin), from 127.0.0.3 "alice", from anywhere else ANONYMOUS.
func startControl(t *testing.T, edit ...func(*app.Config)) *testkit.Env {
	t.Helper()
	return testkit.Start(t, app.Options{}, append([]func(*app.Config){func(c *app.Config) {
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{
			{CIDR: "127.0.0.2/32", Principal: "admin"},
			{CIDR: "127.0.0.3/32", Principal: "alice"},
		}
		c.Authorization.QuotaAdmins = []string{"admin"}
	}}, edit...)...)
}

// fromIP dials from the local address ip (any of 127.0.0.0/8 works).
func fromIP(ip string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return d.DialContext
}

// adminAs is an admin client connecting from ip (see startControl).
func adminAs(t *testing.T, env *testkit.Env, ip string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, env, nil, kgo.Dialer(fromIP(ip))))
}

// Connections, by hand.

// probeRequest is an ApiVersions v3 request with correlation id 1, what a
// client sends first on a connection.
func probeRequest() []byte {
	var f kmsg.RequestFormatter
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "probe", "1"
	return f.AppendRequest(nil, req, 1)
}

// readFrame reads one size-prefixed frame (a response: correlation id,
// header, body).
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// apiVersions sends one ApiVersions request on c and waits for the answer;
// it reports false if the connection was closed instead.
func apiVersions(t *testing.T, c net.Conn, timeout time.Duration) bool {
	t.Helper()
	if _, err := c.Write(probeRequest()); err != nil {
		return false
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	_, err := readFrame(c)
	return err == nil
}

// dialServed dials addr and checks an ApiVersions is answered on the new
// connection within timeout (what names the connection in the failure);
// the connection is closed when the test ends.
func dialServed(t *testing.T, addr string, timeout time.Duration, what string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !apiVersions(t, c, timeout) {
		t.Fatalf("%s was not served", what)
	}
	return c
}

// servedAfter dials addr in the bubble and returns how long the gateway
// took to serve an ApiVersions on the new connection (an admission park
// shows as a wait).
func servedAfter(t *testing.T, env *testkit.Env, addr string) time.Duration {
	t.Helper()
	c, err := env.Net.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if !apiVersions(t, c, 30*time.Second) {
		t.Fatalf("connection to %s not served", addr)
	}
	return time.Since(start)
}

// expectClosed waits for the gateway to close c, reading whatever it sends
// before.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the gateway did not close the connection")
		}
		return
	}
}

// rawConn speaks the protocol directly, at exactly the version a request
// carries: no client-side negotiation or conversion. roundTrip reports
// errors (a closed connection is an expected outcome in some tests); do
// fails the test on one.
type rawConn struct {
	c    net.Conn
	r    *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
	ctx  context.Context // bounds each exchange, besides its 5 s
}

// dialRaw connects to addr.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	return dialRawVia(t, context.Background(), &net.Dialer{Timeout: 5 * time.Second}, addr)
}

// dialRawVia connects to addr with d (a testkit.Dialer records the
// address); ctx bounds the dial and every exchange.
func dialRawVia(t *testing.T, ctx context.Context, d interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}, addr string) *rawConn {
	t.Helper()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, r: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("tollgate-e2e-raw")), ctx: ctx}
}

// deadline is 5 s from now, or the end of rc.ctx if sooner.
func (rc *rawConn) deadline() time.Time {
	d := time.Now().Add(5 * time.Second)
	if end, ok := rc.ctx.Deadline(); ok && end.Before(d) {
		d = end
	}
	return d
}

func (rc *rawConn) send(req kmsg.Request) error {
	rc.corr++
	rc.c.SetWriteDeadline(rc.deadline())
	_, err := rc.c.Write(rc.f.AppendRequest(nil, req, rc.corr))
	return err
}

// recv reads the response to the last request sent.
func (rc *rawConn) recv(req kmsg.Request) (kmsg.Response, error) {
	rc.c.SetReadDeadline(rc.deadline())
	body, err := readFrame(rc.r)
	if err != nil {
		return nil, err
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != rc.corr {
		return nil, fmt.Errorf("response correlation id mismatch, want %d: % x", rc.corr, body[:min(len(body), 8)])
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		// Response header v1 (ApiVersions always answers with v0): skip
		// the tagged fields.
		n, l := binary.Uvarint(body)
		if l <= 0 {
			return nil, errors.New("bad response header tags")
		}
		body = body[l:]
		for range n {
			_, l1 := binary.Uvarint(body)
			sz, l2 := binary.Uvarint(body[max(l1, 0):])
			if l1 <= 0 || l2 <= 0 || uint64(len(body)) < uint64(l1+l2)+sz {
				return nil, errors.New("bad response header tag")
			}
			body = body[uint64(l1+l2)+sz:]
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return resp, nil
}

func (rc *rawConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	if err := rc.send(req); err != nil {
		return nil, err
	}
	return rc.recv(req)
}

// fetchOne is a Fetch of one partition of topic, by name, from offset: at
// most 1 MiB. The caller sets the version and how long the broker waits.
func fetchOne(topic string, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// do is roundTrip that fails the test on an error.
func (rc *rawConn) do(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := rc.roundTrip(req)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// The gateway's log and metrics.

// logLines returns the log lines containing every one of parts.
func logLines(env *testkit.Env, parts ...string) []string {
	var out []string
	for _, l := range strings.Split(env.Logs.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits (bounded) until a log line contains every one of parts.
func waitLog(t *testing.T, env *testkit.Env, d time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if ls := logLines(env, parts...); len(ls) > 0 {
			return ls[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %v", parts, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrapeMetricOr is scrapeMetric with a value for a sample not exposed
// yet (a labelled counter appears with its first increment).
func scrapeMetricOr(t *testing.T, env *testkit.Env, name string, none float64) float64 {
	t.Helper()
	v, ok := scrapeSample(t, env, name)
	if !ok {
		return none
	}
	return v
}

// scrapeMetric reads one sample from the admin port: an unlabelled name,
// or a name with its exact label set as exposed ({listener="..."}).
func scrapeMetric(t *testing.T, env *testkit.Env, name string) float64 {
	t.Helper()
	v, ok := scrapeSample(t, env, name)
	if !ok {
		t.Fatalf("metric %s not exposed", name)
	}
	return v
}

func scrapeSample(t *testing.T, env *testkit.Env, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + env.App.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f, true
		}
	}
	return 0, false
}

// The upstream, for the tests that run on every upstream
// (testkit.EachUpstream).

// Helpers for the client-family tests: what the upstream itself says, asked directly
// (not through the gateway), so that a test can check that the gateway
// shows the client the upstream's truth — broker ids, the controller, the
// cluster id — whichever cluster it fronts (kfake's brokers are 0..2 and
// its cluster id "tollgate-dev"; the real cluster's are 1..3 and a random
// id).

// upstreamInfo is the upstream's own view of itself.
type upstreamInfo struct {
	// Brokers are the upstream's broker ids.
	Brokers map[int32]bool
	// ClusterID is the upstream's cluster id.
	ClusterID string
}

// upstreamMetadata asks the upstream brokers (env.UpstreamAddrs) for their
// brokers and cluster id.
func upstreamMetadata(t *testing.T, env *testkit.Env) upstreamInfo {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctxT(t, 15*time.Second), cl)
	if err != nil {
		t.Fatalf("upstream metadata: %v", err)
	}
	info := upstreamInfo{Brokers: map[int32]bool{}}
	if resp.ClusterID != nil {
		info.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		info.Brokers[b.NodeID] = true
	}
	if len(info.Brokers) != 3 {
		t.Fatalf("the upstream lists brokers %v, want 3", info.Brokers)
	}
	return info
}

// checkNoUpstreamDials checks that none of dialed is an upstream broker's
// address: the client reached the cluster only through the gateway.
func checkNoUpstreamDials(t *testing.T, who string, env *testkit.Env, dialed []string) {
	t.Helper()
	for _, up := range env.UpstreamAddrs() {
		for _, a := range dialed {
			if a == up {
				t.Errorf("%s dialed upstream broker %s directly", who, up)
			}
		}
	}
}

// Helpers of the control-plane, transaction, TLS and streaming tests.
// startControlOn, the upstream-aware startControl, is with the quota
// tests' helpers below.

// upstreamAdmin is an admin client of the upstream cluster straight, not
// through the gateway: kfake's brokers, or the real cluster's PLAINTEXT
// listeners (ANONYMOUS, a super user there). Closed when the test ends.
func upstreamAdmin(t *testing.T, env *testkit.Env) *kadm.Client {
	t.Helper()
	return kadm.NewClient(franzClient(t, kgo.SeedBrokers(env.UpstreamAddrs()...)))
}

// eventually retries check every 100 ms until it returns nil or d passes,
// then fails the test with its last error. A real cluster applies a config
// change through its metadata log: the broker that answers the next
// request may not have applied it yet (kfake applies it at once).
func eventually(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Helpers of the quota tests.

// freshTopics makes sure none of names exists on a real upstream before the
// test (and deletes them after it): up.Topic's names are the same at every
// run of a test, and an attached cluster (TOLLGATE_KAFKA_CLUSTER) outlives
// the test binary, so a second run would meet the first run's topics —
// TOPIC_ALREADY_EXISTS, or auto-created topics with records in them. The
// topics are deleted on the cluster straight, not through the gateway, so
// that no quota of the test is charged for it. kfake starts empty with
// each gateway: nothing to do.
func freshTopics(t *testing.T, up *testkit.Upstream, names ...string) {
	t.Helper()
	if !up.Real() {
		return
	}
	cl, err := kgo.NewClient(up.Kafka.AdminOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	del := func(ctx context.Context) error {
		resps, err := adm.DeleteTopics(ctx, names...)
		if err != nil {
			return err
		}
		for _, r := range resps {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return r.Err
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := del(ctx); err != nil {
		t.Fatalf("delete %v left by an earlier run: %v", names, err)
	}
	// Deleted in the controller's metadata: wait until no broker names
	// them any more (a create right after could still meet them).
	for {
		td, err := adm.ListTopics(ctx, names...)
		var left []string
		for name, d := range td {
			if d.Err == nil {
				left = append(left, name)
			}
		}
		if err == nil && len(left) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("topics %v still listed after their deletion: %v %v", names, left, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := del(ctx); err != nil {
			t.Logf("delete %v after the test: %v", names, err)
		}
	})
}

// startControlOn is startControl in front of up: connections from
// 127.0.0.2 are "admin" (a quota admin), from 127.0.0.3 "alice", from
// anywhere else ANONYMOUS.
func startControlOn(t *testing.T, up *testkit.Upstream, edit ...func(*app.Config)) *testkit.Env {
	t.Helper()
	return up.Start(t, app.Options{}, append([]func(*app.Config){func(c *app.Config) {
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{
			{CIDR: "127.0.0.2/32", Principal: "admin"},
			{CIDR: "127.0.0.3/32", Principal: "alice"},
		}
		c.Authorization.QuotaAdmins = []string{"admin"}
	}}, edit...)...)
}

// startTerminateOn is startTerminate in front of up: a SASL_PLAINTEXT
// listener terminating the logins of the SCRAM users and API keys (the
// keys' plaintexts returned in the order of keyIdentities).
func startTerminateOn(t *testing.T, up *testkit.Upstream, users map[string]string, keyIdentities []string, edit ...func(*app.Config)) (*testkit.Env, []string) {
	t.Helper()
	creds, keys := writeCredentials(t, users, keyIdentities...)
	env := up.Start(t, app.Options{}, append([]func(*app.Config){func(c *app.Config) {
		c.Listeners[0].Name = "SASL_PLAINTEXT"
		c.Listeners[0].SecurityProtocol = "SASL_PLAINTEXT"
		c.CredentialsFile = creds
	}}, edit...)...)
	return env, keys
}
