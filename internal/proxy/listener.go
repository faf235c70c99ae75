package proxy

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"fmt"
	"github.com/tollgate/tollgate/internal/wire"

	"errors"
	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/auth"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// listener is one named listener: its bootstrap port and a port per
// upstream broker.
type listener struct {
	gw      *Gateway
	cfg     ListenerConfig
	advHost string
	boot    net.Listener

	mu     sync.Mutex
	ports  map[int32]*brokerPort
	closed bool

	tls    *auth.ServerTLS // SSL and SASL_SSL
	mapper *auth.Mapper    // ssl.principal.mapping.rules
	// saslVersions override what upstream advertises for the SASL APIs
	// when this listener answers them itself (terminate mode): Kafka's
	// ranges, SaslHandshake 0-1 (librdkafka logs in only if v0 is in the
	// range; it then uses v1, the only version served).
	saslVersions []kmsg.ApiVersionsResponseApiKey
	// apiVersions answers ApiVersions before login (SASL terminate).
	apiVersions apiVersionsCache
}

// setupSecurity loads the listener's certificate and mapping rules.
func (l *listener) setupSecurity() error {
	if l.cfg.usesTLS() {
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
	if l.cfg.usesSASL() && l.cfg.saslMode() == SASLTerminate {
		l.saslVersions = []kmsg.ApiVersionsResponseApiKey{
			{ApiKey: wire.KeySASLHandshake, MinVersion: 0, MaxVersion: 1},
			{ApiKey: wire.KeySASLAuthenticate, MinVersion: 0, MaxVersion: 2},
		}
	}
	return nil
}

type brokerPort struct {
	node int32
	ln   net.Listener
	port int32
}

// Advertise implements wire.Mapper: the address of node id on this
// listener, opening the broker's port if it is new. host and port are the
// upstream address the response named, which the gateway learns from.
func (l *listener) Advertise(id int32, host string, port int32) (string, int32, bool) {
	if id < 0 {
		return "", 0, false
	}
	l.gw.learn(id, net.JoinHostPort(host, strconv.Itoa(int(port))))
	bp, err := l.ensure(id)
	if err != nil {
		l.gw.log.Error("cannot open broker port; leaving the broker out of the response",
			"listener", l.cfg.Name, "node", id, "err", err)
		return "", 0, false
	}
	return l.advHost, bp.port, true
}

// ensure returns node id's port on this listener, opening it if needed.
func (l *listener) ensure(id int32) (*brokerPort, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bp, ok := l.ports[id]; ok {
		return bp, nil
	}
	if l.closed {
		return nil, errors.New("listener closed")
	}
	host, _, _ := net.SplitHostPort(l.cfg.Bootstrap)
	port := 0
	if l.cfg.BrokerPortBase > 0 {
		port = l.cfg.BrokerPortBase + int(id)
		if port > 65535 {
			return nil, errors.New("broker_port_base + node id exceeds 65535")
		}
	}
	ln, err := l.gw.listen(l, net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	_, ps, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(ps)
	bp := &brokerPort{node: id, ln: ln, port: int32(p)}
	l.ports[id] = bp
	l.gw.log.Info("broker port open", "listener", l.cfg.Name, "node", id, "addr", ln.Addr().String())
	l.gw.wg.Add(1)
	go l.accept(ln, id)
	return bp, nil
}

// retain closes the ports of brokers not in live.
func (l *listener) retain(live map[int32]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, bp := range l.ports {
		if !live[id] {
			l.gw.log.Info("upstream broker gone; closing its port", "listener", l.cfg.Name, "node", id)
			bp.ln.Close()
			delete(l.ports, id)
		}
	}
}

// BrokerPorts returns node id -> advertised port, sorted by id.
func (g *Gateway) BrokerPorts(listenerName string) map[int32]int32 {
	out := map[int32]int32{}
	for _, l := range g.listeners {
		if l.cfg.Name != listenerName {
			continue
		}
		l.mu.Lock()
		for id, bp := range l.ports {
			out[id] = bp.port
		}
		l.mu.Unlock()
	}
	return out
}

func (l *listener) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.boot.Close()
	for _, bp := range l.ports {
		bp.ln.Close()
	}
}

func (l *listener) accept(ln net.Listener, node int32) {
	defer l.gw.wg.Done()
	if rl, ok := ln.(*rawListener); ok {
		if l.gw.acceptor != nil {
			helperAccept(l, rl, node)
		} else {
			rawAccept(l, rl, node)
		}
		return
	}
	var backoff time.Duration
	var spare *admission.Conn
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if !l.acceptBackoff(&backoff, err) {
				return
			}
			continue
		}
		backoff = 0
		l.admitAndServe(connSocket(c), node, &spare)
	}
}

// acceptBackoff waits after a failed accept (out of file descriptors and
// the like), as net/http does, instead of spinning; false when the gateway
// is closing.
func (l *listener) acceptBackoff(backoff *time.Duration, err error) bool {
	if *backoff == 0 {
		*backoff = 5 * time.Millisecond
	} else if *backoff *= 2; *backoff > time.Second {
		*backoff = time.Second
	}
	l.gw.log.Warn("accept failed", "listener", l.cfg.Name, "err", err, "retry_in", *backoff)
	select {
	case <-time.After(*backoff):
		return true
	case <-l.gw.closing:
		return false
	}
}

// admitAndServe admits one accepted socket and serves it when admitted.
// spare is the accept loop's admission.Conn, reused until one is admitted
// (admission touches it only then), so that a refused socket allocates
// nothing.
func (l *listener) admitAndServe(sock socket, node int32, spare **admission.Conn) {
	var ac *admission.Conn
	if l.gw.admit != nil {
		if *spare == nil {
			*spare = new(admission.Conn)
		}
		ac = *spare
		ac.ID = l.gw.nextID.Add(1)
		if !l.admitConn(sock, ac) {
			return
		}
		*spare = nil // registered: the session's now
	}
	c, err := sock.conn()
	if err != nil {
		l.gw.log.Warn("accepted connection unusable", "listener", l.cfg.Name, "remote", sock.String(), "err", err)
		sock.Close()
		if ac != nil {
			l.gw.admit.Release(ac)
		}
		return
	}
	l.gw.serve(c, l, node, ac)
}

func slicesSort(ids []int32) { slices.Sort(ids) }
