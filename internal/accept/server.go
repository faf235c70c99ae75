package accept

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
)

// Handler takes the connections a Listener admits: the session side of the
// gateway. Serve owns c and ac (ac is nil without admission) and must
// release ac once the connection ends. Serve must not block the accept loop:
// it starts the session and returns.
type Handler interface {
	Serve(c net.Conn, node int32, ac *admission.Conn)
}

// RefusalHook is told of every connection admission refuses, by the Kafka
// setting that refused it (metrics count them).
type RefusalHook interface {
	Refused(listener, reason string)
}

// Options configure a Server.
type Options struct {
	// Log is the logger (default slog.Default()).
	Log *slog.Logger
	// Admission, when set, runs Kafka's acceptor procedure on every
	// accepted socket before it is served. Listener names must be
	// declared in its settings.
	Admission *admission.Limiter
	// ListenFunc replaces net.Listen, e.g. with an in-memory network.
	ListenFunc func(network, addr string) (net.Listener, error)
	// AcceptorExe is the acceptor helper's binary (Linux, with admission
	// only); "" accepts in-process.
	AcceptorExe string
	// Refused is told of refused connections; may be nil.
	Refused RefusalHook
	// Inherited are the listening sockets this process took over from its
	// predecessor (a handover): a port it names is taken, not opened
	// afresh, so that it is never closed. May be nil.
	Inherited *Inherited
}

// Server owns every listening port of a gateway, its accept loops, the
// sockets parked by admission and the acceptor helper.
type Server struct {
	log      *slog.Logger
	admit    *admission.Limiter
	listenFn func(network, addr string) (net.Listener, error)
	refused  RefusalHook
	parked   *parkedConns
	// acceptorExe is the acceptor helper's binary; acceptor runs it.
	acceptorExe string
	acceptor    *acceptorProc

	stall  stallWatch    // the acceptor helper's ports (Linux)
	stalls atomic.Uint64 // helpers found stalled and killed

	inherited *Inherited

	nextID    func() uint64
	closeOnce sync.Once
	closing   chan struct{}
	wg        sync.WaitGroup // accept loops and the closer of parked sockets
	loops     sync.WaitGroup // accept loops

	mu        sync.Mutex
	listeners []*Listener
	// stopping: StopAccepting has begun; no port opens any more, and an
	// accept loop whose acceptor helper goes away ends instead of
	// accepting itself.
	stopping bool
}

// NewServer returns a server with no listeners; nextID numbers admitted
// connections (the gateway's connection ids).
func NewServer(o Options, nextID func() uint64) *Server {
	s := &Server{
		log:         o.Log,
		admit:       o.Admission,
		listenFn:    o.ListenFunc,
		refused:     o.Refused,
		acceptorExe: o.AcceptorExe,
		inherited:   o.Inherited,
		parked:      newParkedConns(),
		nextID:      nextID,
		closing:     make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.listenFn == nil {
		s.listenFn = listenNoKeepAlive
	}
	return s
}

// Start starts the acceptor helper (when configured) and the closer of
// parked sockets. Call it before the first Listen.
func (s *Server) Start() {
	if s.acceptorExe != "" && s.admit != nil {
		a, err := startAcceptor(s.acceptorExe, s.log)
		if err != nil {
			s.log.Warn("no acceptor helper process; accepting and closing refused sockets in the gateway", "err", err)
		} else {
			s.acceptor = a
			s.parked.sink.Store(a)
		}
	}
	if s.admit != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.parked.run(s.closing)
		}()
	}
}

// Close stops accepting on every port, stops the acceptor helper (which
// closes the sockets it holds) and closes the parked sockets. Connections
// already handed to the Handler are not touched.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.mu.Lock()
		ls := s.listeners
		s.mu.Unlock()
		for _, l := range ls {
			l.Close()
		}
		if s.acceptor != nil {
			s.acceptor.stop()
		}
	})
}

// Wait returns when every accept loop has ended (after Close).
func (s *Server) Wait() { s.wg.Wait() }

