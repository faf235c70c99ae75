package kafkaapi

import (
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// addresses rewrites every response field that names a broker to the
// address of that broker's port on the client's listener (the gateway's
// advertised host and port), opening the port of a broker seen for the
// first time before the response leaves; a broker the gateway cannot open
// a port for is left out rather than leaked (wire.RewriteAddresses). The
// files of the APIs it covers say what each carries.
type addresses struct{}

func (addresses) Name() string { return "broker-addresses" }

func (addresses) Keys() []int16 {
	return []int16{
		wire.KeyProduce, wire.KeyFetch, wire.KeyMetadata, wire.KeyFindCoordinator,
		wire.KeyDescribeQuorum, wire.KeyDescribeCluster, wire.KeyShareFetch, wire.KeyShareAcknowledge,
	}
}

func (addresses) OnResponse(c proxy.Conn, r *proxy.Response) error {
	return wire.RewriteAddresses(r.Buf, r.Req.Key, r.Req.Version, r.Req.Flexible, c.Mapper())
}
