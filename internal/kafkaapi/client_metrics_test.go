package kafkaapi

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/telemetry"
)

func clientMetricsFilter(t *testing.T) (*clientMetrics, *[]telemetry.ClientSubscription) {
	t.Helper()
	cp := newControlPlane(t)
	var last []telemetry.ClientSubscription
	ctl := &control.ClientMetrics{Store: cp.store, Audit: cp.audit, Authz: control.Admins{Principals: []string{"User:admin"}},
		OnChange: func(s []telemetry.ClientSubscription) { last = s }}
	return &clientMetrics{ctl: ctl}, &last
}

// The CLIENT_METRICS resources of a config request are Tollgate's: taken
// out, answered from the control plane, and merged into the upstream's
// answer to the rest.
func TestClientMetricsSplit(t *testing.T) {
	f, subs := clientMetricsFilter(t)
	admin := connAs(adminUser)

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.SetVersion(1)
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeClientMetrics, "java"}, {kmsg.ConfigResourceTypeTopic, "t"}} {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "interval.ms", kmsg.StringPtr("1000")
		if r.typ == kmsg.ConfigResourceTypeTopic {
			c.Name = "retention.ms"
		}
		res.Configs = append(res.Configs, c)
		alter.Resources = append(alter.Resources, res)
	}
	x := pass(t, f, admin, alter, func(sent kmsg.Request) kmsg.Response {
		r := sent.(*kmsg.IncrementalAlterConfigsRequest)
		if len(r.Resources) != 1 || r.Resources[0].ResourceType != kmsg.ConfigResourceTypeTopic {
			t.Fatalf("forwarded %+v, want the topic alone", r.Resources)
		}
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		resp.Resources = append(resp.Resources, rr)
		return resp
	})
	ar := x.resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(ar.Resources) != 2 || ar.Resources[1].ResourceType != kmsg.ConfigResourceTypeClientMetrics || ar.Resources[1].ErrorCode != 0 {
		t.Fatalf("answer %+v", ar.Resources)
	}
	if len(*subs) != 1 || (*subs)[0].Name != "java" || (*subs)[0].Interval.Milliseconds() != 1000 {
		t.Fatalf("the telemetry manager was given %+v", *subs)
	}

	// A principal who is no quota admin may not alter them.
	deny := kmsg.NewPtrIncrementalAlterConfigsRequest()
	deny.Resources = alter.Resources[:1]
	x = pass(t, f, connAs(aliceUser), deny, nil)
	if r := x.resp.(*kmsg.IncrementalAlterConfigsResponse).Resources; len(r) != 1 || r[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a non-admin's alter: %+v", r)
	}

	// Describe: Tollgate's configs, by name, defaults included.
	desc := kmsg.NewPtrDescribeConfigsRequest()
	desc.SetVersion(4)
	desc.IncludeSynonyms = true
	for _, r := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics, kmsg.ConfigResourceTypeTopic} {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = r, "java"
		desc.Resources = append(desc.Resources, res)
	}
	x = pass(t, f, connAs(aliceUser), desc, func(sent kmsg.Request) kmsg.Response {
		r := sent.(*kmsg.DescribeConfigsRequest)
		if len(r.Resources) != 1 || r.Resources[0].ResourceType != kmsg.ConfigResourceTypeTopic {
			t.Fatalf("forwarded %+v", r.Resources)
		}
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "java"
		resp.Resources = append(resp.Resources, rr)
		return resp
	})
	dr := x.resp.(*kmsg.DescribeConfigsResponse).Resources
	if len(dr) != 2 || dr[1].ResourceType != kmsg.ConfigResourceTypeClientMetrics || len(dr[1].Configs) != 3 {
		t.Fatalf("describe %+v", dr)
	}
	iv := dr[1].Configs[0]
	if iv.Name != "interval.ms" || str(iv.Value) != "1000" || iv.Source != kmsg.ConfigSourceClientMetricsConfig || len(iv.ConfigSynonyms) != 1 ||
		dr[1].Configs[1].Source != kmsg.ConfigSourceDefaultConfig || iv.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("described %+v", dr[1].Configs)
	}

	// ListConfigResources: v0 and v1 of CLIENT_METRICS alone are
	// answered here; v1 of every type is forwarded, its CLIENT_METRICS
	// entries Tollgate's.
	names := func(r kmsg.Response) []string {
		var out []string
		for _, c := range r.(*kmsg.ListConfigResourcesResponse).ConfigResources {
			out = append(out, c.Name)
		}
		return out
	}
	list := kmsg.NewPtrListConfigResourcesRequest()
	list.SetVersion(0)
	if x = pass(t, f, admin, list, nil); !x.answeredLocally() || !slices.Equal(names(x.resp), []string{"java"}) {
		t.Fatalf("v0: %+v", x.resp)
	}
	list.SetVersion(1)
	list.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	if x = pass(t, f, admin, list, nil); !slices.Equal(names(x.resp), []string{"java"}) {
		t.Fatalf("v1, CLIENT_METRICS: %+v", x.resp)
	}
	list.ResourceTypes = nil
	x = pass(t, f, admin, list, func(sent kmsg.Request) kmsg.Response {
		resp := sent.(*kmsg.ListConfigResourcesRequest).ResponseKind().(*kmsg.ListConfigResourcesResponse)
		for _, c := range []struct {
			name string
			typ  kmsg.ConfigResourceType
		}{{"upstreams-own", kmsg.ConfigResourceTypeClientMetrics}, {"1", kmsg.ConfigResourceTypeBroker}} {
			r := kmsg.NewListConfigResourcesResponseConfigResource()
			r.Name, r.Type = c.name, int8(c.typ)
			resp.ConfigResources = append(resp.ConfigResources, r)
		}
		return resp
	})
	if !slices.Equal(names(x.resp), []string{"1", "java"}) {
		t.Fatalf("v1, every type: %v", names(x.resp))
	}
	list.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeTopic)}
	if x = pass(t, f, admin, list, func(kmsg.Request) kmsg.Response { return kmsg.NewPtrListConfigResourcesResponse() }); x.verdict.Forward != nil || x.verdict.Merge != nil {
		t.Fatalf("v1 of topics only was edited: %+v", x.verdict)
	}
	// A principal who may not describe configs.
	list.SetVersion(0)
	if x = pass(t, f, connAs(principal.AnonymousPrincipal), list, nil); x.resp.(*kmsg.ListConfigResourcesResponse).ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("anonymous list: %+v", x.resp)
	}
}