// StopAccepting stops accepting on every port without dropping a
// connection already accepted, for a handover to a process that holds the
// same listening sockets: the acceptor helper stops accepting and every
// socket it had accepted is admitted and served as usual; a PROXY-protocol
// port serves the connections whose header it is reading. Connections
// waiting in the ports' backlogs stay there, for the other process. After
// that, or after wait, every port is closed as by Close.
func (s *Server) StopAccepting(wait time.Duration) {
	s.mu.Lock()
	again := s.stopping
	s.stopping = true
	ls := slices.Clone(s.listeners)
	s.mu.Unlock()
	if !again {
		helper := s.acceptor != nil && s.acceptor.stopAccepting()
		for _, l := range ls {
			l.stopAccepting(helper)
		}
		done := make(chan struct{})
		go func() {
			s.loops.Wait()
			close(done)
		}()
		t := time.NewTimer(wait)
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("accept loops still running after the handover's stop; closing their ports", "waited", wait)
		}
		t.Stop()
	}
	s.Close()
}

func (s *Server) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// AcceptorProcessRunning reports whether the acceptor helper accepts for
// this server (tollgate_acceptor_process_up).
func (s *Server) AcceptorProcessRunning() bool {
	return s.acceptor != nil && s.acceptor.running()
}

// AcceptorStalls counts acceptor helpers found alive but not accepting,
// and replaced by accepting in the gateway.
func (s *Server) AcceptorStalls() uint64 { return s.stalls.Load() }

// ListenerConfig is what the accept side needs of a listener.
type ListenerConfig struct {
	// Name is the listener's name, as declared to admission.
	Name string
	// Bootstrap is host:port of the bootstrap port (port 0: any free one).
	Bootstrap string
	// BrokerPortBase maps node N to port BrokerPortBase+N; 0 gives each
	// broker a free port instead.
	BrokerPortBase int
	// ProxyProtocol reads a PROXY protocol header (v1 or v2) first.
	ProxyProtocol bool
	// ProxyTrusted are the peers (load balancers) whose PROXY header is
	// believed; a connection from any other peer is closed.
	ProxyTrusted []netip.Prefix
	// HeaderTimeout bounds how long a client may take to send its PROXY
	// header (default 10s).
	HeaderTimeout time.Duration
}

// Listener is one named listener: its bootstrap port and a port per
// upstream broker on the same host.
type Listener struct {
	srv  *Server
	cfg  ListenerConfig
	h    Handler
	boot net.Listener

	mu     sync.Mutex
	ports  map[int32]*brokerPort
	closed bool
}

type brokerPort struct {
	node int32
	ln   net.Listener
	port int32
	// idle: taken over from a predecessor, not accepting yet: it starts
	// when Port is first asked for it, that is once the gateway knows the
	// broker (until then its connections wait in the backlog, or the
	// predecessor takes them).
	idle bool
}

// Listen opens a listener's bootstrap port (or takes it over, see
// Options.Inherited); Accept starts accepting on it. Admitted connections
// go to h.
func (s *Server) Listen(cfg ListenerConfig, h Handler) (*Listener, error) {
	l := &Listener{srv: s, cfg: cfg, h: h, ports: map[int32]*brokerPort{}}
	ln, err := s.listen(cfg, bootstrapKey(cfg.Name), cfg.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", cfg.Name, err)
	}
	l.boot = ln
	s.mu.Lock()
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	return l, nil
}

