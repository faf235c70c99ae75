package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var errCorrelation = errors.New("response correlation id does not match the oldest request")

// session is one client connection and its own upstream connection. Two
// goroutines: the reader takes client frames and forwards them; the
// responder reads upstream responses in order and writes them, and any
// local responses queued behind them, to the client.
type session struct {
	gw   *Gateway
	ln   *listener
	info principal.ConnInfo

	client net.Conn
	// wIdle bounds a client write that makes no progress
	// (socket.connections_max_idle; writestall.go); 0 where a stallConn
	// under the client connection bounds it instead (TLS).
	wIdle time.Duration
	// upstream is dialed by the reader at the first forwarded request
	// (dialUpstream); close reads it under upMu.
	upstream net.Conn
	upMu     sync.Mutex
	upClosed bool          // guarded by upMu: close ran
	respDone chan struct{} // closed when the responder ends; nil until dialed
	cr       *connReader   // client reader
	ur       *connReader   // upstream reader

	// mu guards the queue and serialises writes to the client.
	mu    sync.Mutex
	queue []pending // FIFO of requests awaiting their responses
	head  int
	inFlt chan struct{} // semaphore bounding queue length

	accepted   time.Time                  // when the connection was accepted
	authDone   atomic.Bool                // a SASL login completed (see loggedIn)
	loginTimer atomic.Pointer[time.Timer] // closes a SASL login not done by socket.handshake_timeout

	muteUntil atomic.Int64 // unix nanos; the reader waits for it
	draining  atomic.Bool
	frameMu   sync.Mutex // guards inFrame against drain
	inFrame   bool       // the reader is inside a frame
	readDone  bool       // guarded by mu: reader stopped (drain)

	closeOnce sync.Once
	closed    chan struct{}

	clientID []byte // last client id seen, and its string
	clientIS string

	adm     *admission.Conn // admission registration, nil without admission
	filters []Filter        // the connection's chain (see Gateway.chain), made at its first request
	req     Request         // the request being read (reader goroutine only)
	verdict Verdict         // its verdict (reader goroutine only)
	stage   []byte          // staging for streamed responses (responder only)
	// rname and wname hold the topic name of a streamed response
	// (responder) or request (reader) while its records pass: the bytes
	// it was read from are reused meanwhile.
	rname, wname []byte
	pstream      produceStream // a streamed Produce being walked (reader only)
	fstream      fetchStream   // a streamed Fetch response being walked (responder only)
	fwd          []byte        // re-encoded requests (reader only)
	replay       []byte        // a request to send first when the upstream opens (Verdict.Replay)
	auth         authState
	cur          pending  // the response being processed (responder only)
	resp         Response // what the response hooks see (responder only)
	fmtr         *kmsg.RequestFormatter
	fmtrID       string
}

// pending is one request whose response has not been written yet.
type pending struct {
	req      Request       // Payload is nil once forwarded
	local    *wire.Buffer  // a local response, ready to write
	throttle time.Duration // at request time; the applied one once the response is processed
	merge    func(kmsg.Response)
	deadline time.Time // the upstream must answer by then (RequestTimeout)
	silent   bool      // a replayed request: its answer is not the client's (Verdict.Replay)
	// topicBytes sees the topics of a streamed Fetch response
	// (Verdict.TopicBytes).
	topicBytes func(name []byte, id [16]byte, bytes int)
	// topics checks the topics of a streamed Fetch response
	// (Verdict.Topics).
	topics func(name []byte, id [16]byte) bool
}

func (g *Gateway) serve(c net.Conn, l *listener, node int32, ac *admission.Conn) {
	wIdle := g.cfg.IdleTimeout
	if l.tls != nil {
		// The progress bound of writes below the record layer (writestall.go).
		c = tls.Server(stallConn{c, wIdle}, l.tls.Config()) // handshake in run (clientTLS)
		wIdle = 0
	}
	s := &session{
		gw:       g,
		ln:       l,
		client:   c,
		wIdle:    wIdle,
		inFlt:    make(chan struct{}, g.cfg.MaxInFlight),
		closed:   make(chan struct{}),
		accepted: time.Now(),
	}
	id := g.nextID.Add(1)
	if ac != nil {
		id = ac.ID
		s.adm = ac
	}
	s.info = principal.ConnInfo{
		ID:        id,
		Listener:  l.cfg.Name,
		Local:     c.LocalAddr().String(),
		NodeID:    node,
		Principal: principal.AnonymousPrincipal,
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		s.info.Remote = ap
		if p, ok := l.cidr.Map(ap.Addr()); ok {
			s.info.Principal = p
		}
	}
	if !g.addSession(s) {
		c.Close()
		if ac != nil {
			g.admit.Release(ac)
		}
		return
	}
	go s.run()
}

