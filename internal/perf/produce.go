package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// batchOverhead is room for a record batch header and one record's framing,
// so that --batch-size can always hold at least one record.
const batchOverhead = 512

var errDuration = errors.New("--duration reached")

// produce runs `tollgate perf produce`. It returns whether the run was
// interrupted, and an error that makes the command fail.
func produce(ctx context.Context, cfg *config, stdout, stderr io.Writer) (bool, error) {
	s, interrupted, err := startSession(ctx, cfg, "perf-producer-client", stderr, producerOpts)
	if s == nil {
		return interrupted, err
	}
	defer s.cl.Close()
	cl, st := s.cl, s.st
	payload := randomPayload(cfg.recordSize)

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	runCtx, cancel := withDuration(runCtx, cfg)
	defer cancel()
	var (
		failOnce sync.Once
		runErr   error
	)
	fail := func(err error) {
		failOnce.Do(func() {
			runErr = err
			cancelRun(err)
		})
	}
	onAck := func(t0 time.Time) func(*kgo.Record, error) {
		return func(r *kgo.Record, err error) {
			if err != nil {
				// Records cut off by the end of the run (context, abort)
				// are neither counted nor errors.
				if runCtx.Err() == nil {
					fail(fmt.Errorf("produce to %s: %w", cfg.topic, err))
				}
				return
			}
			st.add(1, int64(len(r.Value)), time.Since(t0))
		}
	}

	w := s.open(cfg, stdout)
	for sent := int64(0); cfg.numRecords == 0 || sent < cfg.numRecords; sent++ {
		if !w.pace.wait(runCtx, sent) {
			break
		}
		cl.Produce(runCtx, &kgo.Record{Value: payload}, onAck(time.Now()))
	}
	if runCtx.Err() == nil {
		// Every record is handed over: wait for the acks, as Kafka's tool
		// does when it closes its producer.
		_ = cl.Flush(runCtx)
	}
	// The window ends here. Records still buffered or in flight (the run
	// was cut short by --duration, SIGINT or an error) are failed by Close
	// and not counted; waiting for them could take as long as a throttle.
	elapsed := s.close(w)

	failOnce.Do(func() {}) // settles runErr: no fail takes effect after this
	return s.summary(ctx, cfg, stdout, elapsed, runErr)
}

// producerOpts adds to opts how the producer of cfg writes, its produce
// requests and throttles counted in st.
func producerOpts(opts []kgo.Opt, cfg *config, st *stats) []kgo.Opt {
	acks, _ := acksOpt(cfg.acks)
	codec, _ := compressionOpt(cfg.compression)
	opts = append(opts,
		kgo.DefaultProduceTopic(cfg.topic),
		kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(int32(min(max(cfg.batchSize, cfg.recordSize+batchOverhead), 1<<30))),
		// Kafka's buffer.memory: a producer faster than its quota blocks
		// here, as Kafka's does.
		kgo.MaxBufferedBytes(max(32<<20, 2*cfg.recordSize)),
		// Kafka's delivery.timeout.ms: a record that cannot be delivered
		// fails the run rather than being retried for ever.
		kgo.RecordDeliveryTimeout(2*time.Minute),
		// Counts produce responses (key 0) and every throttle: this client
		// sends no other request that Tollgate throttles.
		kgo.WithHooks(throttleHook{st: st, key: 0}),
	)
	if cfg.acks != "all" && cfg.acks != "-1" {
		opts = append(opts, kgo.DisableIdempotentWrite()) // idempotence needs acks=all
	}
	return opts
}

// randomPayload is the one payload of upper-case letters the run reuses,
// as Kafka's tool does.
func randomPayload(size int) []byte {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = 'A' + byte(rand.IntN(26))
	}
	return payload
}
