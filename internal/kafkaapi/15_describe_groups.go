package kafkaapi

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups (key 15), v0–v6.
//
// Forwarded. Rewritten (members.go): each member whose client the gateway
// knows (it joined through this gateway) is listed at its real client
// address instead of the gateway's, in the upstream's own format (Kafka's
// "/1.2.3.4", kfake's "host:port"), so kafka-consumer-groups --describe
// shows where members are.
//
// Differs from a broker: members that joined through another Tollgate
// instance keep the address the broker recorded.
func (m *members) restoreDescribeGroups(resp kmsg.Response) {
	r := resp.(*kmsg.DescribeGroupsResponse)
	for i := range r.Groups {
		for j := range r.Groups[i].Members {
			mb := &r.Groups[i].Members[j]
			m.restore(mb.MemberID, &mb.ClientHost)
		}
	}
}
