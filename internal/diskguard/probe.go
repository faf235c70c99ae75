package diskguard

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaProbe reads every broker's log directories through cl: one
// DescribeLogDirs per broker of the cluster's metadata, naming no topic (an
// empty list, not null: the brokers answer each directory's volume sizes,
// not its partitions). A broker that does not answer fails the probe.
func KafkaProbe(cl *kgo.Client) func(context.Context) ([]Dir, error) {
	adm := kadm.NewClient(cl)
	return func(ctx context.Context) ([]Dir, error) {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return nil, err
		}
		if len(md.Brokers) == 0 {
			return nil, errors.New("the cluster lists no broker")
		}
		var out []Dir
		for _, b := range md.Brokers {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
			kr, err := cl.Broker(int(b.NodeID)).RetriableRequest(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("broker %d: %w", b.NodeID, err)
			}
			resp := kr.(*kmsg.DescribeLogDirsResponse)
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return nil, fmt.Errorf("broker %d: %w", b.NodeID, err)
			}
			for _, d := range resp.Dirs {
				if d.ErrorCode != 0 {
					continue // an offline directory holds nothing to fill
				}
				out = append(out, Dir{Broker: b.NodeID, Path: d.Dir, Total: d.TotalBytes, Usable: d.UsableBytes})
			}
		}
		return out, nil
	}
}
