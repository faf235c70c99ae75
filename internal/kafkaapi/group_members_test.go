package kafkaapi

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
)

// clientAt is a connection from addr.
func clientAt(addr string) *proxytest.Conn {
	c := connAs(principal.AnonymousPrincipal)
	c.ConnInfo.Remote = netip.MustParseAddrPort(addr)
	return c
}

// joined passes a JoinGroup answer giving member to the client on c.
func joined(t *testing.T, m *members, c *proxytest.Conn, member string, code int16) {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = maxVersion(11)
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID, resp.ErrorCode = member, code
	got := respond(t, m, c, req, resp).(*kmsg.JoinGroupResponse)
	if got.MemberID != member || got.ErrorCode != code {
		t.Fatalf("JoinGroup answer changed: member %q error %d", got.MemberID, got.ErrorCode)
	}
}

// heartbeat passes a ConsumerGroupHeartbeat answer giving member.
func heartbeat(t *testing.T, m *members, c *proxytest.Conn, member *string) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = maxVersion(68)
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberID = member
	respond(t, m, c, req, resp)
}

// describeGroups passes a DescribeGroups answer listing members (id →
// the host the coordinator recorded) and returns the hosts the client sees.
func describeGroups(t *testing.T, m *members, version int16, hosts map[string]string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = version, []string{"g"}
	return describedHosts(t, m, req, hosts)
}

func consumerGroupDescribe(t *testing.T, m *members, hosts map[string]string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = maxVersion(69)
	return describedHosts(t, m, req, hosts)
}

// describedHosts passes an answer to req (DescribeGroups,
// ConsumerGroupDescribe: built and read by kmsg's field names, which they
// share) of group g listing members (id → host) and returns the hosts the
// client sees.
func describedHosts(t *testing.T, m *members, req kmsg.Request, hosts map[string]string) map[string]string {
	t.Helper()
	resp := req.ResponseKind()
	groups := reflect.ValueOf(resp).Elem().FieldByName("Groups")
	g := newItem(groups.Type().Elem())
	g.FieldByName("Group").SetString("g")
	members := g.FieldByName("Members")
	for id, h := range hosts {
		mb := newItem(members.Type().Elem())
		mb.FieldByName("MemberID").SetString(id)
		mb.FieldByName("ClientHost").SetString(h)
		members.Set(reflect.Append(members, mb))
	}
	groups.Set(reflect.Append(groups, g))
	got := map[string]string{}
	members = reflect.ValueOf(respond(t, m, connAs(adminUser), req, resp)).Elem().FieldByName("Groups").Index(0).FieldByName("Members")
	for i := range members.Len() {
		got[members.Index(i).FieldByName("MemberID").String()] = members.Index(i).FieldByName("ClientHost").String()
	}
	return got
}

func sameHosts(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Members learned from JoinGroup answers (the MEMBER_ID_REQUIRED one too)
// are listed at their client's address, in the upstream's own format;
// members the gateway did not see join keep what the coordinator recorded.
func TestMembersJoinGroupThenDescribeGroups(t *testing.T) {
	m := newMembers()
	joined(t, m, clientAt("192.168.1.5:53000"), "m-1", 0)
	joined(t, m, clientAt("[2001:db8::7]:53001"), "m-2", kerr.MemberIDRequired.Code)
	joined(t, m, clientAt("192.168.1.9:53002"), "", kerr.UnknownMemberID.Code) // no member id: nothing to learn

	for _, tc := range []struct {
		name     string
		in, want map[string]string
	}{
		{"Kafka's InetAddress.toString()",
			map[string]string{"m-1": "/10.0.0.9", "m-2": "/10.0.0.9", "other": "/10.0.0.9"},
			map[string]string{"m-1": "/192.168.1.5", "m-2": "/2001:db8:0:0:0:0:0:7", "other": "/10.0.0.9"}},
		{"kfake's host:port",
			map[string]string{"m-1": "10.0.0.9:41000", "m-2": "10.0.0.9:41001", "other": "10.0.0.9:41002"},
			map[string]string{"m-1": "192.168.1.5:53000", "m-2": "[2001:db8::7]:53001", "other": "10.0.0.9:41002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range versions(0, maxVersion(15)) {
				if got := describeGroups(t, m, v, tc.in); !sameHosts(got, tc.want) {
					t.Errorf("v%d: client sees %v, want %v", v, got, tc.want)
				}
			}
		})
	}
}

// KIP-848 groups: members learned from ConsumerGroupHeartbeat answers are
// listed at their client's address by ConsumerGroupDescribe.
func TestMembersHeartbeatThenConsumerGroupDescribe(t *testing.T) {
	m := newMembers()
	heartbeat(t, m, clientAt("192.168.1.5:53000"), kmsg.StringPtr("m-1"))
	heartbeat(t, m, clientAt("192.168.1.6:53000"), nil) // an error answer names no member
	got := consumerGroupDescribe(t, m, map[string]string{"m-1": "/10.0.0.9", "m-3": "/10.0.0.9"})
	if want := map[string]string{"m-1": "/192.168.1.5", "m-3": "/10.0.0.9"}; !sameHosts(got, want) {
		t.Errorf("Kafka format: client sees %v, want %v", got, want)
	}
	got = consumerGroupDescribe(t, m, map[string]string{"m-1": "10.0.0.9:41000"})
	if want := map[string]string{"m-1": "192.168.1.5:53000"}; !sameHosts(got, want) {
		t.Errorf("kfake format: client sees %v, want %v", got, want)
	}
	// Learned through one API, restored by the other's describe.
	joined(t, m, clientAt("192.168.1.7:53000"), "classic", 0)
	got = consumerGroupDescribe(t, m, map[string]string{"classic": "/10.0.0.9"})
	if want := map[string]string{"classic": "/192.168.1.7"}; !sameHosts(got, want) {
		t.Errorf("client sees %v, want %v", got, want)
	}
}

// A member that rejoins from another client address is listed at the new
// one.
func TestMembersRelearned(t *testing.T) {
	m := newMembers()
	joined(t, m, clientAt("192.168.1.5:53000"), "m-1", 0)
	joined(t, m, clientAt("192.168.1.8:53000"), "m-1", 0)
	if got := describeGroups(t, m, 5, map[string]string{"m-1": "/10.0.0.9"}); got["m-1"] != "/192.168.1.8" {
		t.Errorf("client sees %v, want m-1 at /192.168.1.8", got)
	}
}
