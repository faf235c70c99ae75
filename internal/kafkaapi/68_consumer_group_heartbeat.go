package kafkaapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
)

// ConsumerGroupHeartbeat (key 68), v0–v1 (KIP-848 groups).
//
// Forwarded unchanged. The members filter (members.go) remembers the member
// id the answer gives this connection's client, with the client's address,
// for ConsumerGroupDescribe.
func (m *members) learnHeartbeat(c proxy.Conn, r *proxy.Response) {
	if resp, ok := r.Decode(); ok {
		if id := resp.(*kmsg.ConsumerGroupHeartbeatResponse).MemberID; id != nil {
			m.hosts.learn(*id, c.Info().Remote)
		}
	}
}
