package kafkaapi

import (
	"net/netip"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
)

// Group members behind a gateway: the group coordinator records each
// member's client host as the peer of the connection it joined on, which
// is the gateway's outbound address (spec: kafka-proxying §2.3), so
// `kafka-consumer-groups --describe` would list every member at the
// gateway. The members filter learns which client each member id belongs
// to from the JoinGroup and ConsumerGroupHeartbeat responses it passes, and
// puts the real client address back into DescribeGroups and
// ConsumerGroupDescribe answers, in the upstream's own format. Members that
// joined through another gateway instance keep what the broker recorded.

// members is the filter; one per gateway.
type members struct {
	hosts memberHosts
}

func newMembers() *members { return &members{} }

func (*members) Name() string { return "group-members" }

func (*members) Keys() []int16 {
	return []int16{int16(kmsg.JoinGroup), int16(kmsg.ConsumerGroupHeartbeat), int16(kmsg.DescribeGroups), int16(kmsg.ConsumerGroupDescribe)}
}

func (m *members) OnResponse(c proxy.Conn, r *proxy.Response) error {
	switch r.Req.Key {
	case int16(kmsg.JoinGroup):
		m.learnJoinGroup(c, r)
	case int16(kmsg.ConsumerGroupHeartbeat):
		m.learnHeartbeat(c, r)
	case int16(kmsg.DescribeGroups):
		return r.Edit(m.restoreDescribeGroups)
	case int16(kmsg.ConsumerGroupDescribe):
		return r.Edit(m.restoreConsumerGroupDescribe)
	}
	return nil
}

// restore puts a known member's client address into host.
func (m *members) restore(member string, host *string) {
	if a, ok := m.hosts.lookup(member); ok {
		*host = clientHost(*host, a)
	}
}

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
	m.learnLocked(member, client)
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
	if len(m.cur) >= memberGen {
		m.old, m.cur = m.cur, make(map[string]netip.AddrPort)
	}
	m.cur[member] = a
}

// clientHost formats the client address the way the upstream formatted
// its own: Kafka writes InetAddress.toString(), "/1.2.3.4" (the address
// alone, IPv6 uncompressed), others host:port.
func clientHost(upstream string, client netip.AddrPort) string {
	if strings.HasPrefix(upstream, "/") {
		return "/" + principal.HostAddress(client.Addr())
	}
	return client.String()
}
