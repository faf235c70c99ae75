package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// FindCoordinator (key 10), v0–v6.
//
// Forwarded. Rewritten by the broker-addresses filter (addresses.go): the
// coordinator's address (v0–v3) or each batched coordinator's (v4+)
// becomes its gateway port. A coordinator the gateway has no port for is
// answered COORDINATOR_NOT_AVAILABLE (retriable, node -1) instead of its
// upstream address; an entry that carries an error, or no node, is left
// as it is.

// findCoordinator rewrites a FindCoordinator answer's coordinators.
func findCoordinator(c proxy.Conn, r *proxy.Response) error {
	m := c.Mapper()
	return r.Edit(func(resp kmsg.Response) {
		fc, ok := resp.(*kmsg.FindCoordinatorResponse)
		if !ok {
			return
		}
		if fc.Version <= 3 {
			mapCoordinator(&fc.ErrorCode, &fc.NodeID, &fc.Host, &fc.Port, m)
		}
		for i := range fc.Coordinators {
			k := &fc.Coordinators[i]
			mapCoordinator(&k.ErrorCode, &k.NodeID, &k.Host, &k.Port, m)
		}
	})
}

func mapCoordinator(errCode *int16, id *int32, host *string, port *int32, m wire.Mapper) {
	if *errCode != 0 || *id < 0 {
		return
	}
	h, p, ok := m.Advertise(*id, *host, *port)
	if !ok {
		*errCode, *id, *host, *port = kerr.CoordinatorNotAvailable.Code, -1, "", -1
		return
	}
	*host, *port = h, p
}
