package kafkaapi

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/audit"
	"github.com/tollgate/tollgate/internal/principal"
)

const (
	broker = kmsg.ConfigResourceTypeBroker
	topic  = kmsg.ConfigResourceTypeTopic
)

// DescribeConfigs

func describeRes(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, names
	return r
}

func describeConfigs(version int16, res ...kmsg.DescribeConfigsRequestResource) *kmsg.DescribeConfigsRequest {
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.Version, r.Resources, r.IncludeSynonyms = version, res, true
	return r
}

// brokerOwn are the configs the upstream broker has for a BROKER resource:
// one Tollgate owns (the broker's own connection limit), ordinary ones.
var brokerOwn = map[string]string{
	"max.connections":  "1000",
	"log.retention.ms": "604800000",
	"num.io.threads":   "8",
}

// upstreamDescribe answers each resource as a broker would: the configs
// named, or all of brokerOwn; a topic has retention.ms.
func upstreamDescribe(t *testing.T) func(kmsg.Request) kmsg.Response {
	return func(req kmsg.Request) kmsg.Response {
		dr := req.(*kmsg.DescribeConfigsRequest)
		resp := dr.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, res := range dr.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			all := map[string]string{"retention.ms": "1000"}
			if res.ResourceType == broker {
				all = brokerOwn
			}
			names := res.ConfigNames
			if names == nil {
				for n := range all {
					names = append(names, n)
				}
				slices.Sort(names)
			}
			for _, n := range names {
				v, ok := all[n]
				if !ok {
					t.Errorf("the broker was asked for %s of %s %q", n, res.ResourceType, res.ResourceName)
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.Source = n, kmsg.StringPtr(v), kmsg.ConfigSourceStaticBrokerConfig
				rr.Configs = append(rr.Configs, c)
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	}
}

// describedConfigs renders a DescribeConfigs answer: per resource, its
// error or its configs as name=value(source), sorted.
func describedConfigs(resp kmsg.Response) map[string]string {
	out := map[string]string{}
	dr := resp.(*kmsg.DescribeConfigsResponse)
	for _, rr := range dr.Resources {
		key := fmt.Sprintf("%s %q", rr.ResourceType, rr.ResourceName)
		if rr.ErrorCode != 0 {
			out[key] = fmt.Sprintf("error %d", rr.ErrorCode)
			continue
		}
		var cs []string
		for _, c := range rr.Configs {
			if dr.Version == 0 { // no source before v1
				cs = append(cs, fmt.Sprintf("%s=%s", c.Name, str(c.Value)))
				continue
			}
			cs = append(cs, fmt.Sprintf("%s=%s(%s)", c.Name, str(c.Value), c.Source))
		}
		slices.Sort(cs)
		out[key] = strings.Join(cs, " ")
	}
	return out
}

// describedSent renders the resources a forwarded DescribeConfigs asks for.
func describedSent(req kmsg.Request) []string {
	var out []string
	if req == nil {
		return nil
	}
	for _, r := range req.(*kmsg.DescribeConfigsRequest).Resources {
		names := "all"
		if r.ConfigNames != nil {
			names = strings.Join(r.ConfigNames, ",")
		}
		out = append(out, fmt.Sprintf("%s %q %s", r.ResourceType, r.ResourceName, names))
	}
	return out
}

// withoutSource strips the "(SOURCE)" of a rendered config, for v0.
var withoutSource = regexp.MustCompile(`\([A-Z_]+\)`)

func TestDescribeConfigsSplit(t *testing.T) {
	const unlimited = "2147483647(DEFAULT_CONFIG)"
	sorted := func(cs ...string) string {
		slices.Sort(cs)
		return strings.Join(cs, " ")
	}
	for _, tc := range []struct {
		name      string
		who       principal.Principal
		req       []kmsg.DescribeConfigsRequestResource
		local     bool     // answered without the broker
		untouched bool     // forwarded as the client sent it
		sent      []string // what the broker is asked
		want      map[string]string
	}{
		{
			name: "owned and other keys of a broker: split and merged",
			who:  adminUser,
			req:  []kmsg.DescribeConfigsRequestResource{describeRes(broker, "0", "max.connections", "log.retention.ms"), describeRes(topic, "t", "retention.ms")},
			sent: []string{`BROKER "0" log.retention.ms`, `TOPIC "t" retention.ms`},
			want: map[string]string{
				`BROKER "0"`: "log.retention.ms=604800000(STATIC_BROKER_CONFIG) max.connections=" + unlimited,
				`TOPIC "t"`:  "retention.ms=1000(STATIC_BROKER_CONFIG)",
			},
		},
		{
			name:  "owned keys only: answered by Tollgate",
			who:   adminUser,
			req:   []kmsg.DescribeConfigsRequestResource{describeRes(broker, "0", "max.connections", "max.connections.per.ip")},
			local: true,
			want:  map[string]string{`BROKER "0"`: "max.connections.per.ip=" + unlimited + " max.connections=" + unlimited},
		},
		{
			// A listener's keys are not Kafka config names: a broker
			// lists them once set (measured against Kafka 3.9 and 4.4).
			name: "every key of a broker: Tollgate's replace the broker's owned ones",
			who:  aliceUser, // any authenticated principal may describe
			req:  []kmsg.DescribeConfigsRequestResource{describeRes(broker, "0")},
			sent: []string{`BROKER "0" all`},
			want: map[string]string{`BROKER "0"`: sorted(
				"max.connection.creation.rate="+unlimited,
				"max.connections.per.ip.overrides=(DEFAULT_CONFIG)",
				"max.connections.per.ip="+unlimited,
				"max.connections="+unlimited,
				"log.retention.ms=604800000(STATIC_BROKER_CONFIG)",
				"num.io.threads=8(STATIC_BROKER_CONFIG)",
			)},
		},
		{
			name:      "no owned key: forwarded untouched",
			who:       adminUser,
			req:       []kmsg.DescribeConfigsRequestResource{describeRes(broker, "0", "num.io.threads"), describeRes(topic, "t")},
			untouched: true,
			sent:      []string{`BROKER "0" num.io.threads`, `TOPIC "t" all`},
			want: map[string]string{
				`BROKER "0"`: "num.io.threads=8(STATIC_BROKER_CONFIG)",
				`TOPIC "t"`:  "retention.ms=1000(STATIC_BROKER_CONFIG)",
			},
		},
		{
			name:      "a principal that may not describe Tollgate's settings: as if Tollgate were not there",
			who:       principal.AnonymousPrincipal,
			req:       []kmsg.DescribeConfigsRequestResource{describeRes(broker, "0", "max.connections", "log.retention.ms")},
			untouched: true,
			sent:      []string{`BROKER "0" max.connections,log.retention.ms`},
			want:      map[string]string{`BROKER "0"`: "log.retention.ms=604800000(STATIC_BROKER_CONFIG) max.connections=1000(STATIC_BROKER_CONFIG)"},
		},
	} {
		for _, v := range []int16{0, 4} {
			t.Run(fmt.Sprintf("%s/v%d", tc.name, v), func(t *testing.T) {
				cp := newControlPlane(t)
				f := &brokerConfigs{owner: cp.brokers}
				var up func(kmsg.Request) kmsg.Response
				if !tc.local {
					up = upstreamDescribe(t)
				}
				x := pass(t, f, connAs(tc.who), describeConfigs(v, tc.req...), up)
				if x.answeredLocally() != tc.local {
					t.Fatalf("answered locally = %v, want %v", x.answeredLocally(), tc.local)
				}
				if tc.untouched && (x.verdict.Forward != nil || x.verdict.Merge != nil) {
					t.Errorf("the request was rewritten (verdict %+v), want it forwarded untouched", x.verdict)
				}
				if got := describedSent(x.sent); !tc.local && fmt.Sprint(got) != fmt.Sprint(tc.sent) {
					t.Errorf("the broker was asked %q, want %q", got, tc.sent)
				}
				want := tc.want
				if v == 0 {
					want = map[string]string{}
					for k, w := range tc.want {
						want[k] = withoutSource.ReplaceAllString(w, "")
					}
				}
				if got := describedConfigs(x.resp); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("the client sees\n%v\nwant\n%v", got, want)
				}
			})
		}
	}
}

// Tollgate's entries carry their source and, from v1, synonyms, as a
// broker's would; a value set through the API is dynamic.
func TestDescribeConfigsOwnedSourceAndSynonyms(t *testing.T) {
	cp := newControlPlane(t)
	f := &brokerConfigs{owner: cp.brokers}
	set := incrementalAlter(false, incrementalRes(broker, "", setOp("max.connections", "500")))
	if x := pass(t, f, connAs(adminUser), set, nil); alterResults(x.resp)[`BROKER ""`] != "ok" {
		t.Fatalf("set max.connections: %v", alterResults(x.resp))
	}
	for _, v := range []int16{0, 1, 4} {
		x := pass(t, f, connAs(adminUser), describeConfigs(v, describeRes(broker, "0", "max.connections")), nil)
		rr := x.resp.(*kmsg.DescribeConfigsResponse).Resources
		if len(rr) != 1 || len(rr[0].Configs) != 1 {
			t.Fatalf("v%d: %+v", v, rr)
		}
		c := rr[0].Configs[0]
		if str(c.Value) != "500" || (v > 0 && c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig) || c.IsDefault {
			t.Errorf("v%d: max.connections=%s source %s default %v, want 500 DYNAMIC_DEFAULT_BROKER_CONFIG", v, str(c.Value), c.Source, c.IsDefault)
		}
		var syn []string
		for _, s := range c.ConfigSynonyms {
			syn = append(syn, fmt.Sprintf("%s=%s(%s)", s.Name, str(s.Value), s.Source))
		}
		want := []string{"max.connections=500(DYNAMIC_DEFAULT_BROKER_CONFIG)", "max.connections=2147483647(DEFAULT_CONFIG)"}
		if v == 0 {
			want = nil // synonyms are v1+
		}
		if fmt.Sprint(syn) != fmt.Sprint(want) {
			t.Errorf("v%d: synonyms %v, want %v", v, syn, want)
		}
	}
}

// A broker resource the broker answered with an error keeps the error:
// Tollgate's part is not merged into it.
func TestDescribeConfigsBrokerError(t *testing.T) {
	cp := newControlPlane(t)
	f := &brokerConfigs{owner: cp.brokers}
	x := pass(t, f, connAs(adminUser), describeConfigs(4, describeRes(broker, "9", "max.connections", "num.io.threads")), func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = broker, "9", kerr.InvalidRequest.Code
		resp.Resources = append(resp.Resources, rr)
		return resp
	})
	if got := describedConfigs(x.resp); got[`BROKER "9"`] != fmt.Sprintf("error %d", kerr.InvalidRequest.Code) {
		t.Errorf("client sees %v, want the broker's error", got)
	}
}

