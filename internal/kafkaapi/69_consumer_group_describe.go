package kafkaapi

import "github.com/twmb/franz-go/pkg/kmsg"

// ConsumerGroupDescribe (key 69), v0–v1 (KIP-848 groups).
//
// Forwarded. Rewritten (members.go): members are listed at their real
// client address, as in DescribeGroups.
func (m *members) restoreConsumerGroupDescribe(resp kmsg.Response) {
	r := resp.(*kmsg.ConsumerGroupDescribeResponse)
	for i := range r.Groups {
		for j := range r.Groups[i].Members {
			mb := &r.Groups[i].Members[j]
			m.restore(mb.MemberID, &mb.ClientHost)
		}
	}
}
