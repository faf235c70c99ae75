package app

import (
	"strings"

	"github.com/tollgate/tollgate/internal/proxy"
)

// brokerConfigDefaults are Kafka's defaults of the broker configs Tollgate
// owns, for DescribeConfigs.
func brokerConfigDefaults(listeners []proxy.ListenerConfig) map[string]string {
	const unlimited = "2147483647"
	d := map[string]string{
		"max.connections":                  unlimited,
		"max.connections.per.ip":           unlimited,
		"max.connections.per.ip.overrides": "",
		"max.connection.creation.rate":     unlimited,
	}
	for _, l := range listeners {
		n := strings.ToLower(l.Name)
		d["listener.name."+n+".max.connections"] = unlimited
		d["listener.name."+n+".max.connection.creation.rate"] = unlimited
	}
	return d
}
