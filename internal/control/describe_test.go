package control

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func matchType(typ string, m int8, match *string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, kmsg.QuotasMatchType(m), match
	return c
}

// TestDescribeErrors is the validation table of §4.5: whole-response
// errors with entries null, the first failing component deciding.
func TestDescribeErrors(t *testing.T) {
	cases := []struct {
		name  string
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
		msg   string
	}{
		{"empty type", []kmsg.DescribeClientQuotasRequestComponent{exact("", "x")}, 42, "Invalid empty entity type."},
		{"type twice", []kmsg.DescribeClientQuotasRequestComponent{exact("user", "a"), defaultOf("user")}, 42,
			"Entity type user cannot appear more than once in the filter."},
		{"type twice, any", []kmsg.DescribeClientQuotasRequestComponent{anyOf("ip"), exact("ip", "1.2.3.4")}, 42,
			"Entity type ip cannot appear more than once in the filter."},
		{"unknown type", []kmsg.DescribeClientQuotasRequestComponent{exact("group", "g")}, 35, "Unsupported entity type group"},
		{"unknown type first", []kmsg.DescribeClientQuotasRequestComponent{exact("foo", "a"), exact("foo", "b")}, 35, "Unsupported entity type foo"},
		{"exact null", []kmsg.DescribeClientQuotasRequestComponent{matchType("user", 0, nil)}, 42,
			"Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{"default with match", []kmsg.DescribeClientQuotasRequestComponent{matchType("client-id", 1, sp("c"))}, 42,
			"Request specified MATCH_TYPE_DEFAULT, but also specified a match string."},
		{"specified with match", []kmsg.DescribeClientQuotasRequestComponent{matchType("ip", 2, sp(""))}, 42,
			"Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."},
		{"unknown match type", []kmsg.DescribeClientQuotasRequestComponent{matchType("user", 3, nil)}, 42, "Unknown match type 3"},
		{"negative match type", []kmsg.DescribeClientQuotasRequestComponent{matchType("user", -1, sp("x"))}, 42, "Unknown match type -1"},
		{"ip with user", []kmsg.DescribeClientQuotasRequestComponent{anyOf("ip"), exact("user", "u")}, 42,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
		{"client-id with ip", []kmsg.DescribeClientQuotasRequestComponent{defaultOf("client-id"), defaultOf("ip")}, 42,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
		// Component errors come before the combination check.
		{"combination and bad match", []kmsg.DescribeClientQuotasRequestComponent{anyOf("ip"), anyOf("user"), matchType("client-id", 7, nil)}, 42,
			"Unknown match type 7"},
	}
	f := newFixture(t)
	f.mustAlter(t, entry(ent(named("user", "u")), set("producer_byte_rate", 1)))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, strict := range []bool{false, true} {
				for v := int16(0); v <= 1; v++ {
					req := describeReq(strict, tc.comps...)
					req.Version = v
					resp := f.cq.Describe(context.Background(), admin, req)
					back := roundTripDescribe(t, resp)
					if back.ErrorCode != tc.code || deref(back.ErrorMessage) != tc.msg || back.Entries != nil {
						t.Fatalf("v%d strict=%v: %d %q entries %v", v, strict, back.ErrorCode, deref(back.ErrorMessage), back.Entries)
					}
				}
			}
		})
	}
}

func roundTripDescribe(t *testing.T, resp *kmsg.DescribeClientQuotasResponse) *kmsg.DescribeClientQuotasResponse {
	t.Helper()
	back := kmsg.NewPtrDescribeClientQuotasResponse()
	back.Version = resp.Version
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	return back
}

// tv15 stores the entity set of TV15 (testDescribeClientQuotasMatchPartial).
func tv15(t *testing.T) *fixture {
	f := newFixture(t)
	rp := func(v float64) kmsg.AlterClientQuotasRequestEntryOp { return set("request_percentage", v) }
	f.mustAlter(t,
		entry(ent(named("user", "user-1"), named("client-id", "client-id-1")), rp(50.50)),
		entry(ent(named("user", "user-2"), named("client-id", "client-id-1")), rp(51.51)),
		entry(ent(named("user", "user-3"), named("client-id", "client-id-2")), rp(52.52)),
		entry(ent(dflt("user"), named("client-id", "client-id-1")), rp(53.53)),
		entry(ent(named("user", "user-1"), dflt("client-id")), rp(54.54)),
		entry(ent(named("user", "user-3"), dflt("client-id")), rp(55.55)),
		entry(ent(named("user", "user-1")), rp(56.56)),
		entry(ent(named("user", "user-2")), rp(57.57)),
		entry(ent(named("user", "user-3")), rp(58.58)),
		entry(ent(dflt("user")), rp(59.59)),
		entry(ent(named("client-id", "client-id-2")), rp(60.60)),
		entry(ent(named("ip", "1.2.3.4")), set("connection_creation_rate", 10)),
		entry(ent(named("ip", "2.3.4.5")), set("connection_creation_rate", 20)),
	)
	return f
}

