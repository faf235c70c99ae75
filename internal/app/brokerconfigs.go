package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
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

const resourceBroker = kmsg.ConfigResourceTypeBroker

// brokerConfigs routes the broker-config APIs: the keys Tollgate owns on
// BROKER resources are answered by Tollgate, everything else goes
// upstream, and the two answers are merged into one response.
func (r *router) brokerConfigs(c *principal.ConnInfo, req *proxy.Request) (proxy.Verdict, bool) {
	kr := kmsg.RequestForKey(req.Key)
	kr.SetVersion(req.Version)
	if err := kr.ReadFrom(req.Payload[req.BodyOffset:]); err != nil {
		return proxy.Verdict{Close: proxy.ReasonBadFrame}, true
	}
	who := control.FromConn(c, req.ClientID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch k := kr.(type) {
	case *kmsg.DescribeConfigsRequest:
		return r.describeConfigs(who, k)
	case *kmsg.AlterConfigsRequest:
		return r.alterConfigs(ctx, who, k)
	case *kmsg.IncrementalAlterConfigsRequest:
		return r.incrementalAlterConfigs(ctx, who, k)
	}
	return proxy.Verdict{}, false
}

func (r *router) describeConfigs(who control.Initiator, req *kmsg.DescribeConfigsRequest) (proxy.Verdict, bool) {
	if _, ok, _ := r.brokers.Describe(who, []string{}, req.Version); !ok {
		// Not allowed to see Tollgate's settings: the request is the
		// upstream cluster's alone, as if Tollgate were not there.
		return proxy.Verdict{}, false
	}
	type local struct {
		name    string
		configs []kmsg.DescribeConfigsResponseResourceConfig
		denied  bool
		err     error
		whole   bool // answered entirely here (not forwarded)
		replace bool // upstream answers too: replace its owned entries
	}
	var locals []local
	fwd := req.Resources[:0:0]
	touched := false
	for _, res := range req.Resources {
		if res.ResourceType != resourceBroker {
			fwd = append(fwd, res)
			continue
		}
		var owned, other []string
		if res.ConfigNames != nil {
			for _, n := range res.ConfigNames {
				if control.IsOwnedBrokerConfig(n) {
					owned = append(owned, n)
				} else {
					other = append(other, n)
				}
			}
			if len(owned) == 0 {
				fwd = append(fwd, res)
				continue
			}
		}
		touched = true
		cfgs, ok, err := r.brokers.Describe(who, owned, req.Version)
		l := local{name: res.ResourceName, configs: cfgs, denied: !ok, err: err}
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
		return proxy.Verdict{}, false
	}
	fill := func(rr *kmsg.DescribeConfigsResponseResource, l local) {
		switch {
		case l.denied:
			rr.ErrorCode, rr.ErrorMessage, rr.Configs = 31, kmsg.StringPtr("Cluster authorization failed."), nil
		case l.err != nil:
			rr.ErrorCode, rr.ErrorMessage = -1, kmsg.StringPtr(l.err.Error())
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
	merge := func(resp kmsg.Response) {
		dr := resp.(*kmsg.DescribeConfigsResponse)
		for _, l := range locals {
			if l.whole {
				rr := kmsg.NewDescribeConfigsResponseResource()
				rr.ResourceType, rr.ResourceName = resourceBroker, l.name
				fill(&rr, l)
				dr.Resources = append(dr.Resources, rr)
				continue
			}
			for i := range dr.Resources {
				rr := &dr.Resources[i]
				if rr.ResourceType == resourceBroker && rr.ResourceName == l.name && rr.ErrorCode == 0 {
					fill(rr, l)
				}
			}
		}
	}
	if len(fwd) == 0 {
		resp := req.ResponseKind()
		merge(resp)
		return proxy.Verdict{Respond: resp}, true
	}
	req.Resources = fwd
	return proxy.Verdict{Forward: req, Merge: merge}, true
}

type brokerResult struct {
	name  string
	code  int16
	msg   string
	whole bool
}

func (r *router) alterConfigs(ctx context.Context, who control.Initiator, req *kmsg.AlterConfigsRequest) (proxy.Verdict, bool) {
	var results []brokerResult
	fwd := req.Resources[:0:0]
	for _, res := range req.Resources {
		if res.ResourceType != resourceBroker {
			fwd = append(fwd, res)
			continue
		}
		var owned []control.Change
		other := res.Configs[:0:0]
		for _, c := range res.Configs {
			if control.IsOwnedBrokerConfig(c.Name) {
				owned = append(owned, control.Change{Key: c.Name, Value: c.Value})
			} else {
				other = append(other, c)
			}
		}
		// AlterConfigs replaces the resource's dynamic config: Tollgate's
		// part is replaced even when the request names none of its keys.
		code, msg := r.brokers.Alter(ctx, who, res.ResourceName, owned, true, req.ValidateOnly)
		results = append(results, brokerResult{name: res.ResourceName, code: code, msg: msg})
		if code == 0 {
			res.Configs = other
			fwd = append(fwd, res)
		} else {
			results[len(results)-1].whole = true
		}
	}
	if len(results) == 0 {
		return proxy.Verdict{}, false
	}
	merge := func(resp kmsg.Response) {
		ar := resp.(*kmsg.AlterConfigsResponse)
		for _, br := range results {
			if br.whole {
				rr := kmsg.NewAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = resourceBroker, br.name, br.code, kmsg.StringPtr(br.msg)
				ar.Resources = append(ar.Resources, rr)
			}
		}
	}
	if len(fwd) == 0 {
		resp := req.ResponseKind()
		merge(resp)
		return proxy.Verdict{Respond: resp}, true
	}
	req.Resources = fwd
	return proxy.Verdict{Forward: req, Merge: merge}, true
}

func (r *router) incrementalAlterConfigs(ctx context.Context, who control.Initiator, req *kmsg.IncrementalAlterConfigsRequest) (proxy.Verdict, bool) {
	var results []brokerResult
	fwd := req.Resources[:0:0]
	for _, res := range req.Resources {
		if res.ResourceType != resourceBroker {
			fwd = append(fwd, res)
			continue
		}
		var owned []control.Change
		other := res.Configs[:0:0]
		code, msg := int16(0), ""
		for _, c := range res.Configs {
			if !control.IsOwnedBrokerConfig(c.Name) {
				other = append(other, c)
				continue
			}
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				owned = append(owned, control.Change{Key: c.Name, Value: c.Value})
			case kmsg.IncrementalAlterConfigOpDelete:
				owned = append(owned, control.Change{Key: c.Name})
			default:
				code, msg = 40, fmt.Sprintf("Config value %s is not allowed for config key: %s", strings.ToLower(c.Op.String()), c.Name)
			}
		}
		if len(owned) == 0 && code == 0 {
			fwd = append(fwd, res)
			continue
		}
		if code == 0 {
			code, msg = r.brokers.Alter(ctx, who, res.ResourceName, owned, false, req.ValidateOnly)
		}
		br := brokerResult{name: res.ResourceName, code: code, msg: msg}
		if code == 0 && len(other) > 0 {
			res.Configs = other
			fwd = append(fwd, res)
		} else {
			br.whole = true
		}
		results = append(results, br)
	}
	if len(results) == 0 {
		return proxy.Verdict{}, false
	}
	merge := func(resp kmsg.Response) {
		ar := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, br := range results {
			if br.whole {
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode = resourceBroker, br.name, br.code
				if br.code != 0 {
					rr.ErrorMessage = kmsg.StringPtr(br.msg)
				}
				ar.Resources = append(ar.Resources, rr)
			}
		}
	}
	if len(fwd) == 0 {
		resp := req.ResponseKind()
		merge(resp)
		return proxy.Verdict{Respond: resp}, true
	}
	req.Resources = fwd
	return proxy.Verdict{Forward: req, Merge: merge}, true
}
