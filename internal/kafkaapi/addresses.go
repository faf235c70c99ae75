package kafkaapi

import (
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addresses rewrites every response field that names a broker to the
// address of that broker's port on the client's listener (the gateway's
// advertised host and port), opening the port of a broker seen for the
// first time before the response leaves; a broker the gateway cannot open
// a port for is left out rather than leaked: wire.RewriteAddresses for
// Produce and Fetch (walked in place), Metadata and ShareFetch, the file of
// the API for the others (10_find_coordinator.go, 55_describe_quorum.go,
// 60_describe_cluster.go, 79_share_acknowledge.go). The files of the APIs
// it covers say what each carries.
type addresses struct{}

func (addresses) Name() string { return "broker-addresses" }

func (addresses) Keys() []int16 {
	return []int16{
		int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.Metadata), int16(kmsg.FindCoordinator),
		int16(kmsg.DescribeQuorum), int16(kmsg.DescribeCluster), int16(kmsg.ShareFetch), int16(kmsg.ShareAcknowledge),
	}
}

func (addresses) OnResponse(c proxy.Conn, r *proxy.Response) error {
	switch r.Req.Key {
	case int16(kmsg.FindCoordinator):
		return findCoordinator(c, r) // 10_find_coordinator.go
	case int16(kmsg.DescribeQuorum):
		return describeQuorum(r) // 55_describe_quorum.go
	case int16(kmsg.DescribeCluster):
		return describeCluster(c, r) // 60_describe_cluster.go
	case int16(kmsg.ShareAcknowledge):
		return shareAcknowledge(c, r) // 79_share_acknowledge.go
	}
	// Produce, Fetch (read in place), Metadata, ShareFetch.
	return wire.RewriteAddresses(r.Buf, r.Req.Key, r.Req.Version, r.Req.Flexible, c.Mapper())
}
