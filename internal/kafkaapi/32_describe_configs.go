package kafkaapi

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/proxy"
)

// DescribeConfigs (key 32), v0–v4.
//
// Split (brokerconfigs.go): for a BROKER resource, the broker configs
// Tollgate owns (connection limits: control.IsOwnedBrokerConfig) are
// answered by Tollgate — with their source, synonyms and documentation as a
// broker would give them — and everything else is forwarded; the answers
// are merged, Tollgate's entries replacing the broker's for the keys it
// owns. A request naming only owned keys is answered without the broker.
// A principal that may not describe Tollgate's settings gets the request
// forwarded untouched, as if Tollgate were not there; a BROKER resource it
// asked Tollgate's keys of gets CLUSTER_AUTHORIZATION_FAILED.
//
// Rewritten (every answer, split or not): configs that name upstream hosts
// are not handed out. listeners and advertised.listeners become this
// listener's address for that broker (LISTENER://host:port, or null when
// its port is not open); controller.quorum.voters,
// controller.quorum.bootstrap.servers, zookeeper.connect and the old
// host.name/port settings are returned null and sensitive, as Kafka
// returns a password — synonyms included.
//
// Reserved topics (reserved.go): a TOPIC resource naming one of Tollgate's
// own topics is answered TOPIC_AUTHORIZATION_FAILED with Kafka's message
// and no configs, as Kafka answers a topic the principal may not describe;
// the request is split after the broker configs' part (both edit the same
// decoded request), the answers merged — answered by Tollgate alone when
// nothing is left.

func (b *brokerConfigs) describe(who control.Initiator, req *kmsg.DescribeConfigsRequest) proxy.Verdict {
	if _, ok, _ := b.owner.Describe(who, "", []string{}, req.Version); !ok {
		// Not allowed to see Tollgate's settings: the request is the
		// upstream cluster's alone, as if Tollgate were not there.
		return proxy.Verdict{}
	}
	var locals []ownedConfigs
	fwd := req.Resources[:0:0]
	touched := false
	for _, res := range req.Resources {
		if res.ResourceType != kmsg.ConfigResourceTypeBroker {
			fwd = append(fwd, res)
			continue
		}
		var owned, other []string
		if res.ConfigNames != nil {
			owned, other = splitOwnedNames(res.ConfigNames)
			if len(owned) == 0 {
				fwd = append(fwd, res)
				continue
			}
		}
		touched = true
		cfgs, ok, err := b.owner.Describe(who, res.ResourceName, owned, req.Version)
		l := ownedConfigs{name: res.ResourceName, configs: cfgs, denied: !ok, err: err}
		switch {
		case res.ConfigNames == nil:
			l.replace = true
			fwd = append(fwd, res)
		case len(other) == 0:
			l.whole = true
		default:
			res.ConfigNames = other
			fwd = append(fwd, res)
			l.replace = true
		}
		locals = append(locals, l)
	}
	if !touched {
		return proxy.Verdict{}
	}
	req.Resources = fwd
	return answerOrForward(req, len(fwd), mergeOwnedConfigs(locals))
}

// ownedConfigs is Tollgate's answer for the configs it owns of one BROKER
// resource of a DescribeConfigs request.
type ownedConfigs struct {
	name    string
	configs []kmsg.DescribeConfigsResponseResourceConfig
	denied  bool
	err     error
	whole   bool // answered entirely here (not forwarded)
	replace bool // upstream answers too: replace its owned entries
}

// splitOwnedNames splits the config names of a BROKER resource into those
// Tollgate owns and the broker's.
func splitOwnedNames(names []string) (owned, other []string) {
	for _, n := range names {
		if control.IsOwnedBrokerConfig(n) {
			owned = append(owned, n)
		} else {
			other = append(other, n)
		}
	}
	return owned, other
}

// mergeOwnedConfigs returns the Merge that puts Tollgate's answers into the
// upstream's DescribeConfigs response (or into an empty one, when nothing
// was forwarded): a resource answered here alone is added, the others'
// owned entries replaced.
func mergeOwnedConfigs(locals []ownedConfigs) func(kmsg.Response) {
	return func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeConfigsResponse)
		for _, l := range locals {
			if l.whole {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, l.name
				l.fill(&rr)
				dr.Resources = append(dr.Resources, rr)
				continue
			}
			for i := range dr.Resources {
				rr := &dr.Resources[i]
				if rr.ResourceType == kmsg.ConfigResourceTypeBroker && rr.ResourceName == l.name && rr.ErrorCode == 0 {
					l.fill(rr)
				}
			}
		}
	}
}

