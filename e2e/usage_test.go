package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/cli"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/usage"
)

// usageClock is the app's clock in the usage tests: a fixed time a test
// sets, or real time plus an offset a test moves forward (to close the
// current minute once the traffic is done).
type usageClock struct {
	mu    sync.Mutex
	fixed time.Time
	off   time.Duration
}

func (c *usageClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fixed.IsZero() {
		return c.fixed
	}
	return time.Now().Add(c.off)
}

func (c *usageClock) set(t time.Time) { c.mu.Lock(); c.fixed = t; c.mu.Unlock() }

func (c *usageClock) skip(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

// wireCount is what a client wrote and read on its sockets, per API key:
// each frame's size after its 4-byte prefix, as the gateway sees it.
type wireCount struct {
	mu        sync.Mutex
	reqBytes  map[int16]int64
	reqs      map[int16]int64
	respBytes map[int16]int64
	resps     map[int16]int64
}

func newWireCount() *wireCount {
	return &wireCount{reqBytes: map[int16]int64{}, reqs: map[int16]int64{}, respBytes: map[int16]int64{}, resps: map[int16]int64{}}
}

func (w *wireCount) total(m map[int16]int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func (w *wireCount) get(m map[int16]int64, k int16) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return m[k]
}

// dial dials from the local address ip (principals_by_cidr gives each
// client its user) and counts the frames on the connection.
func (w *wireCount) dial(ip string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := fromIP(ip)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &frameCountingConn{Conn: c, w: w, pending: map[int32]int16{}}
		cc.out = testkit.FrameHeads{Head: 12}
		cc.in = testkit.FrameHeads{Head: 8}
		return cc, nil
	}
}

// frameCountingConn splits the client's byte streams into Kafka frames: the
// size prefix, then the request header's key and correlation id (or the
// response's correlation id).
type frameCountingConn struct {
	net.Conn
	w       *wireCount
	mu      sync.Mutex
	pending map[int32]int16 // correlation id → API key
	out, in testkit.FrameHeads
	outMu   sync.Mutex
	inMu    sync.Mutex
}

func (c *frameCountingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.outMu.Lock()
	c.out.Feed(p[:n], c.request)
	c.outMu.Unlock()
	return n, err
}

func (c *frameCountingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.inMu.Lock()
	c.in.Feed(p[:n], c.response)
	c.inMu.Unlock()
	return n, err
}

func (c *frameCountingConn) request(head []byte, size int) {
	key := int16(binary.BigEndian.Uint16(head[4:]))
	corr := int32(binary.BigEndian.Uint32(head[8:]))
	c.mu.Lock()
	c.pending[corr] = key
	c.mu.Unlock()
	c.w.mu.Lock()
	c.w.reqBytes[key] += int64(size)
	c.w.reqs[key]++
	c.w.mu.Unlock()
}

func (c *frameCountingConn) response(head []byte, size int) {
	corr := int32(binary.BigEndian.Uint32(head[4:]))
	c.mu.Lock()
	key, ok := c.pending[corr]
	delete(c.pending, corr)
	c.mu.Unlock()
	if !ok {
		key = -1
	}
	c.w.mu.Lock()
	c.w.respBytes[key] += int64(size)
	c.w.resps[key]++
	c.w.mu.Unlock()
}

// franzHooks are franz-go's own byte counts (frames with their prefix)
// and the throttles it was told.
type franzHooks struct {
	mu       sync.Mutex
	written  map[int16]int64
	read     map[int16]int64
	throttle time.Duration
}

func (h *franzHooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err == nil {
		h.mu.Lock()
		h.written[key] += int64(n - 4)
		h.mu.Unlock()
	}
}

func (h *franzHooks) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err == nil {
		h.mu.Lock()
		h.read[key] += int64(n - 4)
		h.mu.Unlock()
	}
}

func (h *franzHooks) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	h.throttle += d
	h.mu.Unlock()
}

// within1pct reports whether got is within 1 % of want.
func within1pct(got, want int64) bool {
	return math.Abs(float64(got-want)) <= 0.01*float64(want)
}

