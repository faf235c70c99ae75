package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// ShareAcknowledge (key 79), v0–v2.
//
// Forwarded. Rewritten by the broker-addresses filter (addresses.go): the
// node endpoints become gateway addresses; one the gateway cannot open a
// port for is left out.

// shareAcknowledge rewrites a ShareAcknowledge answer's node endpoints.
func shareAcknowledge(c proxy.Conn, r *proxy.Response) error {
	m := c.Mapper()
	return r.Edit(func(resp kmsg.Response) {
		sa := resp.(*kmsg.ShareAcknowledgeResponse)
		sa.NodeEndpoints = wire.MapBrokers(sa.NodeEndpoints, m, func(e *kmsg.ShareAcknowledgeResponseNodeEndpoint) (*int32, *string, *int32) {
			return &e.NodeID, &e.Host, &e.Port
		})
	})
}
