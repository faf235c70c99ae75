package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Clock thresholds: within ClockTolerance the clocks agree; beyond
// ClockLimit starting is unsafe (certificates a broker's CA issued look
// not-yet-valid, token and SASL session lifetimes are misjudged, audit events
// and logs cannot be lined up with the brokers').
const (
	ClockTolerance = time.Second
	ClockLimit     = 5 * time.Minute
)

// clockProbe is one broker's measurement: the local clock just before the
// produce was sent and just after it was acknowledged, and the time at which
// the broker appended the record by its own clock.
type clockProbe struct {
	broker       int32
	partition    int32
	offset       int64
	sent, acked  time.Time
	appended     time.Time
	logAppend    bool // the broker stamped the record (LogAppendTime)
	got          bool // the partition's largest stamp is the probe's
	produceError error
}

// skew bounds the broker's clock minus the local clock. The broker appended
// the record at some local instant between sent and acked; its timestamp is
// whole milliseconds, truncated.
func skew(sent, acked, appended time.Time) (lo, hi time.Duration) {
	return appended.Sub(acked), appended.Add(time.Millisecond).Sub(sent)
}

// skewVerdict judges one broker's skew interval.
func skewVerdict(lo, hi time.Duration) Status {
	switch {
	case lo > ClockLimit || hi < -ClockLimit:
		return Fail
	case lo >= -ClockTolerance && hi <= ClockTolerance:
		return OK
	}
	return Warn
}

// clock: each broker's clock agrees with this host's. Kafka does not report
// a broker's time, but a broker stamps every record it appends to a topic
// with message.timestamp.type=LogAppendTime with its own clock. So the check
// produces one small record to a partition each broker leads, in the topic
// ClockTopic (created if missing: one partition per broker, retention 1 hour),
// asks for the partition's largest timestamp (ListOffsets), and compares that
// stamp with the local clock around the produce. This writes one record per
// broker and needs Create (first run), Write and Describe on that topic.
func (r *runner) clock(ctx context.Context) Result {
	res := Result{Check: "clock"}
	if len(r.t.Upstream) > 0 && r.t.ClockTopic == "" {
		res.Status = Warn
		res.Detail = "not checked (no clock topic given)"
		res.Fix = "let the doctor use a topic (--clock-topic " + DefaultClockTopic + "), or compare the clocks by hand (chronyc tracking / timedatectl on each broker)"
		return res
	}
	if !r.haveBrokers(&res, "embedded cluster: it runs on this host's clock") {
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, 6*r.t.DialTimeout)
	defer cancel()
	probes, uncovered, err := r.probeClocks(ctx)
	if err != nil {
		res.Status = Warn
		res.Detail = "could not tell: " + err.Error()
		res.Fix = fmt.Sprintf("grant Tollgate's upstream identity Create, Write and Describe on topic %s, or check the brokers' clocks by hand (chronyc tracking)", r.t.ClockTopic)
		return res
	}
	var parts, fixes []string
	var off []string
	worst := OK
	raise := func(s Status) {
		if s > worst {
			worst = s
		}
	}
	for _, p := range probes {
		switch {
		case p.produceError != nil:
			raise(Warn)
			parts = append(parts, fmt.Sprintf("broker %d: could not produce (%v)", p.broker, p.produceError))
		case !p.logAppend:
			raise(Warn)
			parts = append(parts, fmt.Sprintf("broker %d: kept the producer's timestamp, so its clock is unknown", p.broker))
			fixes = append(fixes, fmt.Sprintf("set message.timestamp.type=LogAppendTime on topic %s (or delete it; the doctor recreates it)", r.t.ClockTopic))
		case !p.got:
			raise(Warn)
			parts = append(parts, fmt.Sprintf("broker %d: a record of %s carries a later stamp than the probe (the broker's clock stepped back?)", p.broker, r.t.ClockTopic))
			fixes = append(fixes, "check the broker's clock (chronyc tracking), then run the doctor again")
		default:
			lo, hi := skew(p.sent, p.acked, p.appended)
			v := skewVerdict(lo, hi)
			raise(v)
			mid, pm := ((lo + hi) / 2).Round(time.Millisecond), ((hi - lo) / 2).Round(time.Millisecond)
			parts = append(parts, fmt.Sprintf("broker %d: %s%s ±%s", p.broker, sign(mid), mid.Abs(), pm))
			if v != OK {
				off = append(off, fmt.Sprint(p.broker))
			}
		}
	}
	if len(off) > 0 {
		fixes = append(fixes, fmt.Sprintf("synchronise the clocks of this host and of broker %s with NTP (chrony, systemd-timesyncd): more than %s apart is noticed, more than %s is unsafe", strings.Join(off, ", "), ClockTolerance, ClockLimit))
	}
	if len(uncovered) > 0 {
		raise(Warn)
		parts = append(parts, fmt.Sprintf("brokers %v lead no partition of %s and were not compared", uncovered, r.t.ClockTopic))
		fixes = append(fixes, fmt.Sprintf("delete topic %s (it holds only probes): the doctor recreates it with one partition per broker", r.t.ClockTopic))
	}
	res.Status = worst
	res.Detail = "broker clock minus this host's: " + strings.Join(parts, "; ")
	res.Fix = strings.Join(dedup(fixes), "; ")
	return res
}