// fill writes l into the response's resource: its error, or its configs
// (in place of the broker's owned entries when l.replace).
func (l ownedConfigs) fill(rr *kmsg.DescribeConfigsResponseResource) {
	switch {
	case l.denied:
		rr.ErrorCode, rr.ErrorMessage, rr.Configs = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("Cluster authorization failed."), nil
	case l.err != nil:
		rr.ErrorCode, rr.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(l.err.Error())
	default:
		if l.replace {
			kept := rr.Configs[:0]
			for _, c := range rr.Configs {
				if !control.IsOwnedBrokerConfig(c.Name) {
					kept = append(kept, c)
				}
			}
			rr.Configs = kept
		}
		rr.Configs = append(rr.Configs, l.configs...)
	}
}

// Broker configs that name upstream addresses (spec: kafka-proxying §2.3).
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

// scrubBrokerAddresses rewrites the address-bearing configs of every
// BROKER resource in a DescribeConfigs response, synonyms included.
func scrubBrokerAddresses(c proxy.Conn, r *kmsg.DescribeConfigsResponse) {
	for i := range r.Resources {
		res := &r.Resources[i]
		if res.ResourceType != kmsg.ConfigResourceTypeBroker {
			continue
		}
		own := ownAddress(c, res.ResourceName)
		for j := range res.Configs {
			cf := &res.Configs[j]
			switch {
			case listenerConfigs[cf.Name]:
				if cf.Value != nil {
					cf.Value = own
					cf.IsSensitive = own == nil
				}
				for k := range cf.ConfigSynonyms {
					if cf.ConfigSynonyms[k].Value != nil {
						cf.ConfigSynonyms[k].Value = own
					}
				}
			case addressConfigs[cf.Name]:
				if cf.Value != nil {
					cf.Value, cf.IsSensitive = nil, true
				}
				for k := range cf.ConfigSynonyms {
					cf.ConfigSynonyms[k].Value = nil
				}
			}
		}
	}
}

// ownAddress is "LISTENER://host:port" for a broker resource name (a node
// id) whose port this listener has open; nil otherwise (the cluster
// default, or a broker not seen yet).
func ownAddress(c proxy.Conn, resource string) *string {
	id, err := strconv.ParseInt(resource, 10, 32)
	if err != nil || id < 0 {
		return nil
	}
	host, port, ok := c.BrokerAddress(int32(id))
	if !ok {
		return nil
	}
	v := c.Listener().Name + "://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
	return &v
}

func (f *reservedTopics) describeConfigs(req *kmsg.DescribeConfigsRequest) proxy.Verdict {
	return refuse(req, &req.Resources, func(r *kmsg.DescribeConfigsRequestResource) bool {
		return f.reservedResource(r.ResourceType, r.ResourceName)
	}, func(dr *kmsg.DescribeConfigsResponse, r kmsg.DescribeConfigsRequestResource) {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		rr.ErrorCode, rr.ErrorMessage = taf, kmsg.StringPtr(topicAuthFailed)
		dr.Resources = append(dr.Resources, rr)
	})
}

// describe answers the CLIENT_METRICS resources (clientmetrics.go):
// their configs as Kafka 4's broker lists them (control.ClientMetrics).
func (m *clientMetrics) describe(who control.Initiator, req *kmsg.DescribeConfigsRequest) proxy.Verdict {
	return takeLocal(req, &req.Resources, func(r *kmsg.DescribeConfigsRequestResource) bool {
		return isClientMetrics(r.ResourceType)
	}, func(r kmsg.DescribeConfigsRequestResource) kmsg.DescribeConfigsResponseResource {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		cfgs, code, msg := m.ctl.Describe(who, r.ResourceName, r.ConfigNames, req.Version >= 1 && req.IncludeSynonyms, req.IncludeDocumentation)
		rr.Configs, rr.ErrorCode = cfgs, code
		if code != 0 {
			rr.ErrorMessage = kmsg.StringPtr(msg)
		}
		return rr
	}, func(dr *kmsg.DescribeConfigsResponse, rr kmsg.DescribeConfigsResponseResource) {
		dr.Resources = append(dr.Resources, rr)
	})
}