// Scrubbing: configs that name upstream hosts are not handed out.
func TestDescribeConfigsScrubsAddresses(t *testing.T) {
	cfg := func(name, value string, sensitive bool, synonyms ...string) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.IsSensitive, c.Source = name, kmsg.StringPtr(value), sensitive, kmsg.ConfigSourceStaticBrokerConfig
		if value == "<null>" {
			c.Value = nil
		}
		for _, s := range synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = name, kmsg.StringPtr(s), kmsg.ConfigSourceStaticBrokerConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
		return c
	}
	upstreamConfigs := func() []kmsg.DescribeConfigsResponseResourceConfig {
		return []kmsg.DescribeConfigsResponseResourceConfig{
			cfg("listeners", "PLAINTEXT://10.0.0.1:9092,CONTROLLER://10.0.0.1:9093", false, "PLAINTEXT://10.0.0.1:9092,CONTROLLER://10.0.0.1:9093"),
			cfg("advertised.listeners", "PLAINTEXT://kafka-0.internal:9092", false, "PLAINTEXT://kafka-0.internal:9092"),
			cfg("controller.quorum.voters", "3000@10.0.0.30:9093", false, "3000@10.0.0.30:9093"),
			cfg("controller.quorum.bootstrap.servers", "10.0.0.30:9093", false, "10.0.0.30:9093"),
			cfg("zookeeper.connect", "zk:2181/kafka", false, "zk:2181/kafka"),
			cfg("host.name", "10.0.0.1", false),
			cfg("port", "9092", false),
			cfg("advertised.host.name", "kafka-0.internal", false),
			cfg("advertised.port", "9092", false),
			cfg("log.retention.ms", "604800000", false, "604800000"),
			cfg("ssl.keystore.password", "<null>", true),
		}
	}
	upstream := func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, res := range req.(*kmsg.DescribeConfigsRequest).Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			if res.ResourceType == broker {
				rr.Configs = upstreamConfigs()
			} else {
				rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{cfg("cleanup.policy", "compact", false)}
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	}
	// What each config becomes: its value, sensitivity and synonyms' values.
	hidden := "<null> sensitive []"
	scrubbed := map[string]string{
		"controller.quorum.voters":            "<null> sensitive [<null>]",
		"controller.quorum.bootstrap.servers": "<null> sensitive [<null>]",
		"zookeeper.connect":                   "<null> sensitive [<null>]",
		"host.name":                           hidden,
		"port":                                hidden,
		"advertised.host.name":                hidden,
		"advertised.port":                     hidden,
		"log.retention.ms":                    "604800000 plain [604800000]",
		"ssl.keystore.password":               hidden,
	}
	want := map[string]map[string]string{
		"0": {"listeners": "EXTERNAL://gw.example:40000 plain [EXTERNAL://gw.example:40000]", "advertised.listeners": "EXTERNAL://gw.example:40000 plain [EXTERNAL://gw.example:40000]"},
		"1": {"listeners": "EXTERNAL://gw.example:40001 plain [EXTERNAL://gw.example:40001]", "advertised.listeners": "EXTERNAL://gw.example:40001 plain [EXTERNAL://gw.example:40001]"},
		// A broker whose port is not open, and the cluster default:
		// nothing to give, so null and sensitive.
		"7": {"listeners": "<null> sensitive [<null>]", "advertised.listeners": "<null> sensitive [<null>]"},
		"":  {"listeners": "<null> sensitive [<null>]", "advertised.listeners": "<null> sensitive [<null>]"},
	}
	for _, withOwner := range []bool{false, true} {
		for _, v := range versions(1, maxVersion(32)) {
			t.Run(fmt.Sprintf("control plane %v/v%d", withOwner, v), func(t *testing.T) {
				f := &brokerConfigs{}
				if withOwner {
					f.owner = newControlPlane(t).brokers
				}
				req := describeConfigs(v, describeRes(broker, "0"), describeRes(broker, "1"), describeRes(broker, "7"), describeRes(broker, ""), describeRes(topic, "t"))
				x := pass(t, f, connAs(adminUser), req, upstream)
				for _, rr := range x.resp.(*kmsg.DescribeConfigsResponse).Resources {
					for _, c := range rr.Configs {
						got := str(c.Value) + " plain "
						if c.IsSensitive {
							got = str(c.Value) + " sensitive "
						}
						var syn []string
						for _, s := range c.ConfigSynonyms {
							syn = append(syn, str(s.Value))
						}
						got += "[" + strings.Join(syn, " ") + "]"
						var exp string
						switch {
						case rr.ResourceType == topic:
							exp = "compact plain []"
						case want[rr.ResourceName][c.Name] != "":
							exp = want[rr.ResourceName][c.Name]
						case scrubbed[c.Name] != "":
							exp = scrubbed[c.Name]
						default:
							continue // Tollgate's own keys (TestDescribeConfigsSplit)
						}
						if got != exp {
							t.Errorf("%s %q: %s is %s, want %s", rr.ResourceType, rr.ResourceName, c.Name, got, exp)
						}
					}
				}
			})
		}
	}
}