func sign(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return "+"
}

func dedup(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// probeClocks produces one record to a partition each broker leads and
// reads the records back.
func (r *runner) probeClocks(ctx context.Context) ([]clockProbe, []int32, error) {
	topic := r.t.ClockTopic
	adm, err := r.client()
	if err != nil {
		return nil, nil, err
	}
	defer adm.Close()
	if err := r.createClockTopic(ctx, adm); err != nil {
		return nil, nil, err
	}
	leaders, err := partitionLeaders(ctx, kadm.NewClient(adm), topic)
	if err != nil {
		return nil, nil, err
	}
	var probes []clockProbe
	var uncovered []int32
	for _, b := range r.brokers {
		p, ok := leaders[b.ID]
		if !ok {
			uncovered = append(uncovered, b.ID)
			continue
		}
		probes = append(probes, clockProbe{broker: b.ID, partition: p})
	}
	if len(probes) == 0 {
		return nil, nil, fmt.Errorf("no partition of %s has a leader", topic)
	}
	prod, err := r.client(
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DisableIdempotentWrite(), // no IdempotentWrite ACL needed
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return nil, nil, err
	}
	defer prod.Close()
	for i := range probes {
		p := &probes[i]
		rec := &kgo.Record{Partition: p.partition, Timestamp: producerStamp, Value: []byte("tollgate doctor clock probe")}
		p.sent = r.t.Now()
		err := prod.ProduceSync(ctx, rec).FirstErr()
		p.acked = r.t.Now()
		if err != nil {
			p.produceError = err
			continue
		}
		p.offset = rec.Offset
	}
	return probes, uncovered, r.readStamps(ctx, adm, probes)
}

// producerStamp is the timestamp the probe records are produced with: a
// broker that stamps them replaces it, one that keeps it returns it, and it
// cannot be mistaken for a clock reading.
var producerStamp = time.UnixMilli(1)

// readStamps asks each partition for its record with the highest timestamp
// (ListOffsets MAX_TIMESTAMP, KIP-734): when it is the probe, that is when
// the broker appended it, by the broker's clock. Nothing is read from the
// topic (Describe, not Read, is needed).
func (r *runner) readStamps(ctx context.Context, cl *kgo.Client, probes []clockProbe) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = r.t.ClockTopic
	for _, p := range probes {
		if p.produceError == nil {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p.partition
			rp.Timestamp = -3 // the offset and timestamp of the largest timestamp
			rp.CurrentLeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	if len(rt.Partitions) == 0 {
		return nil
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("ListOffsets (max timestamp): %w", err)
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			for i := range probes {
				p := &probes[i]
				if p.partition != rp.Partition || p.produceError != nil {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					p.produceError = fmt.Errorf("ListOffsets: %w", err)
					continue
				}
				p.got = rp.Offset == p.offset // a later stamp elsewhere means the broker's clock stepped back
				p.appended = time.UnixMilli(rp.Timestamp)
				p.logAppend = rp.Timestamp != producerStamp.UnixMilli()
			}
		}
	}
	return nil
}

// createClockTopic creates the probe topic, one partition led by each
// broker, unless it exists.
func (r *runner) createClockTopic(ctx context.Context, cl *kgo.Client) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(r.t.DialTimeout.Milliseconds())
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = r.t.ClockTopic
	t.NumPartitions, t.ReplicationFactor = -1, -1
	for i, b := range r.brokers {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), []int32{b.ID}
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	for _, kv := range [][2]string{
		{"message.timestamp.type", "LogAppendTime"},
		{"retention.ms", "3600000"},
		{"cleanup.policy", "delete"},
	} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = kv[0], kmsg.StringPtr(kv[1])
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", r.t.ClockTopic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("creating topic %s: %d topics in the response", r.t.ClockTopic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", r.t.ClockTopic, err)
	}
	return nil
}

// partitionLeaders maps each broker leading a partition of topic to the
// lowest such partition, waiting (bounded by ctx) for a new topic's leaders.
func partitionLeaders(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int32, error) {
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = tds.Error()
		}
		if err == nil {
			td := tds[topic]
			ps := td.Partitions.Numbers()
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			out := map[int32]int32{}
			ready := len(ps) > 0
			for _, p := range ps {
				pd := td.Partitions[p]
				if pd.Leader < 0 || pd.Err != nil {
					ready = false
					continue
				}
				if _, ok := out[pd.Leader]; !ok {
					out[pd.Leader] = p
				}
			}
			if ready {
				return out, nil
			}
		} else if !kerr.IsRetriable(err) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("topic %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s: no leaders: %w", topic, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
