package proxy

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartitions asks upstream for the current partition count of each
// topic; topics that do not exist are absent from the result. The
// controller-mutation quota needs it for DeleteTopics and
// CreatePartitions, which name topics, not partition counts. A topic
// missing from the answer is asked again (lookupRetries): a broker learns
// of a topic the controller just created a moment later than the broker
// that created it, and a client may delete or grow it at once.
func (g *Gateway) TopicPartitions(ctx context.Context, topics []string) (map[string]int32, error) {
	var out map[string]int32
	err := lookupRetries(ctx, func() (bool, error) {
		var err error
		out, err = g.topicPartitions(ctx, topics)
		return len(out) == len(topics), err
	})
	return out, err
}

// lookupRetries runs lookup until it reports everything found, waiting
// 50 ms, then twice as long each time, 1.55 s in all at most; it returns
// the last error. A KRaft broker applies the metadata log on its own: on
// Kafka 3.9 on a loaded machine every broker learnt of a topic 150-900 ms
// after its CreateTopics was answered. Only a lookup that misses a topic
// waits (one naming a topic that does not exist, whose request the broker
// will refuse anyway).
func lookupRetries(ctx context.Context, lookup func() (bool, error)) error {
	var err error
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		var all bool
		if all, err = lookup(); all || wait > lookupPatience {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// lookupPatience is the longest wait between two lookups.
const lookupPatience = 800 * time.Millisecond

// metadataOf asks the upstream's Metadata of the named topics; it never
// creates one.
func (g *Gateway) metadataOf(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, g.meta)
}

func (g *Gateway) topicPartitions(ctx context.Context, topics []string) (map[string]int32, error) {
	resp, err := g.metadataOf(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int32, len(topics))
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil {
			out[*t.Topic] = int32(len(t.Partitions))
		}
	}
	return out, nil
}

// TopicPartitionsByID is TopicPartitions for topics named by id
// (DeleteTopics v6+): Metadata v12+ names them by id. Ids the upstream
// does not know are absent from the result (asked again as
// TopicPartitions does). It never creates a topic.
func (g *Gateway) TopicPartitionsByID(ctx context.Context, ids [][16]byte) (map[[16]byte]int32, error) {
	var out map[[16]byte]int32
	err := lookupRetries(ctx, func() (bool, error) {
		var err error
		out, err = g.topicPartitionsByID(ctx, ids)
		return len(out) == len(ids), err
	})
	return out, err
}

func (g *Gateway) topicPartitionsByID(ctx context.Context, ids [][16]byte) (map[[16]byte]int32, error) {
	resp, err := g.metadataByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[[16]byte]int32, len(ids))
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.TopicID != ([16]byte{}) {
			out[t.TopicID] = int32(len(t.Partitions))
		}
	}
	return out, nil
}

// metadataByID asks upstream for the topics of ids (Metadata v12+ names
// them by id).
func (g *Gateway) metadataByID(ctx context.Context, ids [][16]byte) (*kmsg.MetadataResponse, error) {
	if g.meta == nil {
		return nil, fmt.Errorf("the gateway has not started")
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, id := range ids {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, g.meta)
}

// TopicNamesOf asks upstream for the name of each topic of ids, once;
// ids it does not know (or does not let Tollgate describe) are absent
// from the result. It never creates a topic. The reserved-topics filter
// decides by it the topics requests name by id.
func (g *Gateway) TopicNamesOf(ctx context.Context, ids [][16]byte) (map[[16]byte]string, error) {
	resp, err := g.metadataByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[[16]byte]string, len(ids))
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil && t.TopicID != ([16]byte{}) {
			out[t.TopicID] = *t.Topic
		}
	}
	return out, nil
}

// TopicNames asks upstream for every topic's id and name, for the filters
// that need the names of topics a request names by id (Fetch v13+,
// Produce v13): per-topic quotas are set by name. It never creates a
// topic.
func (g *Gateway) TopicNames(ctx context.Context) (map[[16]byte]string, error) {
	if g.meta == nil {
		return nil, fmt.Errorf("the gateway has not started")
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, g.meta)
	if err != nil {
		return nil, err
	}
	out := make(map[[16]byte]string, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil && t.TopicID != ([16]byte{}) {
			out[t.TopicID] = *t.Topic
		}
	}
	return out, nil
}

// partitionsCache holds num.partitions as last read from upstream.
type partitionsCache struct {
	sync.Mutex
	v  int32
	at time.Time
}

// DefaultPartitions returns the cluster's num.partitions (what a
// CreateTopics with num_partitions -1 gets), cached for a minute; 1 if it
// cannot be read.
func (g *Gateway) DefaultPartitions(ctx context.Context) int32 {
	g.numParts.Lock()
	defer g.numParts.Unlock()
	if g.numParts.v > 0 && time.Since(g.numParts.at) < time.Minute {
		return g.numParts.v
	}
	v, err := g.readNumPartitions(ctx)
	if err != nil {
		g.log.Warn("cannot read num.partitions from upstream; counting 1", "err", err)
		return 1
	}
	g.numParts.v, g.numParts.at = v, time.Now()
	return v
}

func (g *Gateway) readNumPartitions(ctx context.Context) (int32, error) {
	g.mu.Lock()
	var id int32 = -1
	for n := range g.brokers {
		id = n
		break
	}
	g.mu.Unlock()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeBroker
	r.ResourceName = strconv.Itoa(int(id))
	r.ConfigNames = []string{"num.partitions"}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, g.meta)
	if err != nil {
		return 0, err
	}
	for _, res := range resp.Resources {
		for _, c := range res.Configs {
			if c.Name == "num.partitions" && c.Value != nil {
				v, err := strconv.Atoi(*c.Value)
				if err == nil && v > 0 {
					return int32(v), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("num.partitions not in the DescribeConfigs answer")
}
