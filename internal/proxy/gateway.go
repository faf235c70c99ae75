package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/principal"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/auth"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Gateway fronts one upstream cluster on one or more listeners.
type Gateway struct {
	cfg      Config
	mem      *memBudget // socket.queued_max_request_bytes; nil: off
	log      *slog.Logger
	filters  Chain
	chain    *chain
	hooks    hooks
	hookErr  error
	listenFn func(network, addr string) (net.Listener, error)
	dialFn   func(ctx context.Context, network, addr string) (net.Conn, error)

	listeners []*listener
	meta      *kgo.Client
	admit     *admission.Limiter
	acc       *accept.Server
	// acceptorExe is the acceptor helper's binary (WithAcceptorProcess).
	acceptorExe string
	// inherited are the listening sockets taken over from a predecessor
	// (WithInherited).
	inherited *accept.Inherited
	clusterID atomic.Pointer[string] // from the last metadata refresh
	creds     auth.CredentialLookup
	upTLS     *tls.Config
	upSASL    sasl.Mechanism

	mu       sync.Mutex
	brokers  map[int32]string // upstream node id -> host:port
	sessions map[*session]struct{}
	nextBoot int
	closed   bool

	numParts partitionsCache

	nextID  atomic.Uint64
	wg      sync.WaitGroup // accept loops, sessions, refresher
	closing chan struct{}
	drained chan struct{}
}

// Option configures a Gateway.
type Option func(*Gateway)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(g *Gateway) { g.log = l } }

// WithChain sets the filters every connection opens, in order (see
// Chain). Without one the gateway forwards every request unchanged — no
// address rewriting either: kafkaapi.Chain is the gateway's chain.
func WithChain(c Chain) Option { return func(g *Gateway) { g.filters = c } }

// WithHooks adds observers (metrics, logs, audit): each must implement at
// least one of the observer hooks in hooks.go.
func WithHooks(hs ...any) Option {
	return func(g *Gateway) {
		for _, h := range hs {
			if err := g.hooks.add(h); err != nil && g.hookErr == nil {
				g.hookErr = err
			}
		}
	}
}

// WithListenFunc replaces net.Listen, e.g. with an in-memory network.
func WithListenFunc(fn func(network, addr string) (net.Listener, error)) Option {
	return func(g *Gateway) { g.listenFn = fn }
}

// WithDialFunc replaces the upstream dialer.
func WithDialFunc(fn func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(g *Gateway) { g.dialFn = fn }
}

// New builds a gateway; Start opens its listeners.
func New(cfg Config, opts ...Option) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg:      cfg,
		log:      slog.Default(),
		brokers:  map[int32]string{},
		sessions: map[*session]struct{}{},
		closing:  make(chan struct{}),
		drained:  make(chan struct{}),
	}
	if cfg.QueuedMaxRequestBytes > 0 {
		g.mem = newMemBudget(cfg.QueuedMaxRequestBytes)
	}
	d := &net.Dialer{}
	g.dialFn = d.DialContext
	for _, o := range opts {
		o(g)
	}
	if g.hookErr != nil {
		return nil, g.hookErr
	}
	ch, err := newChain(g.filters)
	if err != nil {
		return nil, err
	}
	g.chain = ch
	return g, nil
}

// Start opens every listener, learns the upstream brokers and opens a port
// for each of them.
func (g *Gateway) Start(ctx context.Context) error {
	// The metadata client exists before the first connection is
	// accepted: filters ask the gateway about topics (TopicPartitions)
	// from the first request on.
	metaOpts := []kgo.Opt{
		kgo.SeedBrokers(g.cfg.Upstream...),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := g.dialFn(ctx, network, host)
			if err != nil || g.upTLS == nil {
				return c, err
			}
			cfg := g.upTLS.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName, _, _ = net.SplitHostPort(host)
			}
			return tls.Client(c, cfg), nil
		}),
		kgo.ClientID("tollgate"),
		kgo.MetadataMinAge(time.Second),
	}
	if g.upSASL != nil {
		metaOpts = append(metaOpts, kgo.SASL(g.upSASL))
	}
	meta, err := kgo.NewClient(metaOpts...)
	if err != nil {
		return fmt.Errorf("upstream client: %w", err)
	}
	g.meta = meta
	ao := accept.Options{Log: g.log, Admission: g.admit, ListenFunc: g.listenFn, AcceptorExe: g.acceptorExe, Refused: &g.hooks,
		Inherited: g.inherited}
	g.acc = accept.NewServer(ao, func() uint64 { return g.nextID.Add(1) })
	g.acc.Start()
	for _, lc := range g.cfg.Listeners {
		l := &listener{gw: g, cfg: lc, advHost: lc.advertisedHost()}
		if err := l.setupSecurity(); err != nil {
			g.closeListeners()
			g.meta.Close()
			return err
		}
		trusted, _ := lc.proxyTrusted() // Validate checked it
		acc, err := g.acc.Listen(accept.ListenerConfig{Name: lc.Name, Bootstrap: lc.Bootstrap,
			BrokerPortBase: lc.BrokerPortBase, ProxyProtocol: lc.ProxyProtocol,
			ProxyTrusted: trusted, HeaderTimeout: g.cfg.HandshakeTimeout}, l)
		if err != nil {
			g.closeListeners()
			g.meta.Close()
			return err
		}
		l.acc = acc
		g.listeners = append(g.listeners, l)
		acc.Accept()
	}
	if err := g.refresh(ctx); err != nil {
		g.log.Warn("could not read upstream metadata yet; will retry", "err", err)
	}
	g.wg.Add(1)
	go g.refreshLoop()
	if g.admit != nil {
		g.wg.Add(1)
		go g.shedLoop()
	}
	return nil
}