func TestDescribeTV15(t *testing.T) {
	f := tv15(t)
	type C = []kmsg.DescribeClientQuotasRequestComponent
	cases := []struct {
		name   string
		comps  C
		strict bool
		count  int
	}{
		{"user = user-1", C{exact("user", "user-1")}, false, 3},
		{"user = unknown", C{exact("user", "unknown")}, false, 0},
		{"client-id = client-id-2", C{exact("client-id", "client-id-2")}, false, 2},
		{"default user", C{defaultOf("user")}, false, 2},
		{"user = user-2 strict", C{exact("user", "user-2")}, true, 1},
		{"client-id = client-id-1 strict", C{exact("client-id", "client-id-1")}, true, 0},
		{"any user strict", C{anyOf("user")}, true, 4},
		{"any user", C{anyOf("user")}, false, 10},
		{"any client-id strict", C{anyOf("client-id")}, true, 1},
		{"any client-id", C{anyOf("client-id")}, false, 7},
		{"any ip", C{anyOf("ip")}, false, 2},
		{"no components", nil, false, 13},
		{"no components strict", nil, true, 0},
		// testDescribeClientQuotasMatchExact's misses.
		{"user-1 and client-id-2", C{exact("user", "user-1"), exact("client-id", "client-id-2")}, true, 0},
		{"default user and client-id-2", C{defaultOf("user"), exact("client-id", "client-id-2")}, true, 0},
		{"client-id-1 alone", C{exact("client-id", "client-id-1")}, true, 0},
		// More combinations.
		{"user-1 and any client-id", C{exact("user", "user-1"), anyOf("client-id")}, false, 2},
		{"any user and default client-id", C{anyOf("user"), defaultOf("client-id")}, true, 2},
		{"any user and any client-id strict", C{anyOf("user"), anyOf("client-id")}, true, 6},
		{"ip exact", C{exact("ip", "2.3.4.5")}, true, 1},
		{"default ip", C{defaultOf("ip")}, false, 0},
		{"case-sensitive", C{exact("user", "USER-1")}, false, 0},
	}
	for _, tc := range cases {
		resp := f.describe(t, alice, tc.strict, tc.comps...)
		if resp.ErrorCode != 0 || resp.ErrorMessage != nil || len(resp.Entries) != tc.count {
			t.Errorf("%s: %d %q, %d entries, want %d", tc.name, resp.ErrorCode, deref(resp.ErrorMessage), len(resp.Entries), tc.count)
		}
	}

	// testDescribeClientQuotasMatchExact: every entity is found, with its
	// value, by a strict exact filter made of its own components.
	all := f.describe(t, alice, false)
	for _, e := range all.Entries {
		var comps C
		for _, p := range e.Entity {
			if p.Name == nil {
				comps = append(comps, defaultOf(p.Type))
			} else {
				comps = append(comps, exact(p.Type, *p.Name))
			}
		}
		got := f.describe(t, alice, true, comps...)
		if len(got.Entries) != 1 || len(got.Entries[0].Values) != 1 || got.Entries[0].Values[0].Value != e.Values[0].Value {
			t.Errorf("exact %v: %+v", e.Entity, got.Entries)
		}
	}
}

// TestDescribeVersions: success has an empty, not null, entry array on the
// wire at every version.
func TestDescribeVersions(t *testing.T) {
	f := tv15(t)
	for v := int16(0); v <= (&kmsg.DescribeClientQuotasRequest{}).MaxVersion(); v++ {
		for _, tc := range []struct {
			comps []kmsg.DescribeClientQuotasRequestComponent
			n     int
		}{{nil, 13}, {[]kmsg.DescribeClientQuotasRequestComponent{exact("user", "nobody")}, 0}} {
			req := describeReq(false, tc.comps...)
			req.Version = v
			wire := kmsg.NewPtrDescribeClientQuotasRequest()
			wire.Version = v
			if err := wire.ReadFrom(req.AppendTo(nil)); err != nil {
				t.Fatal(err)
			}
			back := roundTripDescribe(t, f.cq.Describe(context.Background(), alice, wire))
			if back.Version != v || back.ErrorCode != 0 || back.ErrorMessage != nil || back.Entries == nil || len(back.Entries) != tc.n {
				t.Fatalf("v%d: %+v", v, back)
			}
		}
	}
}