// Accept starts accepting on the bootstrap port (broker ports accept as
// soon as Port opens them). It also takes over every broker port the
// predecessor handed over, so that none closes: each accepts once Port is
// asked for it, and Retain closes those of brokers that are gone.
func (l *Listener) Accept() {
	l.srv.startLoop(l, l.boot, -1)
	host, _, _ := net.SplitHostPort(l.cfg.Bootstrap)
	for _, id := range l.srv.inherited.brokers(l.cfg.Name) {
		port := 0
		if l.cfg.BrokerPortBase > 0 {
			port = l.cfg.BrokerPortBase + int(id)
		}
		key := brokerKey(l.cfg.Name, id)
		ln, err := l.srv.inherited.Listener(key, net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			l.srv.log.Warn("not taking over a broker port", "listener", l.cfg.Name, "node", id, "err", err)
			continue
		}
		ln = l.srv.wrap(l.cfg, ln)
		l.mu.Lock()
		if _, ok := l.ports[id]; ok || l.closed {
			l.mu.Unlock()
			ln.Close()
			continue
		}
		_, ps, _ := net.SplitHostPort(ln.Addr().String())
		p, _ := strconv.Atoi(ps)
		l.ports[id] = &brokerPort{node: id, ln: ln, port: int32(p), idle: true}
		l.mu.Unlock()
		l.srv.log.Info("broker port taken over", "listener", l.cfg.Name, "node", id, "addr", ln.Addr().String())
	}
}

// startLoop starts an accept loop.
func (s *Server) startLoop(l *Listener, ln net.Listener, node int32) {
	s.wg.Add(1)
	s.loops.Add(1)
	go l.accept(ln, node)
}

// Addr is the bootstrap port's address.
func (l *Listener) Addr() net.Addr { return l.boot.Addr() }

// Name is the listener's name.
func (l *Listener) Name() string { return l.cfg.Name }

// Port returns node id's port on this listener, opening it if needed.
func (l *Listener) Port(id int32) (int32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bp, ok := l.ports[id]; ok {
		if bp.idle && !l.closed {
			bp.idle = false
			l.srv.startLoop(l, bp.ln, id)
		}
		return bp.port, nil
	}
	if l.closed {
		return 0, errors.New("listener closed")
	}
	if l.srv.isStopping() {
		return 0, errors.New("handing over: the new process opens it")
	}
	host, _, _ := net.SplitHostPort(l.cfg.Bootstrap)
	port := 0
	if l.cfg.BrokerPortBase > 0 {
		port = l.cfg.BrokerPortBase + int(id)
		if port > 65535 {
			return 0, errors.New("broker_port_base + node id exceeds 65535")
		}
	}
	ln, err := l.srv.listen(l.cfg, brokerKey(l.cfg.Name, id), net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	_, ps, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(ps)
	bp := &brokerPort{node: id, ln: ln, port: int32(p)}
	l.ports[id] = bp
	l.srv.log.Info("broker port open", "listener", l.cfg.Name, "node", id, "addr", ln.Addr().String())
	l.srv.startLoop(l, ln, id)
	return bp.port, nil
}

// Open reports node id's port if it is open, without opening it.
func (l *Listener) Open(id int32) (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bp, ok := l.ports[id]
	if !ok {
		return 0, false
	}
	return bp.port, true
}

// Retain closes the ports of brokers not in live.
func (l *Listener) Retain(live map[int32]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, bp := range l.ports {
		if !live[id] {
			l.srv.log.Info("upstream broker gone; closing its port", "listener", l.cfg.Name, "node", id)
			bp.ln.Close()
			delete(l.ports, id)
		}
	}
}

// Ports returns node id -> port of every open broker port.
func (l *Listener) Ports() map[int32]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32]int32, len(l.ports))
	for id, bp := range l.ports {
		out[id] = bp.port
	}
	return out
}

// Nodes returns the node ids with an open port, sorted.
func (l *Listener) Nodes() []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.ports))
}

// Close closes the listener's ports.
func (l *Listener) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.boot.Close()
	for _, bp := range l.ports {
		bp.ln.Close()
	}
}

// stopAccepting stops this listener's ports accepting (StopAccepting):
// those the acceptor helper accepts for end when it has passed on what it
// accepted (helper says it was told to stop); a PROXY-protocol port ends
// when the headers it is reading are in; the others close at once (their
// accept loops serve every socket they accept before they look again).
func (l *Listener) stopAccepting(helper bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	stop := func(ln net.Listener) {
		switch t := ln.(type) {
		case *proxyListener:
			t.stopAccepting()
		case *rawListener:
			if !helper || !t.helperAccepts() {
				t.Close()
			}
		default:
			ln.Close()
		}
	}
	stop(l.boot)
	for _, bp := range l.ports {
		stop(bp.ln)
	}
}