// AlterConfigs and IncrementalAlterConfigs

func alterRes(typ kmsg.ConfigResourceType, name string, kv ...string) kmsg.AlterConfigsRequestResource {
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, c)
	}
	return r
}

func alterConfigs(validateOnly bool, res ...kmsg.AlterConfigsRequestResource) *kmsg.AlterConfigsRequest {
	r := kmsg.NewPtrAlterConfigsRequest()
	r.Version, r.Resources, r.ValidateOnly = maxVersion(33), res, validateOnly
	return r
}

type incOp = kmsg.IncrementalAlterConfigsRequestResourceConfig

func op(o kmsg.IncrementalAlterConfigOp, name, value string) incOp {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, o
	if value != "" {
		c.Value = kmsg.StringPtr(value)
	}
	return c
}

func setOp(name, value string) incOp { return op(kmsg.IncrementalAlterConfigOpSet, name, value) }

func incrementalRes(typ kmsg.ConfigResourceType, name string, ops ...incOp) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = typ, name, ops
	return r
}

func incrementalAlter(validateOnly bool, res ...kmsg.IncrementalAlterConfigsRequestResource) *kmsg.IncrementalAlterConfigsRequest {
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r.Version, r.Resources, r.ValidateOnly = maxVersion(44), res, validateOnly
	return r
}

