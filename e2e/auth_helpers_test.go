package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kgsasl "github.com/segmentio/kafka-go/sasl"
	kgplain "github.com/segmentio/kafka-go/sasl/plain"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"

	"github.com/tollgate/tollgate/internal/app"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/testkit"
)

// Helpers shared by the authentication tests (auth_*_test.go).

// startTerminate runs a SASL_PLAINTEXT listener that terminates SASL
// against a credentials file holding users (name → password) and one API
// key per entry of keyIdentities, whose plaintexts it returns.
func startTerminate(t *testing.T, users map[string]string, keyIdentities []string, edit ...func(*app.Config)) (*testkit.Env, []string) {
	t.Helper()
	testkit.SkipIfRealOnly(t)
	return startTerminateOn(t, &testkit.Upstream{Name: "kfake"}, users, keyIdentities, edit...)
}

// writeCredentials writes a credentials file with SCRAM users and API keys
// and returns its path and the API keys' plaintexts.
func writeCredentials(t *testing.T, users map[string]string, keyIdentities ...string) (string, []string) {
	t.Helper()
	var f auth.CredentialFile
	for name, pass := range users {
		u, err := auth.NewCredentialFileUser(name, pass, 4096)
		if err != nil {
			t.Fatal(err)
		}
		f.Users = append(f.Users, u)
	}
	var keys []string
	for _, id := range keyIdentities {
		plaintext, k, err := auth.NewAPIKey(id)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, plaintext)
		f.APIKeys = append(f.APIKeys, auth.NewCredentialFileAPIKey(k))
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "credentials.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, keys
}

// authMechanisms are the SASL mechanisms Tollgate terminates.
var authMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// franzMechanism is franz-go's client side of mech.
func franzMechanism(mech, user, pass string) sasl.Mechanism {
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
	panic("unknown mechanism " + mech)
}

// kafkaGoMechanism is kafka-go's client side of mech.
func kafkaGoMechanism(t *testing.T, mech, user, pass string) kgsasl.Mechanism {
	t.Helper()
	switch mech {
	case "PLAIN":
		return kgplain.Mechanism{Username: user, Password: pass}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		algo := kgscram.SHA256
		if mech == "SCRAM-SHA-512" {
			algo = kgscram.SHA512
		}
		m, err := kgscram.Mechanism(algo, user, pass)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Fatalf("unknown mechanism %s", mech)
	return nil
}

// xdgSCRAMClient is sarama's SCRAMClient on xdg-go/scram (the
// implementation sarama's own examples use).
type xdgSCRAMClient struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (x *xdgSCRAMClient) Begin(user, pass, authzID string) error {
	c, err := x.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAMClient) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAMClient) Done() bool                            { return x.conv.Done() }

// saramaSASL turns on SASL (handshake v1) with mech in cfg.
func saramaSASL(cfg *sarama.Config, mech, user, pass string) {
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, pass
	switch mech {
	case "PLAIN":
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-256":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAMClient{hash: xdgscram.SHA256} }
	case "SCRAM-SHA-512":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAMClient{hash: xdgscram.SHA512} }
	}
}

// authClient is one client library driven through an authenticated
// listener: it produces n records to partition 0 of topic and reads them
// back.
type authClient struct {
	name string
	run  func(t *testing.T, ctx context.Context, bootstrap string, tc *tls.Config, mech, user, pass, topic string, n int)
}

var authClients = []authClient{
	{"franz-go", franzProduceConsume},
	{"sarama", saramaProduceConsume},
	{"kafka-go", kafkaGoProduceConsume},
}

func authValues(topic string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", topic, i)
	}
	return out
}

func checkValues(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s read back %d records %q, want %d %q", what, len(got), got, len(want), want)
	}
}

// franzOpts are the franz-go options to reach bootstrap with mech (none
// when ""), and TLS when tc is set.
func franzOpts(bootstrap string, tc *tls.Config, mech, user, pass string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.RetryTimeout(10 * time.Second)}
	if mech != "" {
		opts = append(opts, kgo.SASL(franzMechanism(mech, user, pass)))
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts
}