func (s *session) logAttrs() []any {
	return []any{"conn", s.info.ID, "listener", s.info.Listener, "remote", s.client.RemoteAddr().String(), "node", s.info.NodeID}
}

func (s *session) run() {
	if len(s.gw.upstreamFor(s.info.NodeID)) == 0 {
		s.open()
		s.close(ReasonUpstreamDial, fmt.Errorf("no upstream address known for node %d", s.info.NodeID))
		s.gw.removeSession(s)
		return
	}
	// socket.handshake_timeout bounds the TLS handshake and the SASL
	// login from the moment the connection was accepted: a client that
	// trickles its handshake or never logs in holds nothing for long.
	handshakeBy := s.accepted.Add(s.gw.cfg.HandshakeTimeout)
	ctx, cancel := s.deadlineContext(handshakeBy)
	err := s.clientTLS(ctx)
	cancel()
	s.open()
	if err != nil {
		r := ReasonTLSHandshake
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			r = ReasonHandshakeTimeout
		}
		s.close(r, err)
		s.gw.removeSession(s)
		return
	}
	s.auth.needed = s.ln.cfg.UsesSASL()
	if s.auth.needed {
		s.loginTimer.Store(time.AfterFunc(time.Until(handshakeBy), func() {
			if !s.authDone.Load() {
				s.close(ReasonHandshakeTimeout, errors.New("SASL login not completed within socket.handshake_timeout"))
			}
		}))
	}
	s.cr = newConnReader(s.client)
	s.readLoop()
}

// readLoop reads the client until the session ends, then waits for the
// responder and retires the session — unless the reader handed its wait
// to a small goroutine (idleWait), which resumes the loop when the client
// sends again.
func (s *session) readLoop() {
	if s.read() {
		return
	}
	s.finish()
}

// finish waits for the responder and retires the session.
func (s *session) finish() {
	if s.respDone != nil {
		<-s.respDone
	}
	s.gw.removeSession(s)
}

// idleHandoff is how long the reader waits for a client's next frame on
// the goroutine that processed the last one. A goroutine's stack grows to
// what processing a frame needs (kmsg decoding, filters) and never shrinks
// back below 4 KiB while it waits in the poller; after a second of silence
// the wait moves to a fresh goroutine whose stack stays at the runtime's
// smallest, so an idle connection costs 2 KiB of stack instead of 4 or 8
// (issue "Hold up at scale": 8 KiB of RSS per idle connection at most).
const idleHandoff = time.Second

// idleWait waits, on a small fresh goroutine, for the client of an idle
// connection to send (or the idle deadline, a drain or a close), then
// carries the read loop on.
func (s *session) idleWait() {
	if err := s.cr.waitReadable(); err != nil {
		s.stopReading(s.readReason(err), err)
		s.finish()
		return
	}
	s.readLoop()
}

// dialContext bounds a dial by the dial timeout and ends it when the
// session closes.
func (s *session) dialContext() (context.Context, context.CancelFunc) {
	return s.deadlineContext(time.Now().Add(s.gw.cfg.DialTimeout))
}