// waitNoSessions waits until the gateway holds no client connection: every
// request it answered has been reported to the ledger.
func waitNoSessions(t *testing.T, a *app.App) {
	t.Helper()
	for i := 0; a.Gateway().Sessions() > 0; i++ {
		if i == 1000 {
			t.Fatalf("%d client connections still open after the clients closed", a.Gateway().Sessions())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const usageRecord = 1000 // bytes of each record value

// usageValues are n random record values: incompressible, so that a client
// that compresses (franz-go does by default) still sends their size.
func usageValues(n int) [][]byte {
	rnd := rand.New(rand.NewPCG(1, uint64(n)))
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, usageRecord)
		for j := range out[i] {
			out[i][j] = byte(rnd.Uint32())
		}
	}
	return out
}

// franz-go, sarama and kafka-go, each as its own user (principals_by_cidr)
// and client id, produce and consume a known number of bytes through the
// gateway; franz-go also creates, grows and deletes topics and is
// throttled by a producer quota. The ledger's row of each (user,
// client-id) matches what the client wrote and read on its sockets: its
// Produce frames and its Fetch responses, each after the 4-byte size
// prefix (what Kafka's quotas count), within 1 % (exactly, in practice);
// franz-go's own byte counters and throttle sum agree. The admin port
// answers the same report only with a key (production-shaped access), in
// JSON, CSV and as a table, and so does `tollgate usage`, from the port and
// from the data dir; each minute also reached usage.topic once.
func TestUsageLedgerMatchesClients(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, usageLedgerMatchesClients)
}