// BootstrapAddrs returns each listener's bound bootstrap address by name.
func (g *Gateway) BootstrapAddrs() map[string]string {
	out := map[string]string{}
	for _, l := range g.listeners {
		out[l.cfg.Name] = l.acc.Addr().String()
	}
	return out
}

// Bootstrap returns the bootstrap address of the first listener.
func (g *Gateway) Bootstrap() string { return g.listeners[0].acc.Addr().String() }

// refresh reads the broker set from upstream, opens ports for new brokers
// and closes the ports of brokers that are gone.
func (g *Gateway) refresh(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics, brokers only
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, g.meta)
	if err != nil {
		g.forgetIfUnreachable(ctx)
		return err
	}
	if resp.ClusterID != nil {
		id := *resp.ClusterID
		g.clusterID.Store(&id)
	}
	live := map[int32]bool{}
	for _, b := range resp.Brokers {
		live[b.NodeID] = true
		g.learn(b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		for _, l := range g.listeners {
			if _, err := l.acc.Port(b.NodeID); err != nil {
				g.log.Error("cannot open broker port", "listener", l.cfg.Name, "node", b.NodeID, "err", err)
			}
		}
	}
	if len(resp.Brokers) == 0 {
		return nil // never drop everything on an odd answer
	}
	g.mu.Lock()
	for id := range g.brokers {
		if !live[id] {
			delete(g.brokers, id)
		}
	}
	g.mu.Unlock()
	for _, l := range g.listeners {
		l.acc.Retain(live)
	}
	return nil
}

// forgetIfUnreachable forgets the broker set after a failed refresh if no
// known broker accepts a connection (dialed as sessions dial, within
// upstream.dial_timeout): the gateway is then not ready and every broker
// port closes, so clients are refused rather than accepted and failed; the
// bootstrap port stays open (its connections close with
// upstream_unreachable). The next refresh that reads metadata learns the
// brokers and reopens their ports. A refresh that failed while a broker is
// still reachable (one broker stalled, say) changes nothing.
func (g *Gateway) forgetIfUnreachable(ctx context.Context) {
	g.mu.Lock()
	addrs := make([]string, 0, len(g.brokers))
	for _, a := range g.brokers {
		addrs = append(addrs, a)
	}
	g.mu.Unlock()
	if len(addrs) == 0 || ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.DialTimeout)
	defer cancel()
	reached := make(chan bool, len(addrs))
	for _, a := range addrs {
		go func() {
			c, err := g.dialFn(ctx, "tcp", a)
			if err == nil {
				c.Close()
			}
			reached <- err == nil
		}()
	}
	reachable := false
	for range addrs {
		if <-reached {
			reachable = true
			cancel() // the others need not finish dialing
		}
	}
	if reachable || errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	g.mu.Lock()
	clear(g.brokers)
	g.mu.Unlock()
	g.log.Warn("no upstream broker reachable: not ready, broker ports closed until metadata can be read again", "brokers", addrs)
	for _, l := range g.listeners {
		l.acc.Retain(nil)
	}
}

func (g *Gateway) refreshLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.MetadataRefresh)
	defer t.Stop()
	for {
		select {
		case <-g.closing:
			return
		case <-t.C:
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-g.closing:
				case <-ctx.Done():
				}
				cancel()
			}()
			if err := g.refresh(ctx); err != nil && !errors.Is(err, context.Canceled) {
				g.log.Warn("upstream metadata refresh failed", "err", err)
			}
			cancel()
		}
	}
}

// learn records the upstream address of a node.
func (g *Gateway) learn(id int32, addr string) {
	g.mu.Lock()
	if g.brokers[id] != addr {
		if old, ok := g.brokers[id]; ok {
			g.log.Info("upstream broker moved", "node", id, "from", old, "to", addr)
		} else {
			g.log.Info("upstream broker found", "node", id, "addr", addr)
		}
		g.brokers[id] = addr
	}
	g.mu.Unlock()
}