// upstreamAlter answers every resource of an alter with success.
var upstreamAlter = echo

// alterResults renders an alter answer: per resource, "ok" or its error
// code and message.
func alterResults(resp kmsg.Response) map[string]string {
	var rs []kmsg.AlterConfigsResponseResource
	switch r := resp.(type) {
	case *kmsg.AlterConfigsResponse:
		rs = r.Resources
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, rr := range r.Resources {
			rs = append(rs, kmsg.AlterConfigsResponseResource(rr)) // the same fields
		}
	}
	out := map[string]string{}
	for _, rr := range rs {
		r := "ok"
		if rr.ErrorCode != 0 {
			r = fmt.Sprintf("%d %s", rr.ErrorCode, str(rr.ErrorMessage))
		} else if rr.ErrorMessage != nil {
			r = "ok with message " + *rr.ErrorMessage
		}
		out[fmt.Sprintf("%s %q", rr.ResourceType, rr.ResourceName)] = r
	}
	return out
}

// alterSent renders the resources a forwarded alter carries.
func alterSent(req kmsg.Request) []string {
	var out []string
	switch r := req.(type) {
	case *kmsg.AlterConfigsRequest:
		for _, res := range r.Resources {
			var cs []string
			for _, c := range res.Configs {
				cs = append(cs, c.Name+"="+str(c.Value))
			}
			out = append(out, fmt.Sprintf("%s %q [%s]", res.ResourceType, res.ResourceName, strings.Join(cs, " ")))
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, res := range r.Resources {
			var cs []string
			for _, c := range res.Configs {
				cs = append(cs, fmt.Sprintf("%s %s=%s", c.Op, c.Name, str(c.Value)))
			}
			out = append(out, fmt.Sprintf("%s %q [%s]", res.ResourceType, res.ResourceName, strings.Join(cs, " ")))
		}
	}
	return out
}

var denied = fmt.Sprintf("%d Cluster authorization failed.", kerr.ClusterAuthorizationFailed.Code)

// alterCase is an alter (AlterConfigs, IncrementalAlterConfigs) through
// the broker-configs filter: who sends req, answered by Tollgate alone
// (local) or forwarded (untouched: as the client sent it) with the
// resources sent; the client's answer (want), Tollgate's broker configs
// before and after, and the audit's outcome when one is given.
type alterCase struct {
	name         string
	who          principal.Principal
	before       map[string]string // owned configs set first
	req          kmsg.Request
	local        bool
	untouched    bool
	sent         []string
	want         map[string]string
	dynamic      map[string]string // owned configs afterwards
	auditOutcome audit.Outcome
}

func runAlterCases(t *testing.T, cases []alterCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := newControlPlane(t)
			f := &brokerConfigs{owner: cp.brokers}
			if tc.before != nil {
				var kv []string
				for k, v := range tc.before {
					kv = append(kv, k, v)
				}
				x := pass(t, f, connAs(adminUser), alterConfigs(false, alterRes(broker, "", kv...)), upstreamAlter)
				if fmt.Sprint(cp.dynamic(t)) != fmt.Sprint(tc.before) {
					t.Fatalf("setting up: %v, dynamic %v", alterResults(x.resp), cp.dynamic(t))
				}
			}
			changes := cp.brokerChanges.Load()
			var up func(kmsg.Request) kmsg.Response
			if !tc.local {
				up = upstreamAlter
			}
			x := pass(t, f, connAs(tc.who), tc.req, up)
			if x.answeredLocally() != tc.local {
				t.Fatalf("answered locally = %v, want %v", x.answeredLocally(), tc.local)
			}
			if tc.untouched && (x.verdict.Forward != nil || x.verdict.Merge != nil) {
				t.Errorf("rewritten (verdict %+v), want forwarded untouched", x.verdict)
			}
			if got := alterSent(x.sent); fmt.Sprint(got) != fmt.Sprint(tc.sent) {
				t.Errorf("the broker got %q, want %q", got, tc.sent)
			}
			if got := alterResults(x.resp); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("the client sees %v, want %v", got, tc.want)
			}
			if got := cp.dynamic(t); fmt.Sprint(got) != fmt.Sprint(tc.dynamic) {
				t.Errorf("Tollgate's broker configs are %v, want %v", got, tc.dynamic)
			}
			if x.sent != nil && validateOnly(x.sent) != validateOnly(tc.req) {
				t.Errorf("validate_only forwarded as %v", !validateOnly(tc.req))
			}
			applied := fmt.Sprint(tc.dynamic) != fmt.Sprint(tc.before)
			if got := cp.brokerChanges.Load() - changes; (got > 0) != applied {
				t.Errorf("%d changes applied to the data path, want applied=%v", got, applied)
			}
			if tc.auditOutcome != "" {
				if ev := cp.lastAudit(t); ev.Outcome != tc.auditOutcome || ev.Action != audit.ActionAlterBrokerConfigs {
					t.Errorf("audited %s %s, want %s %s", ev.Action, ev.Outcome, audit.ActionAlterBrokerConfigs, tc.auditOutcome)
				}
			}
		})
	}
}