func usageLedgerMatchesClients(t *testing.T, up *testkit.Upstream) {
	tFranz := up.Topic(t, "usage-franz")
	tSarama := up.Topic(t, "usage-sarama")
	tKafkago := up.Topic(t, "usage-kafkago")
	tScratchID := up.Topic(t, "usage-scratch-id")
	tScratch := up.Topic(t, "usage-scratch")
	tValidate := up.Topic(t, "usage-validate-only")
	tUsage := up.Topic(t, "tollgate-usage")
	credFile, keys := writeCredentials(t, nil, "ops-admin", "reader")
	readerKey := keys[1]
	clock := &usageClock{}
	dataDir := t.TempDir()
	env := up.Start(t, app.Options{Now: clock.Now}, func(c *app.Config) {
		c.DataDir = dataDir
		c.CredentialsFile = credFile
		c.Authorization.QuotaAdmins = []string{"ops-admin"}
		c.Listeners[0].PrincipalsByCIDR = []proxy.CIDRPrincipal{
			{CIDR: "127.0.0.3/32", Principal: "alice"},
			{CIDR: "127.0.0.4/32", Principal: "bob"},
			{CIDR: "127.0.0.5/32", Principal: "carol"},
		}
		alice := "alice"
		c.Quotas = []app.QuotaEntry{{User: &alice, ProducerByteRate: ptrF(9000)}} // a 90 kB burst: ~100 kB are throttled ~1 s
		c.Tenants = []app.TenantEntry{{Name: "retail", Principals: []string{"alice", "bob"}}}
		c.Usage.Topic = tUsage
	})
	ctx := ctxT(t, 90*time.Second)
	const n = 100 // records per client

	// franz-go as alice: topics, mutations, produce (throttled), consume.
	aliceWire, hooks := newWireCount(), &franzHooks{written: map[int16]int64{}, read: map[int16]int64{}}
	franz, err := kgo.NewClient(kgo.SeedBrokers(env.Bootstrap), kgo.Dialer(aliceWire.dial("127.0.0.3")), kgo.ClientID(tFranz),
		kgo.WithHooks(hooks), kgo.DefaultProduceTopic(tFranz), kgo.ConsumeTopics(tFranz),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(franz)
	mustCreate := func(parts int32, topic string) {
		r, err := adm.CreateTopic(ctx, parts, -1, nil, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	mustCreate(3, tFranz)
	mustCreate(2, tSarama)
	mustCreate(1, tKafkago)
	mustCreate(5, tScratch)
	if r, err := adm.UpdatePartitions(ctx, 4, tFranz); err != nil || r.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, r.Error())
	}
	if r, _ := adm.CreateTopic(ctx, 3, -1, nil, tFranz); r.Err == nil {
		t.Fatal("creating an existing topic succeeded")
	}
	if r, err := adm.ValidateCreateTopics(ctx, 7, -1, nil, tValidate); err != nil || r.Error() != nil {
		t.Fatalf("validate-only create: %v %v", err, r.Error())
	}
	if r, err := adm.DeleteTopics(ctx, tScratch); err != nil || r.Error() != nil {
		t.Fatalf("delete topic: %v %v", err, r.Error())
	}
	// A topic deleted by id alone (DeleteTopics v6) counts its partitions
	// like one deleted by name.
	mustCreate(4, tScratchID)
	// A real broker learns of a new topic from the metadata log a moment
	// after the controller made it: ask until one knows its id.
	var byID kadm.TopicDetails
	for deadline := time.Now().Add(15 * time.Second); ; {
		var err error
		if byID, err = adm.ListTopics(ctx, tScratchID); err != nil {
			t.Fatal(err)
		}
		if byID[tScratchID].ID != (kadm.TopicID{}) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 6, 5000
	delTopic := kmsg.NewDeleteTopicsRequestTopic()
	delTopic.TopicID = byID[tScratchID].ID
	del.Topics = append(del.Topics, delTopic)
	// The gateway asks one broker what the id names (reserved.go), which
	// on a real cluster may not know the topic yet: UNKNOWN_TOPIC_ID,
	// which clients retry.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := del.RequestWith(ctx, franz)
		if err == nil && len(r.Topics) == 1 && r.Topics[0].ErrorCode == kerr.UnknownTopicID.Code && time.Now().Before(deadline) {
			continue
		}
		if err != nil || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("delete topic by id: %v %+v", err, r)
		}
		break
	}
	const aliceMutations = 3 + 2 + 1 + 5 + 1 + 5 + 4 + 4 // created, one added, deleted (by name and by id); the refused and validate-only count nothing
	var recs []*kgo.Record
	for _, v := range usageValues(n) {
		recs = append(recs, &kgo.Record{Value: v})
	}
	if err := franz.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce: %v", err)
	}
	for got := 0; got < n; {
		fs := franz.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go consumed %d of %d", got, n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("franz-go fetch %s/%d: %v", tp, p, err) })
		got += fs.NumRecords()
	}
	// No fetch in flight at Close: one the gateway answers (and counts)
	// after franz-go stopped reading would be in the ledger and not in
	// franz-go's counters. Paused, it issues none, and the last long poll
	// (200 ms) is read and dropped.
	franz.PauseFetchTopics(tFranz)
	time.Sleep(time.Second)
	franz.Close()

	// sarama as bob.
	bobWire := newWireCount()
	scfg := saramaConfig(sarama.V3_6_0_0, &testkit.Dialer{})
	scfg.ClientID = tSarama
	scfg.Net.Proxy.Dialer = saramaUsageDialer{bobWire.dial("127.0.0.4")}
	sc, err := sarama.NewClient([]string{env.Bootstrap}, scfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	prod, err := sarama.NewSyncProducerFromClient(sc)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*sarama.ProducerMessage
	for i, v := range usageValues(n) {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: tSarama, Partition: int32(i % 2), Value: sarama.ByteEncoder(v)})
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatalf("sarama produce: %v", err)
	}
	prod.Close()
	cons, err := sarama.NewConsumerFromClient(sc)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		pc, err := cons.ConsumePartition(tSarama, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for got := 0; got < n/2; got++ {
			select {
			case <-pc.Messages():
			case err := <-pc.Errors():
				t.Fatalf("sarama consume: %v", err)
			case <-ctx.Done():
				t.Fatalf("sarama consumed %d of %d of partition %d", got, n/2, p)
			}
		}
		pc.Close()
	}
	cons.Close()
	sc.Close()

	// kafka-go as carol.
	carolWire := newWireCount()
	bg, cancel := context.WithCancel(context.Background())
	tr := &kafka.Transport{Dial: carolWire.dial("127.0.0.5"), DialTimeout: 5 * time.Second, MetadataTTL: 200 * time.Millisecond,
		ClientID: tKafkago, Context: bg}
	w := &kafka.Writer{Addr: kafka.TCP(env.Bootstrap), Topic: tKafkago, Transport: tr, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, BatchSize: 10}
	var kmsgs []kafka.Message
	for _, v := range usageValues(n) {
		kmsgs = append(kmsgs, kafka.Message{Value: v})
	}
	if err := w.WriteMessages(ctx, kmsgs...); err != nil {
		t.Fatalf("kafka-go produce: %v", err)
	}
	w.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{env.Bootstrap}, Topic: tKafkago, Partition: 0, MaxWait: 100 * time.Millisecond,
		Dialer: &kafka.Dialer{DialFunc: carolWire.dial("127.0.0.5"), Timeout: 5 * time.Second, ClientID: tKafkago}})
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; got++ {
		if _, err := r.ReadMessage(ctx); err != nil {
			t.Fatalf("kafka-go consumed %d of %d: %v", got, n, err)
		}
	}
	r.Close()
	tr.CloseIdleConnections()
	cancel()

	// Every connection closed: every answer has been counted. Move the
	// clock into the next minute and write what closed.
	waitNoSessions(t, env.App)
	clock.skip(time.Minute)
	if err := env.App.Usage().Flush(clock.Now()); err != nil {
		t.Fatal(err)
	}
	ledgerDir := filepath.Join(dataDir, "usage")
	rep, err := usage.Read(ledgerDir, usage.Query{Since: time.Now().Add(-time.Hour), Until: clock.Now(), By: usage.ByUserClientID})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]usage.ReportRow{}
	for _, row := range rep.Rows {
		rows[*row.User+"/"+*row.ClientID] = row
	}
	if len(rows) != 3 {
		t.Fatalf("ledger rows %+v, want alice/usage-franz, bob/usage-sarama and carol/usage-kafkago", rep.Rows)
	}
	for _, c := range []struct {
		key       string
		w         *wireCount
		mutations int64
	}{
		{"alice/" + tFranz, aliceWire, aliceMutations},
		{"bob/" + tSarama, bobWire, 0},
		{"carol/" + tKafkago, carolWire, 0},
	} {
		row, ok := rows[c.key]
		if !ok {
			t.Errorf("no ledger row for %s: %+v", c.key, rep.Rows)
			continue
		}
		wantProduce, wantFetch := c.w.get(c.w.reqBytes, int16(kmsg.Produce)), c.w.get(c.w.respBytes, int16(kmsg.Fetch))
		if wantProduce < n*usageRecord || wantFetch < n*usageRecord {
			t.Errorf("%s: the client wrote %d produce bytes and read %d fetch bytes, less than the %d of its records", c.key, wantProduce, wantFetch, n*usageRecord)
		}
		if !within1pct(row.ProduceBytes, wantProduce) || !within1pct(row.FetchBytes, wantFetch) {
			t.Errorf("%s: ledger produce %d fetch %d; the client wrote %d and read %d", c.key, row.ProduceBytes, row.FetchBytes, wantProduce, wantFetch)
		}
		// Requests: every one answered (a too-new ApiVersions the gateway
		// answers before any filter is not), at most every one written.
		lo := c.w.total(c.w.resps) - c.w.get(c.w.resps, int16(kmsg.ApiVersions))
		if hi := c.w.total(c.w.reqs); row.Requests < lo || row.Requests > hi {
			t.Errorf("%s: ledger requests %d; the client read %d answers (ApiVersions aside) and wrote %d requests", c.key, row.Requests, lo, hi)
		}
		if row.PartitionMutations != c.mutations {
			t.Errorf("%s: %d partition mutations, want %d", c.key, row.PartitionMutations, c.mutations)
		}
		t.Logf("%s: ledger %+v; client produce %d fetch %d", c.key, row.Counters, wantProduce, wantFetch)
	}
	alice := rows["alice/"+tFranz]
	hooks.mu.Lock()
	if alice.ProduceBytes != hooks.written[int16(kmsg.Produce)] || alice.FetchBytes != hooks.read[int16(kmsg.Fetch)] {
		t.Errorf("alice: ledger produce %d fetch %d; franz-go's own counters: %d and %d", alice.ProduceBytes, alice.FetchBytes, hooks.written[int16(kmsg.Produce)], hooks.read[int16(kmsg.Fetch)])
	}
	if alice.ThrottleMs == 0 || alice.ThrottleMs != hooks.throttle.Milliseconds() {
		t.Errorf("alice: ledger throttle %d ms; franz-go was told %s in all", alice.ThrottleMs, hooks.throttle)
	}
	hooks.mu.Unlock()
	if rows["bob/"+tSarama].ThrottleMs != 0 || rows["carol/"+tKafkago].ThrottleMs != 0 {
		t.Errorf("unthrottled clients with throttle time: %+v", rep.Rows)
	}

	// The admin port: nothing without a key; the same report with one.
	port := newAdminPort(t, env, nil)
	if code, body := port.call(t, "GET", "/api/v1/usage?since=1h", ""); code != 401 {
		t.Errorf("no key: %d %s", code, body)
	}
	code, body := port.call(t, "GET", "/api/v1/usage?since=1h&by=user,client-id", "", bearer(readerKey)...)
	var api usage.Report
	if err := json.Unmarshal([]byte(body), &api); code != 200 || err != nil {
		t.Fatalf("GET /api/v1/usage: %d %v %s", code, err, body)
	}
	if api.Total != rep.Total || len(api.Rows) != 3 || len(api.Instances) != 1 {
		t.Errorf("API report %+v, want the ledger's %+v", api, rep)
	}
	code, body = port.call(t, "GET", "/api/v1/usage?since=1h&by=user&format=csv", "", bearer(readerKey)...)
	if want := fmt.Sprintf("\nalice,%d,%d,", alice.ProduceBytes, alice.FetchBytes); code != 200 || !strings.Contains(body, want) {
		t.Errorf("csv: %d %s, want a line with %q", code, body, want)
	}
	// By tenant: alice and bob are the tenant "retail" (a tenant with no
	// ceiling, for accounting), carol is in none.
	code, body = port.call(t, "GET", "/api/v1/usage?since=1h&by=tenant", "", bearer(readerKey)...)
	var byTenant usage.Report
	if err := json.Unmarshal([]byte(body), &byTenant); code != 200 || err != nil {
		t.Fatalf("by tenant: %d %v %s", code, err, body)
	}
	tenantBytes := map[string]int64{}
	for _, r := range byTenant.Rows {
		if r.Tenant == nil {
			t.Fatalf("by tenant: a row without its tenant: %s", body)
		}
		tenantBytes[*r.Tenant] += r.ProduceBytes + r.FetchBytes
	}
	var retail, none int64
	for _, r := range rep.Rows {
		if *r.User == "carol" {
			none += r.ProduceBytes + r.FetchBytes
		} else {
			retail += r.ProduceBytes + r.FetchBytes
		}
	}
	if len(tenantBytes) != 2 || tenantBytes["retail"] != retail || tenantBytes[""] != none {
		t.Errorf("by tenant: %v, want retail %d and no tenant %d", tenantBytes, retail, none)
	}

	// tollgate usage, from the port and from the data dir.
	runCLI := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Usage(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := runCLI("--admin-url", env.App.HTTPURL(), "--api-key", readerKey, "--since", "1h", "--by", "user")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("alice  %d", alice.ProduceBytes)) || !strings.Contains(out, "TOTAL") {
		t.Errorf("tollgate usage (table): %d %q\n%s", code, errs, out)
	}
	if code, _, errs := runCLI("--admin-url", env.App.HTTPURL(), "--since", "1h"); code != 1 || !strings.Contains(errs, "HTTP 401") {
		t.Errorf("tollgate usage without a key: %d %q", code, errs)
	}
	code, out, errs = runCLI("--data-dir", dataDir, "--since", "1h", "--by", "user,client-id", "--format", "json")
	var fromDir usage.Report
	if err := json.Unmarshal([]byte(out), &fromDir); code != 0 || err != nil || fromDir.Total != rep.Total {
		t.Errorf("tollgate usage --data-dir: %d %q %v\n%s", code, errs, err, out)
	}
	code, out, _ = runCLI("--data-dir", dataDir, "--since", "1h", "--by", "client-id", "--format", "csv")
	if !strings.Contains(out, fmt.Sprintf("\n%s,false,%d,", tSarama, rows["bob/"+tSarama].ProduceBytes)) {
		t.Errorf("tollgate usage --format csv: %d\n%s", code, out)
	}

	// Each written minute reached usage.topic once, keyed by instance and
	// minute, with the file's line as its value.
	var lines []string
	err = usage.Minutes(ledgerDir, time.Time{}, func(m *usage.Minute, line []byte) error {
		lines = append(lines, env.App.Usage().Instance()+"/"+m.Minute.Format(time.RFC3339)+" "+strings.TrimSuffix(string(line), "\n"))
		return nil
	})
	if err != nil || len(lines) == 0 {
		t.Fatalf("ledger minutes: %v %v", lines, err)
	}
	topicCl, err := kgo.NewClient(kgo.SeedBrokers(env.UpstreamAddrs()...), kgo.ConsumeTopics(tUsage),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer topicCl.Close()
	var got []string
	for len(got) < len(lines) {
		fs := topicCl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("usage.topic: %d records of %d minutes: %v", len(got), len(lines), got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Key)+" "+string(r.Value)) })
	}
	// The topic has several partitions, so records of different minutes
	// come in no set order.
	slices.Sort(got)
	slices.Sort(lines)
	if strings.Join(got, "\n") != strings.Join(lines, "\n") {
		t.Errorf("usage.topic records:\n%s\nwant the ledger's minutes:\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
	}
	if cfg, err := kadm.NewClient(topicCl).DescribeTopicConfigs(ctx, tUsage); err == nil {
		if v, err := cfg.On(tUsage, nil); err == nil {
			for _, c := range v.Configs {
				if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "compact") {
					t.Errorf("usage.topic cleanup.policy %v, want compact", c.MaybeValue())
				}
			}
		}
	}
}