// createAuthTopics creates single-partition topics through the gateway as
// an authenticated franz-go admin.
func createAuthTopics(t *testing.T, ctx context.Context, opts []kgo.Opt, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, 1, -1, nil, topics...)
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			t.Fatalf("create topic %s: %v", r.Topic, r.Err)
		}
	}
}

func franzProduceConsume(t *testing.T, ctx context.Context, bootstrap string, tc *tls.Config, mech, user, pass, topic string, n int) {
	opts := franzOpts(bootstrap, tc, mech, user, pass)
	prod := franzClient(t, append(opts, kgo.DefaultProduceTopic(topic))...)
	want := authValues(topic, n)
	var recs []*kgo.Record
	for _, v := range want {
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("franz-go %s produce: %v", mech, err)
	}
	cons := franzClient(t, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("franz-go %s: consumed %d of %d: %v", mech, len(got), n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("franz-go %s fetch %s/%d: %v", mech, tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	checkValues(t, "franz-go "+mech, got, want)
}

func saramaProduceConsume(t *testing.T, ctx context.Context, bootstrap string, tc *tls.Config, mech, user, pass, topic string, n int) {
	cfg := saramaConfig(sarama.V3_6_0_0, &testkit.Dialer{})
	cfg.ClientID = "tollgate-e2e-sarama-auth"
	saramaSASL(cfg, mech, user, pass)
	if tc != nil {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	client, err := sarama.NewClient([]string{bootstrap}, cfg)
	if err != nil {
		t.Fatalf("sarama %s client: %v", mech, err)
	}
	defer client.Close()
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatalf("sarama %s producer: %v", mech, err)
	}
	want := authValues(topic, n)
	var msgs []*sarama.ProducerMessage
	for _, v := range want {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)})
	}
	if err := prod.SendMessages(msgs); err != nil {
		prod.Close()
		t.Fatalf("sarama %s produce: %v", mech, err)
	}
	if err := prod.Close(); err != nil {
		t.Fatalf("sarama %s producer close: %v", mech, err)
	}
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("sarama %s consumer: %v", mech, err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama %s consume partition: %v", mech, err)
	}
	defer pc.Close()
	var got []string
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("sarama %s consume: %v", mech, err)
		case <-ctx.Done():
			t.Fatalf("sarama %s: consumed %d of %d: %v", mech, len(got), n, ctx.Err())
		}
	}
	checkValues(t, "sarama "+mech, got, want)
}

