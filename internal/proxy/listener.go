package proxy

import (
	"github.com/tollgate/tollgate/internal/accept"

	"fmt"

	"net"
	"slices"
	"strconv"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/auth"
)

// listener is one named listener: its bootstrap port and a port per
// upstream broker.
type listener struct {
	gw      *Gateway
	cfg     ListenerConfig
	advHost string
	acc     *accept.Listener

	tls    *auth.ServerTLS  // SSL and SASL_SSL
	mapper *auth.Mapper     // ssl.principal.mapping.rules
	cidr   *auth.CIDRMapper // principals_by_cidr, parsed once
}

// setupSecurity loads the listener's certificate and mapping rules.
func (l *listener) setupSecurity() error {
	if l.cfg.UsesTLS() {
		st, err := auth.NewServerTLS(l.cfg.TLS)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.cfg.Name, err)
		}
		l.tls = st
	}
	rules := l.cfg.SSLPrincipalMappingRules
	if rules == "" {
		rules = "DEFAULT"
	}
	m, err := auth.ParseMappingRules(rules)
	if err != nil {
		return fmt.Errorf("listener %s: %w", l.cfg.Name, err)
	}
	l.mapper = m
	if l.cidr, err = auth.NewCIDRMapper(l.cfg.PrincipalsByCIDR); err != nil {
		return fmt.Errorf("listener %s: principals_by_cidr: %w", l.cfg.Name, err)
	}
	return nil
}

// Serve implements accept.Handler: an admitted connection becomes a
// session.
func (l *listener) Serve(c net.Conn, node int32, ac *admission.Conn) {
	l.gw.serve(c, l, node, ac)
}

// Advertise implements wire.Mapper: the address of node id on this
// listener, opening the broker's port if it is new. host and port are the
// upstream address the response named, which the gateway learns from.
func (l *listener) Advertise(id int32, host string, port int32) (string, int32, bool) {
	if id < 0 {
		return "", 0, false
	}
	l.gw.learn(id, net.JoinHostPort(host, strconv.Itoa(int(port))))
	p, err := l.acc.Port(id)
	if err != nil {
		l.gw.log.Error("cannot open broker port; leaving the broker out of the response",
			"listener", l.cfg.Name, "node", id, "err", err)
		return "", 0, false
	}
	return l.advHost, p, true
}

// BrokerPorts returns node id -> advertised port, sorted by id.
func (g *Gateway) BrokerPorts(listenerName string) map[int32]int32 {
	out := map[int32]int32{}
	for _, l := range g.listeners {
		if l.cfg.Name != listenerName {
			continue
		}
		for id, p := range l.acc.Ports() {
			out[id] = p
		}
	}
	return out
}

func slicesSort(ids []int32) { slices.Sort(ids) }
