package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
)

// What one exchange interval costs with many active buckets: every bucket
// of a default client-id quota (one per client-id, as Kafka keeps a sensor
// per client) had traffic on the sender since its last report. One
// interval is the sender's DrainUsage and Report.Encode (Exchange.publish,
// to a transport that keeps the parts) and a receiver's DecodeReport,
// catch-up and ApplyRemote for every part (Exchange.handle), then the
// receiver's engine tick, which walks the buckets the reports touched.
// The traffic itself (RecordProduce per client-id) is recorded with the
// timer stopped. Reported per interval: the report's encoded bytes (what
// the exchange topic carries before compression) and its size under zstd
// as the transport's producer compresses it (franz-go's options).

// keepParts is a Transport that keeps what is published.
type keepParts struct{ parts [][]byte }

func (k *keepParts) Publish(_ context.Context, b []byte) error {
	k.parts = append(k.parts, b)
	return nil
}

func (k *keepParts) Receive(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// benchSide is one instance: an engine in cluster mode with a default
// client-id producer_byte_rate, and its exchange.
type benchSide struct {
	e  *quota.Engine
	x  *Exchange
	tr *keepParts
}

func newBenchSide(b *testing.B, id string, now time.Time, keys *Keyring) *benchSide {
	b.Helper()
	e, err := quota.NewEngine(quota.EngineConfig{ByteRate: quota.ByteRateTokenBucket, SharedDeadline: true})
	if err != nil {
		b.Fatal(err)
	}
	var qs model.Quotas
	if err := qs.Set(model.ClientEntity(model.Default()), model.ProducerByteRate, 1<<20); err != nil {
		b.Fatal(err)
	}
	e.SetQuotas(qs)
	const interval = 500 * time.Millisecond
	e.JoinCluster(interval, now)
	tr := &keepParts{}
	x := NewExchange(ExchangeConfig{Self: Member{ID: id, Incarnation: now.UnixMilli(), Version: "bench", Addr: "127.0.0.1:9644",
		Digest: "0123456789abcdef"}, Interval: interval, Ledger: e, Transport: tr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Keys: keys})
	x.members[id].Joined = now
	return &benchSide{e: e, x: x, tr: tr}
}

// benchClients are the client-ids' handles on the sender, one per bucket.
func benchClients(e *quota.Engine, n int) []*quota.Client {
	cls := make([]*quota.Client, n)
	for i := range cls {
		// Client-ids as a fleet names them: a service and an instance.
		cls[i] = e.Client("", fmt.Sprintf("orders-service-%05d", i))
	}
	return cls
}

// BenchmarkExchangeInterval's signed=true rows sign every part on the
// sender and check it on the receiver (cluster.secret_file): the cost of
// signing, side by side with the unsigned rows of the same run.
func BenchmarkExchangeInterval(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, side := range []string{"both", "send", "receive"} {
			for _, signed := range []bool{false, true} {
				b.Run(fmt.Sprintf("buckets=%d/side=%s/signed=%v", n, side, signed), func(b *testing.B) { benchInterval(b, n, side, signed) })
			}
		}
	}
}

func benchInterval(b *testing.B, n int, side string, signed bool) {
	now := time.UnixMilli(1_700_000_000_000)
	var keys *Keyring
	if signed {
		var err error
		if keys, err = NewKeyring(KeyringConfig{Secret: secretA}); err != nil {
			b.Fatal(err)
		}
	}
	snd, rcv := newBenchSide(b, "sender", now, keys), newBenchSide(b, "receiver", now, keys)
	cls := benchClients(snd.e, n)
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	var zbuf []byte
	rng := rand.New(rand.NewPCG(1, 2))
	traffic := func() {
		// 100 B to 4 KiB per client-id per interval: under its quota, so
		// every bucket has traffic and none is throttled; sizes differ, so
		// that the reports' values do not compress better than real ones.
		for _, c := range cls {
			c.RecordProduce(100+rng.IntN(4<<10), now)
		}
	}
	send := func() {
		snd.tr.parts = snd.tr.parts[:0]
		snd.x.publish(context.Background(), now, false)
	}
	receive := func() {
		for _, p := range snd.tr.parts {
			rcv.x.handle(p, now)
		}
		rcv.e.Tick(quota.ClusterTick{Live: 2, Connected: true, Decided: true}, now)
	}
	// One interval before measuring: the buckets exist on both sides and
	// the receiver knows the sender (its join is not measured).
	traffic()
	send()
	receive()
	var bytes, zbytes, parts, entries float64
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(500 * time.Millisecond)
		b.StopTimer()
		traffic()
		if side == "receive" {
			send()
		}
		b.StartTimer()
		if side != "receive" {
			send()
		}
		if side != "send" {
			receive()
		}
		b.StopTimer()
		for _, p := range snd.tr.parts {
			bytes += float64(len(p))
			zbuf = enc.EncodeAll(p, zbuf[:0])
			zbytes += float64(len(zbuf))
			if keys != nil {
				var refused string
				if p, refused = keys.OpenReport(p); refused != "" {
					b.Fatal(refused)
				}
			}
			r, err := DecodeReport(p)
			if err != nil {
				b.Fatal(err)
			}
			entries += float64(len(r.Usage))
		}
		parts += float64(len(snd.tr.parts))
		b.StartTimer()
	}
	if entries != float64(n)*float64(b.N) {
		b.Fatalf("%.0f entries over %d intervals, want %d per interval", entries, b.N, n)
	}
	if st := rcv.x.Stats(); st.Rejected != 0 {
		b.Fatalf("receiver rejected %d report parts", st.Rejected)
	}
	b.ReportMetric(bytes/float64(b.N), "B/report")
	b.ReportMetric(zbytes/float64(b.N), "zstd-B/report")
	b.ReportMetric(parts/float64(b.N), "parts/report")
	b.ReportMetric(bytes/entries, "B/entry")
}

// BenchmarkRecordSignature: what signing costs one configuration record
// on the way in (SignRecord, as Log.record does for every record an append
// writes) and on the way out (VerifyRecord, for every record an instance
// reads): a quota value (plain) and an API key (sealed: AES-256-GCM on top).
func BenchmarkRecordSignature(b *testing.B) {
	k, err := NewKeyring(KeyringConfig{Secret: secretA})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		key    []byte
		value  []byte
		secret bool
	}{
		{"quota", []byte("\x01\x0dclient_quotas\x0a\x04user\x00\x05alice" + "producer_byte_rate"), []byte("\x41\x30\x00\x00\x00\x00\x00\x00"), false},
		{"api-key", []byte("\x01\x08api_keys\x00abcdefghijklmnop"), []byte(`{"id":"abcdefghijklmnop","identity":"team-a","hash":"n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=","created":"2026-12-02T13:00:00Z","revoked":false}`), true},
	} {
		b.Run(c.name+"/sign", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				k.SignRecord(c.key, c.value, c.secret, 1_700_000_000_000)
			}
		})
		stored, sig := k.SignRecord(c.key, c.value, c.secret, 1_700_000_000_000)
		b.Run(c.name+"/verify", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, refused := k.VerifyRecord(c.key, stored, sig); refused != "" {
					b.Fatal(refused)
				}
			}
		})
	}
}