// validateOnly is an alter's validate_only.
func validateOnly(r kmsg.Request) bool {
	return reflect.ValueOf(r).Elem().FieldByName("ValidateOnly").Bool()
}

func TestAlterConfigsSplit(t *testing.T) {
	runAlterCases(t, []alterCase{
		{
			name: "owned and other keys: Tollgate applies its part, the rest is forwarded",
			who:  adminUser,
			req:  alterConfigs(false, alterRes(broker, "", "max.connections", "100", "log.retention.ms", "1000"), alterRes(topic, "t", "retention.ms", "5")),
			sent: []string{`BROKER "" [log.retention.ms=1000]`, `TOPIC "t" [retention.ms=5]`},
			want: map[string]string{`BROKER ""`: "ok", `TOPIC "t"`: "ok"},
			// AlterConfigs replaces the resource's whole dynamic config.
			before:       map[string]string{"max.connections.per.ip": "10"},
			dynamic:      map[string]string{"max.connections": "100"},
			auditOutcome: audit.Applied,
		},
		{
			name: "owned keys only: still forwarded, since the broker's part of the config is replaced (by nothing)",
			who:  adminUser,
			req:  alterConfigs(false, alterRes(broker, "0", "max.connections", "100")),
			sent: []string{`BROKER "0" []`},
			want: map[string]string{`BROKER "0"`: "ok"},
			// A value set on one broker id is the gateway's (control.BrokerConfigs).
			dynamic:      map[string]string{"max.connections": "100"},
			auditOutcome: audit.Applied,
		},
		{
			name:         "no owned key on a broker: Tollgate's part is replaced too",
			who:          adminUser,
			before:       map[string]string{"max.connections": "100"},
			req:          alterConfigs(false, alterRes(broker, "", "log.retention.ms", "1000")),
			sent:         []string{`BROKER "" [log.retention.ms=1000]`},
			want:         map[string]string{`BROKER ""`: "ok"},
			dynamic:      map[string]string{},
			auditOutcome: audit.Applied,
		},
		{
			name:         "validate_only: nothing applied",
			who:          adminUser,
			req:          alterConfigs(true, alterRes(broker, "", "max.connections", "100", "log.retention.ms", "1000")),
			sent:         []string{`BROKER "" [log.retention.ms=1000]`},
			want:         map[string]string{`BROKER ""`: "ok"},
			dynamic:      map[string]string{},
			auditOutcome: audit.Validated,
		},
		{
			name:         "a non-admin: the broker resource refused by Tollgate alone, the rest forwarded",
			who:          aliceUser,
			req:          alterConfigs(false, alterRes(broker, "", "max.connections", "100", "log.retention.ms", "1000"), alterRes(topic, "t", "retention.ms", "5")),
			sent:         []string{`TOPIC "t" [retention.ms=5]`},
			want:         map[string]string{`BROKER ""`: denied, `TOPIC "t"`: "ok"},
			dynamic:      map[string]string{},
			auditOutcome: audit.Denied,
		},
		{
			name:         "a non-admin, broker resources only: answered by Tollgate",
			who:          principal.AnonymousPrincipal,
			req:          alterConfigs(false, alterRes(broker, "", "log.retention.ms", "1000")),
			local:        true,
			want:         map[string]string{`BROKER ""`: denied},
			dynamic:      map[string]string{},
			auditOutcome: audit.Denied,
		},
		{
			name:      "no broker resource: forwarded untouched",
			who:       aliceUser,
			req:       alterConfigs(false, alterRes(topic, "t", "retention.ms", "5")),
			untouched: true,
			sent:      []string{`TOPIC "t" [retention.ms=5]`},
			want:      map[string]string{`TOPIC "t"`: "ok"},
			dynamic:   map[string]string{},
		},
	})
}

