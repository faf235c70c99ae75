package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaTransport carries reports through a single-partition topic on the
// upstream: every instance produces its reports to it and reads everyone's
// from the end. Reports are worth nothing once they are a few intervals
// old, so the topic keeps them minutes (retention.ms) and a lost or late
// one is tolerated (acks=1, no retries past the interval).
type KafkaTransport struct {
	cl    *kgo.Client
	cfg   KafkaTransportConfig
	topic string

	mu    sync.Mutex
	recs  []*kgo.Record
	ready bool // the topic is known to exist
}

// KafkaTransportConfig configures a KafkaTransport.
type KafkaTransportConfig struct {
	Opts              []kgo.Opt // reach the upstream
	Topic             string
	ReplicationFactor int16 // 0: 3, fewer when the cluster has fewer brokers
	Interval          time.Duration
	Logger            *slog.Logger
}

// NewKafkaTransport returns a transport that reads the topic from its end;
// nothing is contacted before the first Publish, which creates the topic
// if it is missing (an instance that starts with the upstream unreachable
// keeps trying, every interval).
func NewKafkaTransport(cfg KafkaTransportConfig) (*KafkaTransport, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	opts := append([]kgo.Opt{}, cfg.Opts...)
	opts = append(opts,
		kgo.ClientID("tollgate-cluster-exchange"),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression(), kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(max(2*cfg.Interval, time.Second)), // kgo allows no less
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxWait(cfg.Interval),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &KafkaTransport{cl: cl, cfg: cfg, topic: cfg.Topic}, nil
}

func (t *KafkaTransport) ensureTopic(ctx context.Context, cfg KafkaTransportConfig) error {
	adm := kadm.NewClient(t.cl)
	topics, err := adm.ListTopics(ctx, cfg.Topic)
	if err != nil {
		return fmt.Errorf("cluster: list topic %s: %w", cfg.Topic, err)
	}
	if td, ok := topics[cfg.Topic]; ok && td.Err == nil {
		if len(td.Partitions) != 1 {
			return fmt.Errorf("cluster: topic %s has %d partitions; the exchange needs exactly one", cfg.Topic, len(td.Partitions))
		}
		return nil
	}
	rf, _, err := replicationFor(ctx, adm, cfg.ReplicationFactor, 1, cfg.Topic, cfg.Logger)
	if err != nil {
		return err
	}
	resp, err := adm.CreateTopic(ctx, 1, rf, map[string]*string{
		"cleanup.policy": kadm.StringPtr("delete"),
		"retention.ms":   kadm.StringPtr(strconv.Itoa(10 * 60 * 1000)),
		"segment.ms":     kadm.StringPtr(strconv.Itoa(10 * 60 * 1000)),
	}, cfg.Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("cluster: create topic %s: %w", cfg.Topic, err)
	}
	return nil
}

// Publish produces one part and waits for the leader's acknowledgement,
// creating the topic first if that has not been done yet.
func (t *KafkaTransport) Publish(ctx context.Context, part []byte) error {
	t.mu.Lock()
	ready := t.ready
	t.mu.Unlock()
	if !ready {
		if err := t.ensureTopic(ctx, t.cfg); err != nil {
			return err
		}
		t.mu.Lock()
		t.ready = true
		t.mu.Unlock()
	}
	return t.cl.ProduceSync(ctx, &kgo.Record{Value: part, Partition: 0}).FirstErr()
}

// Receive returns the next report part.
func (t *KafkaTransport) Receive(ctx context.Context) ([]byte, error) {
	for {
		t.mu.Lock()
		if len(t.recs) > 0 {
			r := t.recs[0]
			t.recs[0] = nil
			t.recs = t.recs[1:]
			t.mu.Unlock()
			return r.Value, nil
		}
		t.mu.Unlock()
		fs := t.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return nil, kgo.ErrClientClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		t.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { t.recs = append(t.recs, r) })
		t.mu.Unlock()
		if ferr != nil {
			return nil, ferr
		}
	}
}

// Close closes the client.
func (t *KafkaTransport) Close() { t.cl.Close() }
