package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// JoinGroup (key 11), v0–v9.
//
// Forwarded unchanged. The members filter (members.go) reads the answer:
// the member id it gives this connection's client (a JoinGroup answered
// MEMBER_ID_REQUIRED carries the id the client will rejoin with) is
// remembered with the client's address, for DescribeGroups.
//
// Charged by the quota filter (enforce/request.go) to request_percentage:
// the upstream's time for it less its rebalance_timeout_ms (v0:
// session_timeout_ms), which the coordinator may spend waiting for the
// group — unless the answer is an error: then it was answered at once.
func (m *members) learnJoinGroup(c proxy.Conn, r *proxy.Response) {
	if resp, ok := r.Decode(); ok {
		m.hosts.learn(resp.(*kmsg.JoinGroupResponse).MemberID, c.Info().Remote)
	}
}
