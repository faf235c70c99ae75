package usage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/durable"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Publisher produces each written minute to usage.topic, in order, with
// acks=all, keyed "<instance>/<minute>" so that a compacted topic keeps
// one record per minute. <dir>/topic-published holds the last minute
// produced: a minute not produced before a stop is produced after the
// next start (a minute produced twice has the same key).
type Publisher struct {
	cl       *kgo.Client
	topic    string
	instance string
	dir      string
	log      *slog.Logger

	mu      sync.Mutex
	queue   []publishRecord
	full    bool // records were left out of the queue (produced after a restart)
	started bool // Start ran: Close waits for run
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	// ctx ends when Close gives up waiting: an in-flight produce stops.
	ctx    context.Context
	cancel context.CancelFunc
}

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	// Dir is the ledger's directory (Options.Dir): the day files the
	// minutes are read back from, and the marker.
	Dir string
	// Topic is the topic the minutes are produced to.
	Topic string
	// Instance is the ledger's instance id, the first part of each key.
	Instance string
	// Client are the options of the client that reaches the topic's
	// cluster (seeds, dialer, listener security).
	Client []kgo.Opt
	Log    *slog.Logger
}

type publishRecord struct {
	minute time.Time
	value  []byte
}

// publishQueueMax bounds the minutes waiting for the topic (a week).
const publishQueueMax = 7 * 24 * 60

// PublishedMarker is the file, in the ledger's directory, that names the
// last minute produced to the topic.
const PublishedMarker = "topic-published"

// NewPublisher returns a publisher that produces nothing until Start.
func NewPublisher(o PublisherOptions) (*Publisher, error) {
	switch {
	case o.Dir == "":
		return nil, errors.New("usage publisher: no directory")
	case o.Instance == "":
		return nil, errors.New("usage publisher: no instance id")
	case o.Topic == "":
		return nil, errors.New("usage publisher: no topic")
	}
	if err := validTopic(o.Topic); err != nil {
		return nil, fmt.Errorf("usage publisher: topic %q: %w", o.Topic, err)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	opts := append(append([]kgo.Opt(nil), o.Client...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(o.Topic))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Publisher{cl: cl, topic: o.Topic, instance: o.Instance, dir: o.Dir, log: o.Log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), ctx: ctx, cancel: cancel}, nil
}

// Written is the ledger's Written hook (Options.Written): it queues the
// minute and never blocks.
func (p *Publisher) Written(m *Minute, line []byte) {
	p.mu.Lock()
	// Once full, nothing more is queued until a restart: the marker must
	// not move past a minute left out (the next start reads the files
	// from the marker on, in order).
	if p.full || len(p.queue) >= publishQueueMax {
		if !p.full {
			p.log.Warn("usage.topic: too many minutes waiting for the topic; the rest are produced after a restart", "waiting", len(p.queue))
		}
		p.full = true
		p.mu.Unlock()
		return
	}
	p.queue = append(p.queue, publishRecord{minute: m.Minute, value: bytes.Clone(bytes.TrimSuffix(line, []byte("\n")))})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// CatchUp queues the minutes written after the last one produced.
func (p *Publisher) CatchUp() error {
	after := time.Time{}
	b, err := os.ReadFile(filepath.Join(p.dir, PublishedMarker))
	if err == nil {
		if after, err = time.Parse(time.RFC3339, strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("%s: %w", PublishedMarker, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return Minutes(p.dir, after, func(m *Minute, line []byte) error {
		p.Written(m, line)
		return nil
	})
}

// Start creates the topic if it is missing and produces what is queued,
// and each minute queued later, until Close.
func (p *Publisher) Start() {
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	go p.run()
}

func (p *Publisher) run() {
	defer close(p.done)
	p.ensureTopic()
	backoff := time.Second
	failing := false
	for {
		p.mu.Lock()
		var next *publishRecord
		if len(p.queue) > 0 {
			next = &p.queue[0]
		}
		p.mu.Unlock()
		stopping := false
		select {
		case <-p.stop:
			stopping = true
		default:
		}
		if next == nil {
			if stopping {
				return
			}
			select {
			case <-p.stop:
			case <-p.wake:
			}
			continue
		}
		err := p.produce(next)
		switch {
		case err != nil && stopping:
			return // produced after the next start
		case err != nil:
			if !failing {
				p.log.Error("usage.topic: cannot produce; retrying", "topic", p.topic, "minute", next.minute, "err", err)
			}
			failing = true
			select {
			case <-p.stop:
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		case failing:
			p.log.Info("usage.topic: producing again", "topic", p.topic)
			failing, backoff = false, time.Second
		}
	}
}

// produce sends one minute and moves the marker past it.
func (p *Publisher) produce(r *publishRecord) error {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	key := p.instance + "/" + r.minute.Format(time.RFC3339)
	if err := p.cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: r.value}).FirstErr(); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(p.dir, PublishedMarker), []byte(r.minute.Format(time.RFC3339)+"\n")); err != nil {
		p.log.Warn("usage.topic: cannot record the last minute produced (it may be produced again after a restart)", "err", err)
	}
	p.mu.Lock()
	p.queue[0] = publishRecord{}
	p.queue = p.queue[1:]
	p.mu.Unlock()
	return nil
}

// ensureTopic creates the topic compacted if it does not exist; a broker
// that refuses (no permission) leaves it to the operator. A stop that
// cannot wait cuts it short (p.ctx).
func (p *Publisher) ensureTopic() {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	compact := "compact"
	resp, err := kadm.NewClient(p.cl).CreateTopic(ctx, -1, -1, map[string]*string{"cleanup.policy": &compact}, p.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		p.log.Warn("usage.topic: cannot create the topic; create it with cleanup.policy=compact", "topic", p.topic, "err", err)
	}
}

// Close stops the publisher once it has produced what is queued, or when
// ctx ends (what is left is produced after the next start), and closes
// its client.
func (p *Publisher) Close(ctx context.Context) {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if started {
		close(p.stop)
		select {
		case <-p.done:
		case <-ctx.Done():
			p.cancel()
			<-p.done
		}
	}
	p.cancel()
	p.cl.Close()
}

// writeFileSync replaces path's content with data durably (a temporary
// file, fsync, rename, fsync of the directory).
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}
