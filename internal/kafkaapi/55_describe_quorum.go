package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// DescribeQuorum (key 55), v0–v2.
//
// Forwarded. Rewritten by the broker-addresses filter (addresses.go): the
// controllers' listeners are removed — they are controller addresses,
// which a client-facing gateway has no port for — rather than leaked.

// describeQuorum removes a DescribeQuorum answer's controller listeners.
func describeQuorum(r *proxy.Response) error {
	return r.Edit(func(resp kmsg.Response) {
		dq := resp.(*kmsg.DescribeQuorumResponse)
		for i := range dq.Nodes {
			dq.Nodes[i].Listeners = nil
		}
	})
}