// deadlineContext ends at d or when the session closes.
func (s *session) deadlineContext(d time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(context.Background(), d)
	go func() {
		select {
		case <-s.closed:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

func (s *session) open() {
	s.gw.log.Info("connection open", s.logAttrs()...)
	s.gw.hooks.opened(&s.info)
}

// close closes both sides once, with a reason.
func (s *session) close(r Reason, err error) {
	s.closeOnce.Do(func() {
		close(s.closed)
		if t := s.loginTimer.Load(); t != nil {
			t.Stop()
		}
		defer s.dropPending()
		if s.adm != nil {
			s.gw.admit.Release(s.adm)
		}
		s.client.Close()
		s.upMu.Lock()
		s.upClosed = true
		up := s.upstream
		s.upMu.Unlock()
		if up != nil {
			up.Close()
		}
		attrs := append(s.logAttrs(), "reason", string(r))
		if err != nil {
			attrs = append(attrs, "err", err.Error())
		}
		switch r {
		case ReasonClientClosed, ReasonShutdown:
			s.gw.log.Info("connection closed", attrs...)
		default:
			s.gw.log.Warn("connection closed", attrs...)
		}
		s.gw.hooks.closed(&s.info, r, err)
	})
}

// drain stops reading new requests; the responder closes the session once
// every request already forwarded has its response written.
func (s *session) drain() {
	s.frameMu.Lock()
	defer s.frameMu.Unlock()
	s.draining.Store(true)
	if !s.inFrame {
		// Waiting for the next frame: stop waiting. A frame being read
		// is finished and forwarded first (see read).
		s.client.SetReadDeadline(time.Now())
	}
}

// mute stops reading from the client until t (KIP-219: respond at once,
// then hold the connection, so clients that ignore throttle_time_ms are
// held as well).
func (s *session) mute(t time.Time) {
	n := t.UnixNano()
	for {
		cur := s.muteUntil.Load()
		if cur >= n || s.muteUntil.CompareAndSwap(cur, n) {
			return
		}
	}
}

// waitUnmuted blocks while the connection is muted. It reports false if
// the session closed meanwhile, or the gateway began shutting down (a mute
// can outlast the shutdown timeout; the connection stops reading instead).
func (s *session) waitUnmuted() bool {
	for {
		until := s.muteUntil.Load()
		d := time.Until(time.Unix(0, until))
		if until == 0 || d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.closed:
			t.Stop()
			return false
		case <-s.gw.closing:
			t.Stop()
			return false
		}
	}
}

// clientIDString returns the client id as a string, reusing the previous
// one when it is unchanged so steady traffic does not allocate.
func (s *session) clientIDString(b []byte) string {
	if bytes.Equal(b, s.clientID) && (b == nil) == (s.clientID == nil) {
		return s.clientIS
	}
	s.clientID = append(s.clientID[:0], b...)
	if b == nil {
		s.clientID = nil
	}
	s.clientIS = string(b)
	return s.clientIS
}

// drop tells the chain's drop hooks about a request they saw that will not
// be answered.
func (s *session) drop(req *Request) { s.dropSeen(req, len(s.gw.chain.filters)) }

// chain returns the filters request req passes: the connection's own
// instances, made before the first request that reaches a per-connection
// filter (reader goroutine), or the shared chain until then — a
// connection that only ever sends ApiVersions holds no per-connection
// filter state. The responder reads s.filters only for keys whose
// requests made them.
func (s *session) chain(key int16) []Filter {
	if s.filters == nil {
		if !s.gw.chain.needsConn[key] {
			return s.gw.chain.filters
		}
		s.filters = s.gw.chain.forConn(s)
	}
	return s.filters
}

// dropSeen is drop for a request whose chain ended at filter last (it
// answered or closed): the filters after it never saw the request.
func (s *session) dropSeen(req *Request, last int) {
	for _, i := range s.gw.chain.drop[req.Key] { // in chain order
		if i > last {
			return
		}
		s.chain(req.Key)[i].(DropHook).Dropped(s, req)
	}
}

// dropPending tells the drop hooks about forwarded requests that will never
// be answered. It runs once the connection is closed; the responder may
// still be running, so the queue is read under mu.
func (s *session) dropPending() {
	s.mu.Lock()
	var lost []Request
	for _, pr := range s.queue[s.head:] {
		if pr.local == nil && len(s.gw.chain.drop[pr.req.Key]) > 0 {
			lost = append(lost, pr.req)
		}
	}
	s.mu.Unlock()
	for i := range lost {
		s.drop(&lost[i])
	}
}

// The session is its filters' Conn.

// Info implements Conn.
func (s *session) Info() *principal.ConnInfo { return &s.info }

// Authenticated implements Conn.
func (s *session) Authenticated() bool { return !s.ln.cfg.UsesSASL() || s.authDone.Load() }

// Listener implements Conn.
func (s *session) Listener() *ListenerConfig { return &s.ln.cfg }

// Mapper implements Conn.
func (s *session) Mapper() wire.Mapper { return s.ln }

// BrokerAddress implements Conn.
func (s *session) BrokerAddress(id int32) (string, int32, bool) {
	p, ok := s.ln.acc.Open(id)
	return s.ln.advHost, p, ok
}

// Dialed implements Conn; the reader's goroutine only.
func (s *session) Dialed() bool { return s.upstream != nil }

// ClusterID implements Conn.
func (s *session) ClusterID() (string, bool) {
	if id := s.gw.clusterID.Load(); id != nil {
		return *id, true
	}
	return "", false
}
