package proxy

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker configs that name upstream addresses (spec: kafka-proxying §2.3).
// DescribeConfigs on a BROKER resource would hand them to any client that
// may describe configs; Tollgate hides its brokers everywhere else.
var (
	// listenerConfigs name the broker's own listeners: they become this
	// gateway listener's address for that broker.
	listenerConfigs = map[string]bool{"listeners": true, "advertised.listeners": true}
	// addressConfigs name other hosts (controllers, ZooKeeper, the
	// pre-listener host and port settings): hidden as Kafka hides a
	// password, null and sensitive.
	addressConfigs = map[string]bool{
		"controller.quorum.voters": true, "controller.quorum.bootstrap.servers": true,
		"zookeeper.connect": true, "host.name": true, "port": true,
		"advertised.host.name": true, "advertised.port": true,
	}
)

const resourceBroker = 4

// scrubBrokerConfigs rewrites the address-bearing configs of every BROKER
// resource in a DescribeConfigs response, synonyms included.
func (l *listener) scrubBrokerConfigs(resp kmsg.Response) {
	r, ok := resp.(*kmsg.DescribeConfigsResponse)
	if !ok {
		return
	}
	for i := range r.Resources {
		res := &r.Resources[i]
		if res.ResourceType != resourceBroker {
			continue
		}
		own := l.ownAddress(res.ResourceName)
		for j := range res.Configs {
			c := &res.Configs[j]
			switch {
			case listenerConfigs[c.Name]:
				if c.Value != nil {
					c.Value = own
					c.IsSensitive = own == nil
				}
				for k := range c.ConfigSynonyms {
					if c.ConfigSynonyms[k].Value != nil {
						c.ConfigSynonyms[k].Value = own
					}
				}
			case addressConfigs[c.Name]:
				if c.Value != nil {
					c.Value, c.IsSensitive = nil, true
				}
				for k := range c.ConfigSynonyms {
					c.ConfigSynonyms[k].Value = nil
				}
			}
		}
	}
}

// ownAddress is "LISTENER://host:port" for a broker resource name (a node
// id) whose port this listener has open; nil otherwise (the cluster
// default, or a broker not seen yet).
func (l *listener) ownAddress(resource string) *string {
	id, err := strconv.ParseInt(resource, 10, 32)
	if err != nil || id < 0 {
		return nil
	}
	port, ok := l.acc.Open(int32(id))
	if !ok {
		return nil
	}
	v := l.cfg.Name + "://" + net.JoinHostPort(l.advHost, strconv.Itoa(int(port)))
	return &v
}
