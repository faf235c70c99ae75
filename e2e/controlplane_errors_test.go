package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/testkit"
)

// Kafka's AlterClientQuotas and DescribeClientQuotas errors (spec §4.4,
// §4.5), codes and messages word for word, over the Kafka protocol through
// the gateway. (internal/control has the full table at the handler.)
// Answered by Tollgate alike whichever cluster it fronts.
func TestQuotaAPIErrorsThroughGateway(t *testing.T) {
	t.Parallel()
	testkit.EachUpstream(t, quotaAPIErrorsThroughGateway)
}

func quotaAPIErrorsThroughGateway(t *testing.T, up *testkit.Upstream) {
	env := startControlOn(t, up)
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, env, nil, kgo.Dialer(fromIP("127.0.0.2")))
	s := kmsg.StringPtr
	type comp struct {
		typ  string
		name *string
	}
	alter := func(comps []comp, key string, v float64) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		for _, c := range comps {
			ec := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ec.Type, ec.Name = c.typ, c.name
			e.Entity = append(e.Entity, ec)
		}
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = key, v
		e.Ops = append(e.Ops, op)
		req.Entries = append(req.Entries, e)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Entries) != 1 {
			t.Fatalf("alter: %v %+v", err, resp)
		}
		m := ""
		if resp.Entries[0].ErrorMessage != nil {
			m = *resp.Entries[0].ErrorMessage
		}
		return resp.Entries[0].ErrorCode, m
	}
	for _, tc := range []struct {
		comps []comp
		key   string
		v     float64
		code  int16
		msg   string
	}{
		{nil, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Invalid empty client quota entity"},
		{[]comp{{"group", s("g")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Unhandled client quota entity type: group"},
		{[]comp{{"user", s("")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Empty user not supported"},
		{[]comp{{"client-id", s("")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Empty client-id not supported"},
		{[]comp{{"ip", s("1.2.3.4")}, {"user", s("u")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code,
			"Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{[]comp{{"ip", s("example.invalid")}}, "connection_creation_rate", 1, kerr.InvalidRequest.Code, "example.invalid is not a valid IP or resolvable host."},
		{[]comp{{"user", s("alice")}}, "foobar", 1, kerr.InvalidRequest.Code, "Invalid configuration key foobar"},
		{[]comp{{"user", s("alice")}}, "connection_creation_rate", 1, kerr.InvalidRequest.Code, "Invalid configuration key connection_creation_rate"},
		{[]comp{{"ip", s("1.2.3.4")}}, "producer_byte_rate", 1, kerr.InvalidRequest.Code, "Invalid configuration key producer_byte_rate"},
		{[]comp{{"user", s("alice")}}, "producer_byte_rate", 0, kerr.InvalidRequest.Code, "Quota producer_byte_rate must be greater than 0"},
		{[]comp{{"user", s("alice")}}, "consumer_byte_rate", 2.245, kerr.InvalidRequest.Code, "consumer_byte_rate cannot be a fractional value."},
		{[]comp{{"user", s("alice")}}, "consumer_byte_rate", 36893488147419103232.4, kerr.InvalidRequest.Code, "Proposed value for consumer_byte_rate is too large for a LONG."},
		{[]comp{{"ip", s("1.2.3.4")}}, "connection_creation_rate", 2147483648, kerr.InvalidRequest.Code, "Proposed value for connection_creation_rate is too large for an INT."},
		{[]comp{{"user", s("alice")}}, "producer_byte_rate", 1048576, 0, ""},
		{[]comp{{"ip", nil}}, "connection_creation_rate", 10, 0, ""},
	} {
		if code, msg := alter(tc.comps, tc.key, tc.v); code != tc.code || msg != tc.msg {
			t.Errorf("alter %+v %s=%v: got %d %q, want %d %q", tc.comps, tc.key, tc.v, code, msg, tc.code, tc.msg)
		}
	}

	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Strict, req.Components = strict, comps
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	c := func(typ string, mt int8, m *string) kmsg.DescribeClientQuotasRequestComponent {
		x := kmsg.NewDescribeClientQuotasRequestComponent()
		x.EntityType, x.MatchType, x.Match = typ, kmsg.QuotasMatchType(mt), m
		return x
	}
	for _, tc := range []struct {
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
		msg   string
	}{
		{[]kmsg.DescribeClientQuotasRequestComponent{c("", 0, s("x"))}, kerr.InvalidRequest.Code, "Invalid empty entity type."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("user", 0, s("a")), c("user", 1, nil)}, kerr.InvalidRequest.Code, "Entity type user cannot appear more than once in the filter."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("group", 0, s("g"))}, kerr.UnsupportedVersion.Code, "Unsupported entity type group"},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("user", 0, nil)}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("client-id", 1, s("c"))}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("user", 3, nil)}, kerr.InvalidRequest.Code, "Unknown match type 3"},
		{[]kmsg.DescribeClientQuotasRequestComponent{c("ip", 2, nil), c("user", 0, s("u"))}, kerr.InvalidRequest.Code,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
	} {
		for _, strict := range []bool{false, true} {
			r := describe(strict, tc.comps...)
			m := ""
			if r.ErrorMessage != nil {
				m = *r.ErrorMessage
			}
			if r.ErrorCode != tc.code || m != tc.msg || r.Entries != nil {
				t.Errorf("describe %v strict=%v: got %d %q, want %d %q", tc.comps, strict, r.ErrorCode, m, tc.code, tc.msg)
			}
		}
	}
	// Non-strict empty filter: everything, ip entities included.
	if r := describe(false); r.ErrorCode != 0 || len(r.Entries) != 2 {
		t.Errorf("describe all: %d entries %+v", len(r.Entries), r.Entries)
	}
	// Strict user filter: the user entity only.
	if r := describe(true, c("user", 2, nil)); len(r.Entries) != 1 {
		t.Errorf("strict SPECIFIED user: %d entries", len(r.Entries))
	}
}
