package audit

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicSink produces each event to a topic on the upstream cluster
// (acks=all, synchronous, keyed by the event's id; the topic is created
// by the broker's auto-creation if it is missing).
type TopicSink struct {
	cl    *kgo.Client
	topic string
}

// NewTopicSink connects a client with opts (the seeds, dialer and
// listener security of the cluster the topic is on) to produce to topic.
func NewTopicSink(topic string, opts ...kgo.Opt) (*TopicSink, error) {
	opts = append(opts, kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &TopicSink{cl: cl, topic: topic}, nil
}

// Name implements Sink.
func (t *TopicSink) Name() string { return "topic:" + t.topic }

// Write implements Sink: it returns once the cluster has the event (or
// after 10 s, within ctx).
func (t *TopicSink) Write(ctx context.Context, e *Event, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec := &kgo.Record{Key: []byte(e.ID), Value: append([]byte(nil), data...)}
	return t.cl.ProduceSync(ctx, rec).FirstErr()
}

// Close implements Sink.
func (t *TopicSink) Close() error { t.cl.Close(); return nil }