func kafkaGoProduceConsume(t *testing.T, ctx context.Context, bootstrap string, tc *tls.Config, mech, user, pass, topic string, n int) {
	m := kafkaGoMechanism(t, mech, user, pass)
	bg, cancel := context.WithCancel(context.Background())
	tr := &kafka.Transport{
		DialTimeout: 5 * time.Second,
		MetadataTTL: 200 * time.Millisecond,
		ClientID:    "tollgate-e2e-kafkago-auth",
		Context:     bg,
		SASL:        m,
		TLS:         tc,
	}
	defer func() {
		tr.CloseIdleConnections()
		cancel()
	}()
	w := &kafka.Writer{Addr: kafka.TCP(bootstrap), Topic: topic, Transport: tr, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 }), BatchTimeout: time.Millisecond}
	want := authValues(topic, n)
	var msgs []kafka.Message
	for _, v := range want {
		msgs = append(msgs, kafka.Message{Value: []byte(v)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		t.Fatalf("kafka-go %s produce: %v", mech, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("kafka-go %s writer close: %v", mech, err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   []string{bootstrap},
		Topic:     topic,
		Partition: 0,
		MaxWait:   100 * time.Millisecond,
		Dialer:    &kafka.Dialer{Timeout: 5 * time.Second, SASLMechanism: m, TLS: tc, ClientID: "tollgate-e2e-kafkago-auth"},
	})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < n {
		msg, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go %s: consumed %d of %d: %v", mech, len(got), n, err)
		}
		got = append(got, string(msg.Value))
	}
	checkValues(t, "kafka-go "+mech, got, want)
}

// runAuthMatrix runs every client library with every mechanism through
// bootstrap as user, each on a topic of its own.
func runAuthMatrix(t *testing.T, ctx context.Context, bootstrap, user, pass string) {
	runAuthMatrixTopics(t, ctx, bootstrap, user, pass, "auth")
}

// runAuthMatrixTopics is runAuthMatrix with topics named prefix-client-mech
// (a test of its own on the shared real cluster: Upstream.Topic).
func runAuthMatrixTopics(t *testing.T, ctx context.Context, bootstrap, user, pass, prefix string) {
	var topics []string
	topicOf := func(client, mech string) string { return strings.ToLower(prefix + "-" + client + "-" + mech) }
	for _, c := range authClients {
		for _, mech := range authMechanisms {
			topics = append(topics, topicOf(c.name, mech))
		}
	}
	createAuthTopics(t, ctx, franzOpts(bootstrap, nil, "SCRAM-SHA-256", user, pass), topics...)
	for _, c := range authClients {
		for _, mech := range authMechanisms {
			t.Run(c.name+"/"+mech, func(t *testing.T) {
				start := time.Now()
				c.run(t, ctx, bootstrap, nil, mech, user, pass, topicOf(c.name, mech), 20)
				t.Logf("%s %s: produced and consumed 20 records in %v", c.name, mech, time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// usageUsers returns, for quota key k, every live bucket's user tag with
// its client-id tag.
func usageUsers(env *testkit.Env, k model.Key) map[string][]string {
	out := map[string][]string{}
	for _, u := range env.App.Engine().Usage(time.Now()) {
		if u.Key == k {
			out[u.User] = append(out[u.User], u.ClientID)
		}
	}
	return out
}

// auditLines reads the JSON audit log, one event per line, keeping each
// raw line next to its decoded form.
func auditLines(t *testing.T, path string) (raw []string, events []map[string]any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if l == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("audit line is not JSON: %s", l)
		}
		raw = append(raw, l)
		events = append(events, ev)
	}
	return raw, events
}

// SASL by hand on a rawConn (helpers_test.go).

func (rc *rawConn) handshake(t *testing.T, version int16, mech string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mech
	resp, err := rc.roundTrip(req)
	if err != nil {
		t.Fatalf("SaslHandshake v%d %s: %v", version, mech, err)
	}
	return resp.(*kmsg.SASLHandshakeResponse)
}

func saslAuthenticate(version int16, b []byte) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, b
	return req
}

func (rc *rawConn) authenticate(t *testing.T, version int16, b []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	resp, err := rc.roundTrip(saslAuthenticate(version, b))
	if err != nil {
		t.Fatalf("SaslAuthenticate v%d: %v", version, err)
	}
	return resp.(*kmsg.SASLAuthenticateResponse)
}

// expectClosed asserts that the gateway closes the connection (EOF or
// reset, not a timeout) within 3 s, with no further response.
func (rc *rawConn) expectClosed(t *testing.T, what string) {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := rc.r.Read(make([]byte, 64))
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("%s: the gateway sent %d more bytes instead of closing", what, n)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: the gateway did not close the connection", what)
	}
}

// checkMetadataBeforeAuth sends Metadata on rc before any authentication:
// the gateway (SASL handled as what says) must close the connection
// unanswered and log why.
func checkMetadataBeforeAuth(t *testing.T, env *testkit.Env, rc *rawConn, what string) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	if resp, err := rc.roundTrip(md); err == nil {
		t.Fatalf("%s: Metadata before authentication was answered: %+v", what, resp)
	}
	waitLog(t, env, 2*time.Second, "request before authentication", "remote="+rc.c.LocalAddr().String())
}

// scramConversation is the client side of a SCRAM exchange, for raw
// requests: Step("") is the client-first message, Step(server-first) the
// client-final.
func scramConversation(t *testing.T, mech, user, pass string) *xdgscram.ClientConversation {
	t.Helper()
	h := xdgscram.SHA256
	if mech == "SCRAM-SHA-512" {
		h = xdgscram.SHA512
	}
	c, err := h.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.NewConversation()
}
