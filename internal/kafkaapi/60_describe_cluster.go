package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// DescribeCluster (key 60), v0–v2.
//
// Forwarded. Rewritten by the broker-addresses filter (addresses.go):
// every broker's address becomes its gateway port, as in Metadata; a broker
// the gateway cannot open a port for is left out.

// describeCluster rewrites a DescribeCluster answer's brokers.
func describeCluster(c proxy.Conn, r *proxy.Response) error {
	m := c.Mapper()
	return r.Edit(func(resp kmsg.Response) {
		dc := resp.(*kmsg.DescribeClusterResponse)
		dc.Brokers = wire.MapBrokers(dc.Brokers, m, func(b *kmsg.DescribeClusterResponseBroker) (*int32, *string, *int32) {
			return &b.NodeID, &b.Host, &b.Port
		})
	})
}