func (l *Listener) accept(ln net.Listener, node int32) {
	defer l.srv.wg.Done()
	defer l.srv.loops.Done()
	if rl, ok := ln.(*rawListener); ok {
		if l.srv.acceptor != nil {
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
// the like), as net/http does, instead of spinning; false when the server
// is closing.
func (l *Listener) acceptBackoff(backoff *time.Duration, err error) bool {
	if *backoff == 0 {
		*backoff = 5 * time.Millisecond
	} else if *backoff *= 2; *backoff > time.Second {
		*backoff = time.Second
	}
	l.srv.log.Warn("accept failed", "listener", l.cfg.Name, "err", err, "retry_in", *backoff)
	select {
	case <-time.After(*backoff):
		return true
	case <-l.srv.closing:
		return false
	}
}

// admitAndServe admits one accepted socket and hands it to the Handler
// when admitted. spare is the accept loop's admission.Conn, reused until
// one is admitted (admission touches it only then), so that a refused
// socket allocates nothing.
func (l *Listener) admitAndServe(sock socket, node int32, spare **admission.Conn) {
	var ac *admission.Conn
	if l.srv.admit != nil {
		if *spare == nil {
			*spare = new(admission.Conn)
		}
		ac = *spare
		ac.ID = l.srv.nextID()
		if !l.admitConn(sock, ac) {
			return
		}
		*spare = nil // registered: the session's now
	}
	c, err := sock.conn()
	if err != nil {
		l.srv.log.Warn("accepted connection unusable", "listener", l.cfg.Name, "remote", sock.String(), "err", err)
		sock.Close()
		if ac != nil {
			l.srv.admit.Release(ac)
		}
		return
	}
	setKeepAlive(c)
	l.h.Serve(c, node, ac)
}

// listen opens one port of a listener (named key), or takes it over from
// the predecessor, reading PROXY headers if the listener is configured to.
// TLS is layered by the session on each connection served, not on the
// listener: a refused socket costs no TLS state.
func (s *Server) listen(cfg ListenerConfig, key, addr string) (net.Listener, error) {
	ln, err := s.inherited.Listener(key, addr)
	switch {
	case err != nil:
		s.log.Warn("not taking over a port; opening it afresh", "listener", cfg.Name, "err", err)
	case ln != nil:
		s.log.Info("port taken over", "listener", cfg.Name, "port", key, "addr", ln.Addr().String())
		return s.wrap(cfg, ln), nil
	}
	ln, err = s.listenFn("tcp", addr)
	if err != nil {
		return nil, err
	}
	return s.wrap(cfg, ln), nil
}

// wrap layers what the listener's configuration asks for on a port.
func (s *Server) wrap(cfg ListenerConfig, ln net.Listener) net.Listener {
	if cfg.ProxyProtocol {
		ln = newProxyListener(ln, cfg, s.log)
	} else if s.admit != nil {
		ln = rawCapable(ln)
	}
	return ln
}

// listenNoKeepAlive listens without Go's default TCP keep-alive on accepted
// sockets: setting it costs three system calls per accept, which a
// connection storm's refused sockets do not need. admitAndServe turns it on
// for the connections it hands on.
func listenNoKeepAlive(network, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	return lc.Listen(context.Background(), network, addr)
}

// keepAlive is the TCP keep-alive of served client connections, Go's
// default for accepted sockets.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 15 * time.Second, Count: 9}

// setKeepAlive turns TCP keep-alive on for a served client connection (the
// listeners accept without it), under a PROXY-protocol wrapper too.
func setKeepAlive(c net.Conn) {
	if r, ok := c.(interface{ Raw() net.Conn }); ok {
		c = r.Raw()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(keepAlive)
	}
}