// upstreamFor lists the upstream addresses to try for a connection to
// node id: just that node's, or for a bootstrap connection (-1) every known
// broker, starting with the next in turn, so one dead broker does not fail
// bootstrapping.
func (g *Gateway) upstreamFor(id int32) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id >= 0 {
		if a, ok := g.brokers[id]; ok {
			return []string{a}
		}
		return nil
	}
	var addrs []string
	if len(g.brokers) == 0 {
		addrs = append(addrs, g.cfg.Upstream...)
	} else {
		ids := make([]int32, 0, len(g.brokers))
		for id := range g.brokers {
			ids = append(ids, id)
		}
		slicesSort(ids)
		for _, id := range ids {
			addrs = append(addrs, g.brokers[id])
		}
	}
	start := g.nextBoot % len(addrs)
	g.nextBoot++
	return append(addrs[start:], addrs[:start]...)
}

// Shutdown stops accepting, lets every session finish the requests it has
// in flight, and returns when all are done or ctx ends (then the rest are
// closed).
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	close(g.closing)
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	g.closeListeners()
	for _, s := range sessions {
		s.drain()
	}
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		if g.acc != nil {
			g.acc.Wait()
		}
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		g.mu.Lock()
		for s := range g.sessions {
			s.close(ReasonShutdown, errors.New("shutdown timeout"))
		}
		g.mu.Unlock()
		<-done
	}
	if g.meta != nil {
		g.meta.Close()
	}
	return err
}

// Sockets duplicates every listening socket of the gateway, for a new
// process taking over (accept.StartSuccessor); the caller closes them.
func (g *Gateway) Sockets() ([]accept.Socket, error) {
	if g.acc == nil {
		return nil, errors.New("gateway not started")
	}
	return g.acc.Sockets()
}

// handoverStopWait bounds how long StopAccepting waits for the sockets
// already accepted to be handed to sessions.
const handoverStopWait = 2 * time.Second

// StopAccepting stops accepting without dropping a connection already
// accepted (the acceptor helper's are served), leaving the connections
// still in the ports' backlogs to the process that took the listening
// sockets over. Shutdown then drains the sessions.
func (g *Gateway) StopAccepting() {
	if g.acc != nil {
		g.acc.StopAccepting(handoverStopWait)
	}
}

// WithInherited makes the gateway take over the listening sockets a
// predecessor handed it (accept.Inherit) instead of opening its ports.
func WithInherited(h *accept.Inherited) Option {
	return func(g *Gateway) { g.inherited = h }
}

func (g *Gateway) closeListeners() {
	if g.acc != nil {
		g.acc.Close() // the acceptor helper closes the sockets it still holds
	}
}

// AcceptorProcessRunning reports whether the acceptor helper accepts for
// this gateway (tollgate_acceptor_process_up).
func (g *Gateway) AcceptorProcessRunning() bool {
	return g.acc != nil && g.acc.AcceptorProcessRunning()
}

// AcceptorStalls counts acceptor helpers found alive but not accepting
// (and killed: the gateway then accepts itself).
func (g *Gateway) AcceptorStalls() uint64 {
	if g.acc == nil {
		return 0
	}
	return g.acc.AcceptorStalls()
}

// WithAcceptorProcess makes the gateway start exe (its own binary; exe must
// call accept.RunAcceptorHelper first thing) as the acceptor helper for its
// plain TCP listeners (Linux, with admission). If the helper cannot start,
// the gateway accepts in-process and logs why.
func WithAcceptorProcess(exe string) Option {
	return func(g *Gateway) { g.acceptorExe = exe }
}

// WithAdmission makes every listener ask lim before serving a connection
// (KIP-612 creation rates, KIP-402 counts; admission.Limiter holds the
// rules). Listener names must be declared in lim's settings.
func WithAdmission(lim *admission.Limiter) Option {
	return func(g *Gateway) { g.admit = lim }
}

func (g *Gateway) addSession(s *session) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.sessions[s] = struct{}{}
	g.wg.Add(1)
	return true
}

func (g *Gateway) removeSession(s *session) {
	g.mu.Lock()
	delete(g.sessions, s)
	g.mu.Unlock()
	g.wg.Done()
}

// CloseSessions closes every open client connection whose login matches
// (only connections that completed a login are offered) with reason r, and
// returns how many: the way to make a withdrawn credential stop working at
// once.
func (g *Gateway) CloseSessions(match func(*principal.ConnInfo) bool, r Reason) int {
	g.mu.Lock()
	var doomed []*session
	for s := range g.sessions {
		// authDone is stored after the login's Principal and
		// Credential: reading them is safe once it reads true.
		if s.authDone.Load() && match(&s.info) {
			doomed = append(doomed, s)
		}
	}
	g.mu.Unlock()
	for _, s := range doomed {
		s.close(r, errors.New("its credential was withdrawn"))
	}
	return len(doomed)
}

// SessionsByListener returns open client connections per listener.
func (g *Gateway) SessionsByListener() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for s := range g.sessions {
		out[s.info.Listener]++
	}
	return out
}

// Ready reports whether the gateway knows at least one upstream broker.
func (g *Gateway) Ready() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.brokers) > 0
}

// Sessions returns how many client connections are open.
func (g *Gateway) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}