func TestIncrementalAlterConfigsSplit(t *testing.T) {
	appendRefused := fmt.Sprintf("%d Config value append is not allowed for config key: max.connections", kerr.InvalidConfig.Code)
	subtractRefused := fmt.Sprintf("%d Config value subtract is not allowed for config key: max.connections.per.ip", kerr.InvalidConfig.Code)
	cases := []alterCase{
		{
			name:    "owned and other keys: Tollgate applies its part, the rest is forwarded",
			who:     adminUser,
			req:     incrementalAlter(false, incrementalRes(broker, "", setOp("max.connections", "100"), setOp("log.retention.ms", "1000")), incrementalRes(topic, "t", setOp("retention.ms", "5"))),
			sent:    []string{`BROKER "" [SET log.retention.ms=1000]`, `TOPIC "t" [SET retention.ms=5]`},
			want:    map[string]string{`BROKER ""`: "ok", `TOPIC "t"`: "ok"},
			dynamic: map[string]string{"max.connections": "100", "max.connections.per.ip": "10"},
		},
		{
			name:    "owned keys only: answered by Tollgate",
			who:     adminUser,
			req:     incrementalAlter(false, incrementalRes(broker, "0", setOp("max.connection.creation.rate", "50"), op(kmsg.IncrementalAlterConfigOpDelete, "max.connections.per.ip", ""))),
			local:   true,
			want:    map[string]string{`BROKER "0"`: "ok"},
			dynamic: map[string]string{"max.connection.creation.rate": "50"},
		},
		{
			name:    "APPEND to an owned key: INVALID_CONFIG for the resource, nothing of it forwarded",
			who:     adminUser,
			req:     incrementalAlter(false, incrementalRes(broker, "", op(kmsg.IncrementalAlterConfigOpAppend, "max.connections", "5"), setOp("log.retention.ms", "1000")), incrementalRes(topic, "t", setOp("retention.ms", "5"))),
			sent:    []string{`TOPIC "t" [SET retention.ms=5]`},
			want:    map[string]string{`BROKER ""`: appendRefused, `TOPIC "t"`: "ok"},
			dynamic: map[string]string{"max.connections.per.ip": "10"},
		},
		{
			name:    "SUBTRACT from an owned key: INVALID_CONFIG, answered by Tollgate",
			who:     adminUser,
			req:     incrementalAlter(false, incrementalRes(broker, "", setOp("max.connections", "100"), op(kmsg.IncrementalAlterConfigOpSubtract, "max.connections.per.ip", "5"))),
			local:   true,
			want:    map[string]string{`BROKER ""`: subtractRefused},
			dynamic: map[string]string{"max.connections.per.ip": "10"},
		},
		{
			name:    "validate_only: nothing applied",
			who:     adminUser,
			req:     incrementalAlter(true, incrementalRes(broker, "", setOp("max.connections", "100"), setOp("log.retention.ms", "1000"))),
			sent:    []string{`BROKER "" [SET log.retention.ms=1000]`},
			want:    map[string]string{`BROKER ""`: "ok"},
			dynamic: map[string]string{"max.connections.per.ip": "10"},
		},
		{
			name:    "a non-admin: CLUSTER_AUTHORIZATION_FAILED for the broker resource, the rest forwarded",
			who:     aliceUser,
			req:     incrementalAlter(false, incrementalRes(broker, "", setOp("max.connections", "100"), setOp("log.retention.ms", "1000")), incrementalRes(topic, "t", setOp("retention.ms", "5"))),
			sent:    []string{`TOPIC "t" [SET retention.ms=5]`},
			want:    map[string]string{`BROKER ""`: denied, `TOPIC "t"`: "ok"},
			dynamic: map[string]string{"max.connections.per.ip": "10"},
		},
		{
			name:      "no owned key: forwarded untouched",
			who:       aliceUser,
			req:       incrementalAlter(false, incrementalRes(broker, "", setOp("log.retention.ms", "1000")), incrementalRes(topic, "t", setOp("retention.ms", "5"))),
			untouched: true,
			sent:      []string{`BROKER "" [SET log.retention.ms=1000]`, `TOPIC "t" [SET retention.ms=5]`},
			want:      map[string]string{`BROKER ""`: "ok", `TOPIC "t"`: "ok"},
			dynamic:   map[string]string{"max.connections.per.ip": "10"},
		},
	}
	for i := range cases {
		cases[i].before = map[string]string{"max.connections.per.ip": "10"} // one owned key set
	}
	runAlterCases(t, cases)
}

// Without a control plane the three APIs are the upstream's: forwarded
// untouched (DescribeConfigs answers are still scrubbed).
func TestBrokerConfigsWithoutControlPlane(t *testing.T) {
	f := &brokerConfigs{}
	for _, req := range []kmsg.Request{
		describeConfigs(4, describeRes(broker, "0", "max.connections")),
		alterConfigs(false, alterRes(broker, "", "max.connections", "100")),
		incrementalAlter(false, incrementalRes(broker, "", op(kmsg.IncrementalAlterConfigOpAppend, "max.connections", "5"))),
	} {
		up := upstreamAlter
		if req.Key() == 32 {
			up = upstreamDescribe(t)
		}
		x := pass(t, f, connAs(adminUser), req, up)
		if x.verdict.Respond != nil || x.verdict.Forward != nil || x.verdict.Merge != nil || x.verdict.Close != "" {
			t.Errorf("%s: verdict %+v, want forwarded untouched", kmsg.NameForKey(req.Key()), x.verdict)
		}
	}
}
