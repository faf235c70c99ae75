package benchkit

import (
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster starts the benchmarks' embedded 3-broker cluster (topics created
// on first use, 3 partitions). With forwarded, each broker advertises a
// free loopback address of its own instead of the one it listens on, so
// that clients only ever reach it through a forwarder on those addresses:
// Real are the brokers' listeners, FwdAddrs the advertised addresses, in
// broker order.
func Cluster(forwarded bool) (c *kfake.Cluster, real []net.Listener, fwdAddrs []string, err error) {
	real = make([]net.Listener, 3)
	var opts []kfake.Opt
	if forwarded {
		for range real {
			fwdAddrs = append(fwdAddrs, FreeAddr())
		}
		i := 0
		opts = append(opts, kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			real[i] = ln
			w := advertised{ln, fwdAddrs[i]}
			i++
			return w, nil
		}))
	}
	c, err = kfake.NewCluster(append(opts, kfake.NumBrokers(3), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(3))...)
	return c, real, fwdAddrs, err
}

// advertised is a listener that reports another address as its own.
type advertised struct {
	net.Listener
	addr string
}

func (a advertised) Addr() net.Addr {
	ap, _ := net.ResolveTCPAddr("tcp", a.addr)
	return ap
}
