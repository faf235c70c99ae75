package proxy

import (
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// Group members behind a gateway: the group coordinator records each
// member's client host as the peer of the connection it joined on, which
// is the gateway's outbound address (spec: kafka-proxying §2.3), so
// `kafka-consumer-groups --describe` would list every member at the
// gateway. The gateway learns which client each member id belongs to from
// the JoinGroup and ConsumerGroupHeartbeat responses it passes, and puts
// the real client address back into DescribeGroups and
// ConsumerGroupDescribe answers, in the upstream's own format. Members that
// joined through another gateway instance keep what the broker recorded.

// memberHosts maps member ids to client addresses, bounded: two
// generations of at most memberGen entries each; a lookup that hits the
// old generation moves the entry forward.
type memberHosts struct {
	mu       sync.Mutex
	cur, old map[string]netip.AddrPort
}

const memberGen = 1 << 16

func (m *memberHosts) learn(member string, client netip.AddrPort) {
	if member == "" || !client.IsValid() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		m.cur = make(map[string]netip.AddrPort)
	}
	if len(m.cur) >= memberGen {
		m.old, m.cur = m.cur, make(map[string]netip.AddrPort)
	}
	m.cur[member] = client
}

func (m *memberHosts) lookup(member string) (netip.AddrPort, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.cur[member]; ok {
		return a, true
	}
	if a, ok := m.old[member]; ok {
		m.learnLocked(member, a)
		return a, true
	}
	return netip.AddrPort{}, false
}

func (m *memberHosts) learnLocked(member string, a netip.AddrPort) {
	if m.cur == nil {
		m.cur = make(map[string]netip.AddrPort)
	}
	m.cur[member] = a
}

// clientHost formats the client address the way the upstream formatted
// its own: Kafka writes InetAddress.toString(), "/1.2.3.4" (the address
// alone, IPv6 uncompressed), others host:port.
func clientHost(upstream string, client netip.AddrPort) string {
	if strings.HasPrefix(upstream, "/") {
		return "/" + javaAddr(client.Addr())
	}
	return client.String()
}

// javaAddr is InetAddress.getHostAddress: dotted IPv4, or eight
// uncompressed lower-case hex groups for IPv6.
func javaAddr(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	b := a.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	return sb.String()
}

// learnMember records the member id a JoinGroup or ConsumerGroupHeartbeat
// response gives this session's client (a JoinGroup answered
// MEMBER_ID_REQUIRED carries the id the client will rejoin with).
func (s *session) learnMember(buf *wire.Buffer, pr *pending) {
	var member string
	switch pr.req.Key {
	case wire.KeyJoinGroup:
		r, ok := decodeResponse[*kmsg.JoinGroupResponse](buf, pr)
		if !ok {
			return
		}
		member = r.MemberID
	case wire.KeyConsumerGroupHB:
		r, ok := decodeResponse[*kmsg.ConsumerGroupHeartbeatResponse](buf, pr)
		if !ok || r.MemberID == nil {
			return
		}
		member = *r.MemberID
	}
	s.gw.members.learn(member, s.info.Remote)
}

func decodeResponse[T kmsg.Response](buf *wire.Buffer, pr *pending) (T, bool) {
	var zero T
	p := buf.B[4:]
	off, err := wire.ResponseBodyOffset(p, pr.req.Key, pr.flexible)
	if err != nil {
		return zero, false
	}
	r := kmsg.ResponseForKey(pr.req.Key)
	r.SetVersion(pr.req.Version)
	if r.ReadFrom(p[off:]) != nil {
		return zero, false
	}
	return r.(T), true
}

// restoreHosts puts known members' client addresses into a DescribeGroups
// or ConsumerGroupDescribe response.
func (g *Gateway) restoreHosts(resp kmsg.Response) {
	fix := func(member string, host *string) {
		if a, ok := g.members.lookup(member); ok {
			*host = clientHost(*host, a)
		}
	}
	switch r := resp.(type) {
	case *kmsg.DescribeGroupsResponse:
		for i := range r.Groups {
			for j := range r.Groups[i].Members {
				m := &r.Groups[i].Members[j]
				fix(m.MemberID, &m.ClientHost)
			}
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for i := range r.Groups {
			for j := range r.Groups[i].Members {
				m := &r.Groups[i].Members[j]
				fix(m.MemberID, &m.ClientHost)
			}
		}
	}
}
