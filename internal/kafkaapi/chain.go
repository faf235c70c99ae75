package kafkaapi

import (
	"log/slog"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// Deps are what the filters answer from. A nil control-plane part leaves
// its APIs to the upstream cluster.
type Deps struct {
	Log *slog.Logger
	// ClientQuotas answers DescribeClientQuotas and AlterClientQuotas.
	ClientQuotas *control.ClientQuotas
	// Credentials answers DescribeUserScramCredentials and
	// AlterUserScramCredentials.
	Credentials *control.Credentials
	// BrokerConfigs answers the broker configs Tollgate owns within
	// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.
	BrokerConfigs *control.BrokerConfigs
	// Quota is the quota filter (enforce.Filter); nil charges nothing.
	Quota proxy.Filter
}

// Chain is the filter chain of every connection, in order: a request
// passes the filters top to bottom and its response bottom to top, so the
// filters nearest the client (ApiVersions, broker addresses) see every
// response last, after the control plane has merged its part in, and the
// quota filter, nearest the broker, charges only what is forwarded.
func Chain(d Deps) proxy.Chain {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	c := proxy.Chain{
		newAPIVersions(), // 18: the KIP-511 clamp; answered from cache before a SASL login
		addresses{},      // 0, 1, 3, 10, 55, 60, 78, 79: every broker address becomes the gateway's
		newMembers(),     // 11, 68 learn; 15, 69 restore each group member's client address
		&brokerConfigs{owner: d.BrokerConfigs, log: d.Log}, // 32, 33, 44: Tollgate's broker configs; upstream addresses hidden
	}
	if d.ClientQuotas != nil {
		c = append(c, &clientQuotas{ctl: d.ClientQuotas}) // 48, 49: answered from the control plane
	}
	if d.Credentials != nil {
		c = append(c, &scramCredentials{creds: d.Credentials}) // 50, 51: answered from the control plane
	}
	if d.Quota != nil {
		c = append(c, d.Quota) // 0, 1, 11, 19, 20, 37, 78 by content; every forwarded key for request_percentage
	}
	return c
}
