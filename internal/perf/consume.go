package perf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consume runs `tollgate perf consume`. It returns whether the run was
// interrupted, and an error that makes the command fail.
func consume(ctx context.Context, cfg *config, stdout, stderr io.Writer) (bool, error) {
	s, interrupted, err := startSession(ctx, cfg, "perf-consumer-client", stderr, consumerOpts, topicExists)
	if s == nil {
		return interrupted, err
	}
	defer s.cl.Close()
	cl, st := s.cl, s.st

	runCtx, cancel := withDuration(ctx, cfg)
	defer cancel()

	w := s.open(cfg, stdout)
	var got int64
	var runErr error
	last := w.start // of the last record
	for (cfg.numRecords == 0 || got < cfg.numRecords) && runCtx.Err() == nil {
		maxRecs := 0 // all that are buffered
		if cfg.numRecords > 0 {
			maxRecs = int(min(cfg.numRecords-got, math.MaxInt32))
		}
		// Like kafka-consumer-perf-test, give up after --timeout without a
		// record, so that --num-records alone is bounded in time too.
		pollCtx, cancelPoll := context.WithDeadline(runCtx, last.Add(cfg.timeout))
		fs := cl.PollRecords(pollCtx, maxRecs)
		idle := pollCtx.Err() != nil && runCtx.Err() == nil
		cancelPoll()
		if fs.IsClientClosed() {
			break
		}
		runErr = fetchError(fs, stderr)
		n, b := countRecords(fs)
		st.add(n, b, -1)
		got += n
		if n > 0 {
			last = time.Now()
		}
		if runErr == nil && n == 0 && idle {
			warnIdle(stderr, cfg, got)
			break
		}
		if runErr != nil || !w.pace.wait(runCtx, got) {
			break
		}
	}
	return s.summary(ctx, cfg, stdout, s.close(w), runErr)
}

// consumerOpts adds to opts what the consumer of cfg reads and how, its
// fetches and throttles counted in st.
func consumerOpts(opts []kgo.Opt, cfg *config, st *stats) []kgo.Opt {
	reset := kgo.NewOffset().AtEnd()
	if cfg.fromBeginning {
		reset = kgo.NewOffset().AtStart()
	}
	opts = append(opts,
		kgo.ConsumeTopics(cfg.topic),
		kgo.ConsumeResetOffset(reset),
		kgo.FetchMaxWait(500*time.Millisecond), // Kafka's fetch.max.wait.ms
		// Counts fetch responses (key 1) and every throttle: this client
		// sends no other request that Tollgate throttles.
		kgo.WithHooks(throttleHook{st: st, key: 1}),
	)
	if cfg.group != "" {
		opts = append(opts, kgo.ConsumerGroup(cfg.group))
	}
	return opts
}

// fetchError is the first error of a poll that fails the run; data loss
// is only warned of, and the end of the poll or the run is no error.
func fetchError(fs kgo.Fetches, stderr io.Writer) error {
	var runErr error
	fs.EachError(func(t string, part int32, err error) {
		var loss *kgo.ErrDataLoss
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.As(err, &loss):
			fmt.Fprintln(stderr, "tollgate perf: warning:", err)
		case runErr == nil:
			runErr = fmt.Errorf("fetch %s[%d]: %w", t, part, err)
		}
	})
	return runErr
}

// countRecords is how many records a poll returned, and their bytes (keys
// and values).
func countRecords(fs kgo.Fetches) (n, bytes int64) {
	fs.EachRecord(func(r *kgo.Record) {
		n++
		bytes += int64(len(r.Key) + len(r.Value))
	})
	return n, bytes
}

// warnIdle says the run stops for want of records, after got of them.
func warnIdle(stderr io.Writer, cfg *config, got int64) {
	fmt.Fprintf(stderr, "tollgate perf: warning: no record for %v (--timeout); stopping", cfg.timeout)
	if cfg.numRecords > 0 {
		fmt.Fprintf(stderr, " after %d of %d records", got, cfg.numRecords)
	}
	fmt.Fprintln(stderr)
}

// topicExists fails early, with a clear message, for a topic that is not
// there (a consumer would otherwise wait for it for the whole run).
func topicExists(ctx context.Context, cl *kgo.Client, cfg *config) error {
	mctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(cfg.topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(mctx, cl)
	if err != nil {
		return fmt.Errorf("metadata for topic %s: %w", cfg.topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != cfg.topic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("topic %s does not exist", cfg.topic)
			}
			return fmt.Errorf("topic %s: %w", cfg.topic, err)
		}
		return nil
	}
	return fmt.Errorf("topic %s: not in the metadata response", cfg.topic)
}