// saramaUsageDialer is sarama's proxy dialer over a counting dial.
type saramaUsageDialer struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (s saramaUsageDialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.dial(ctx, network, addr)
}

// startAt starts Tollgate on dataDir with the clock (the tests that stop
// and start it again cannot use testkit.Start's cleanup).
func startAt(t *testing.T, dataDir string, clock *usageClock, logs io.Writer) *app.App {
	t.Helper()
	cfg := app.Config{
		Listeners:       []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
		Upstream:        app.UpstreamConfig{MetadataRefresh: 200 * time.Millisecond},
		DataDir:         dataDir,
		ShutdownTimeout: 10 * time.Second,
	}
	a, err := app.Start(context.Background(), cfg, app.Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// produceKnown produces n records through a with franz-go and returns the
// Produce bytes it wrote (after each frame's size prefix), once every
// connection is closed.
func produceKnown(t *testing.T, ctx context.Context, a *app.App, n int) int64 {
	t.Helper()
	w := newWireCount()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Bootstrap()), kgo.Dialer(w.dial("127.0.0.1")), kgo.ClientID("restart"),
		kgo.DefaultProduceTopic("restart"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, v := range usageValues(n) {
		recs = append(recs, &kgo.Record{Value: v})
	}
	err = cl.ProduceSync(ctx, recs...).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitNoSessions(t, a)
	return w.get(w.reqBytes, int16(kmsg.Produce))
}

// Stop and start Tollgate on the same data_dir within one minute, with an
// explicit clock: each minute is in the ledger once, the stop wrote the
// open minute, the rest of that minute went into the next, nothing was
// lost, the instance id is the same, and a day past retention was removed
// at start.
func TestUsageRestartExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 60*time.Second)
	dataDir := t.TempDir()
	ledgerDir := filepath.Join(dataDir, "usage")
	t0 := time.Now().UTC().Truncate(time.Minute)
	// A day far past the default 90-day retention.
	old := filepath.Join(ledgerDir, t0.Add(-200*24*time.Hour).Format("2006-01-02")+".jsonl")
	if err := os.MkdirAll(ledgerDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte(`{"v":1,"minute":"`+t0.Add(-200*24*time.Hour).Format(time.RFC3339)+`","instance":"x","rows":[]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tollgate log:\n%s", logs.String())
		}
	})
	clock := &usageClock{}
	clock.set(t0.Add(10 * time.Second))

	a := startAt(t, dataDir, clock, logs)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a day past retention is still there: %v", err)
	}
	id := a.Usage().Instance()
	first := produceKnown(t, ctx, a, 50)
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	clock.set(t0.Add(20 * time.Second)) // the same minute
	a = startAt(t, dataDir, clock, logs)
	if a.Usage().Instance() != id {
		t.Errorf("instance id %q after a restart, was %q", a.Usage().Instance(), id)
	}
	second := produceKnown(t, ctx, a, 30)
	clock.set(t0.Add(70 * time.Second))
	third := produceKnown(t, ctx, a, 20)
	clock.set(t0.Add(2*time.Minute + time.Second))
	if err := a.Usage().Flush(clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	var minutes []time.Time
	var produced []int64
	err := usage.Minutes(ledgerDir, time.Time{}, func(m *usage.Minute, _ []byte) error {
		if m.Instance != id {
			t.Errorf("minute %s of instance %q, want %q", m.Minute, m.Instance, id)
		}
		var p int64
		for _, r := range m.Rows {
			p += r.ProduceBytes
		}
		minutes, produced = append(minutes, m.Minute), append(produced, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(minutes) != 2 || !minutes[0].Equal(t0) || !minutes[1].Equal(t0.Add(time.Minute)) {
		t.Fatalf("minutes %v, want %s and the next, once each", minutes, t0)
	}
	if produced[0] != first || produced[1] != second+third {
		t.Errorf("produce bytes per minute %v, want %d then %d+%d", produced, first, second, third)
	}
}

// Per-topic rows: while a per-topic quota exists (here one that never
// binds, on one topic), the ledger counts each (user, client-id)'s record
// bytes per topic — every topic of the requests the per-topic quotas read
// — which match the record batches a franz-go producer and consumer
// counted; the user's own row still counts everything once.
func TestUsagePerTopic(t *testing.T) {
	t.Parallel()
	clock := &usageClock{}
	dataDir := t.TempDir()
	const counted, other = "usage-topic-counted", "usage-topic-other"
	env := testkit.Start(t, app.Options{Now: clock.Now}, func(c *app.Config) {
		c.DataDir = dataDir
		c.Quotas = []app.QuotaEntry{{Topic: kmsg.StringPtr(counted), ProducerByteRate: ptrF(1 << 30), ConsumerByteRate: ptrF(1 << 30)}}
	})
	ctx := ctxT(t, 60*time.Second)
	written, read := newTopicSeconds(), newTopicSeconds()
	prod := newClient(t, env, nil, kgo.ClientID("usage-topics"), kgo.WithHooks(written), kgo.AllowAutoTopicCreation())
	for i := range 50 {
		v := make([]byte, 1000+i)
		for _, tp := range []string{counted, other} {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: tp, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cons := newClient(t, env, nil, kgo.ClientID("usage-topics"), kgo.WithHooks(read),
		kgo.ConsumeTopics(counted), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	for got := 0; got < 50; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 50", got)
		}
		got += len(fs.Records())
	}
	cons.Close() // no fetch after the count
	produced, fetched := written.sum(counted, 0, time.Hour), read.sum(counted, 0, time.Hour)
	clock.skip(time.Minute)
	if err := env.App.Usage().Flush(clock.Now()); err != nil {
		t.Fatal(err)
	}
	rep, err := usage.Read(filepath.Join(dataDir, "usage"), usage.Query{Since: time.Now().Add(-time.Hour), Until: clock.Now(), By: usage.ByTopic})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]usage.Counters{}
	for _, r := range rep.Rows {
		rows[*r.Topic] = r.Counters
	}
	otherProduced := written.sum(other, 0, time.Hour)
	for _, c := range []struct {
		topic          string
		produce, fetch float64
	}{{counted, produced, fetched}, {other, otherProduced, 0}} {
		row := rows[c.topic]
		t.Logf("%s: ledger produce %d fetch %d; the client's batches %.0f and %.0f", c.topic, row.ProduceBytes, row.FetchBytes, c.produce, c.fetch)
		if c.produce == 0 || float64(row.ProduceBytes) != c.produce || float64(row.FetchBytes) != c.fetch {
			t.Errorf("%s: ledger produce %d fetch %d bytes, want the client's record batches %.0f and %.0f", c.topic, row.ProduceBytes, row.FetchBytes, c.produce, c.fetch)
		}
	}
	if len(rows) != 2 {
		t.Errorf("per-topic rows %v, want the two topics", rows)
	}
	byUser, err := usage.Read(filepath.Join(dataDir, "usage"), usage.Query{Since: time.Now().Add(-time.Hour), Until: clock.Now(), By: usage.ByUser})
	if err != nil || len(byUser.Rows) != 1 || float64(byUser.Rows[0].ProduceBytes) <= produced+otherProduced {
		t.Errorf("by user: %+v %v, want ANONYMOUS's row with both topics' produce requests (more than %.0f bytes)", byUser, err, produced+otherProduced)
	}
}
