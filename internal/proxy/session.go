package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/wire"
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

	client   net.Conn
	upstream net.Conn
	ur       *bufio.Reader

	// mu guards the queue and serialises writes to the client.
	mu    sync.Mutex
	queue []pending // FIFO of requests awaiting their responses
	head  int
	inFlt chan struct{} // semaphore bounding queue length

	muteUntil atomic.Int64 // unix nanos; the reader waits for it
	draining  atomic.Bool
	readDone  bool // guarded by mu: reader stopped (drain)

	closeOnce sync.Once
	closed    chan struct{}

	clientID []byte // last client id seen, and its string
	clientIS string
}

// pending is one request whose response has not been written yet.
type pending struct {
	req      Request // Payload is nil once forwarded
	flexible bool
	local    *wire.Buffer // a local response, ready to write
}

func (g *Gateway) serve(c net.Conn, l *listener, node int32) {
	s := &session{
		gw:     g,
		ln:     l,
		client: c,
		inFlt:  make(chan struct{}, g.cfg.MaxInFlight),
		closed: make(chan struct{}),
	}
	s.info = principal.ConnInfo{
		ID:        g.nextID.Add(1),
		Listener:  l.cfg.Name,
		Local:     c.LocalAddr().String(),
		NodeID:    node,
		Principal: principal.AnonymousPrincipal,
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		s.info.Remote = ap
	}
	if !g.addSession(s) {
		c.Close()
		return
	}
	go s.run()
}

func (s *session) logAttrs() []any {
	return []any{"conn", s.info.ID, "listener", s.info.Listener, "remote", s.client.RemoteAddr().String(), "node", s.info.NodeID}
}

func (s *session) run() {
	defer s.gw.removeSession(s)
	addrs := s.gw.upstreamFor(s.info.NodeID)
	if len(addrs) == 0 {
		s.open()
		s.close(ReasonUpstreamDial, fmt.Errorf("no upstream address known for node %d", s.info.NodeID))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.gw.cfg.DialTimeout)
	go func() {
		select {
		case <-s.closed:
		case <-ctx.Done():
		}
		cancel()
	}()
	var up net.Conn
	var errs []error
	for _, addr := range addrs {
		c, err := s.gw.dialFn(ctx, "tcp", addr)
		if err == nil {
			up = c
			break
		}
		errs = append(errs, fmt.Errorf("dial %s: %w", addr, err))
	}
	cancel()
	s.open()
	if up == nil {
		s.close(ReasonUpstreamDial, errors.Join(errs...))
		return
	}
	s.upstream = up
	s.ur = bufio.NewReaderSize(up, 16<<10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.respond()
	}()
	s.read()
	<-done
}

func (s *session) open() {
	s.gw.log.Info("connection open", s.logAttrs()...)
	if s.gw.observer != nil {
		s.gw.observer.Opened(&s.info)
	}
}

// close closes both sides once, with a reason.
func (s *session) close(r Reason, err error) {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.client.Close()
		if s.upstream != nil {
			s.upstream.Close()
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
		if s.gw.observer != nil {
			s.gw.observer.Closed(&s.info, r, err)
		}
	})
}

// drain stops reading new requests; the responder closes the session once
// every request already forwarded has its response written.
func (s *session) drain() {
	s.draining.Store(true)
	s.client.SetReadDeadline(time.Now())
}

// read is the client-side loop: frame, header, policy, forward.
func (s *session) read() {
	br := bufio.NewReaderSize(s.client, 16<<10)
	max := s.gw.cfg.MaxRequestSize
	for {
		if !s.waitUnmuted() {
			return
		}
		buf, err := wire.ReadFrame(br, max)
		if err != nil {
			s.stopReading(clientReason(err), err)
			return
		}
		if r, err := s.handle(buf); err != nil {
			buf.Release()
			s.close(r, err)
			return
		}
	}
}

// stopReading ends the reader. When draining, in-flight requests still get
// their responses; otherwise the session closes.
func (s *session) stopReading(r Reason, err error) {
	if s.draining.Load() {
		s.mu.Lock()
		s.readDone = true
		empty := s.head == len(s.queue)
		s.mu.Unlock()
		if empty {
			s.close(ReasonShutdown, nil)
		}
		return
	}
	s.close(r, err)
}

// handle processes one client frame; it owns buf.
func (s *session) handle(buf *wire.Buffer) (Reason, error) {
	p := buf.B[4:]
	h, err := wire.ParseRequestHeader(p)
	if err != nil {
		return clientReason(err), err
	}
	req := Request{
		Key:           h.Key,
		Version:       h.Version,
		CorrelationID: h.CorrelationID,
		ClientID:      s.clientIDString(h.ClientID),
		Size:          len(p),
		Payload:       p,
		Received:      time.Now(),
	}
	flexible := h.API.Flexible(h.Version)
	if h.Key == wire.KeyApiVersions && h.Version > wire.ApiVersionsMax {
		// KIP-511: answer a too-new ApiVersions ourselves, with the v0
		// error body, so the client retries at a version we can read.
		buf.Release()
		s.respondLocal(&req, false, wire.UnsupportedApiVersions(h.CorrelationID, wire.ApiVersionsMax))
		return "", nil
	}
	if h.Key == wire.KeyProduce {
		if req.Acks, err = wire.ProduceAcks(p, h); err != nil {
			return ReasonBadFrame, err
		}
	}
	var v Verdict
	if s.gw.policy != nil {
		v = s.gw.policy.Request(&s.info, &req)
	}
	switch {
	case v.Close != "":
		return v.Close, fmt.Errorf("%s v%d refused", h.API.Name, h.Version)
	case v.Respond != nil:
		buf.Release()
		v.Respond.SetVersion(h.Version)
		s.respondLocal(&req, flexible, wire.EncodeResponse(h.CorrelationID, flexible, v.Respond))
		return "", nil
	}
	expects := req.ExpectsResponse()
	if expects {
		select {
		case s.inFlt <- struct{}{}:
		case <-s.closed:
			return ReasonIOError, net.ErrClosed
		}
		s.mu.Lock()
		pr := req
		pr.Payload = nil
		s.queue = append(s.queue, pending{req: pr, flexible: flexible})
		s.mu.Unlock()
	}
	_, err = s.upstream.Write(buf.B)
	buf.Release()
	if err != nil {
		return ReasonUpstreamClosed, fmt.Errorf("write upstream: %w", err)
	}
	if v.Throttle > 0 {
		s.mute(time.Now().Add(v.Throttle))
	}
	return "", nil
}

// respondLocal writes a response the gateway built, in order: directly if
// nothing is in flight, else queued behind the upstream responses.
func (s *session) respondLocal(req *Request, flexible bool, b *wire.Buffer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == len(s.queue) {
		_, err := s.client.Write(b.B)
		b.Release()
		if err != nil {
			go s.close(ReasonClientClosed, err)
		}
		return
	}
	pr := *req
	pr.Payload = nil
	s.queue = append(s.queue, pending{req: pr, flexible: flexible, local: b})
}

// respond is the upstream-side loop: read each response, check it belongs
// to the oldest request, rewrite, throttle, write, then flush any local
// responses queued behind it.
func (s *session) respond() {
	for {
		buf, err := wire.ReadFrame(s.ur, 1<<30)
		if err != nil {
			select {
			case <-s.closed:
			default:
				s.close(upstreamReason(err), err)
			}
			return
		}
		s.mu.Lock()
		if s.head == len(s.queue) {
			s.mu.Unlock()
			buf.Release()
			s.close(ReasonUpstreamProtocol, errors.New("response with no request outstanding"))
			return
		}
		pr := s.queue[s.head] // stays queued until written, see respondLocal
		s.mu.Unlock()
		if err := s.process(buf, &pr); err != nil {
			buf.Release()
			s.close(upstreamReason(err), err)
			return
		}
		_, err = s.client.Write(buf.B)
		buf.Release()
		if err != nil {
			s.close(ReasonClientClosed, err)
			return
		}
		<-s.inFlt
		if !s.popAndFlush() {
			return
		}
	}
}

// popAndFlush removes the written head and writes any local responses
// that were waiting behind it. It reports false when the session is done.
func (s *session) popAndFlush() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue[s.head] = pending{}
	s.head++
	for s.head < len(s.queue) && s.queue[s.head].local != nil {
		b := s.queue[s.head].local
		s.queue[s.head] = pending{}
		s.head++
		_, err := s.client.Write(b.B)
		b.Release()
		if err != nil {
			go s.close(ReasonClientClosed, err)
			return false
		}
	}
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
		if s.readDone {
			go s.close(ReasonShutdown, nil)
			return false
		}
	} else if s.head > 64 && s.head*2 > len(s.queue) {
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	return true
}

// process checks and rewrites one upstream response and applies the
// throttle.
func (s *session) process(buf *wire.Buffer, pr *pending) error {
	p := buf.B[4:]
	if len(p) < 4 {
		return wire.ErrShortFrame
	}
	if got := wire.CorrelationID(p); got != pr.req.CorrelationID {
		return fmt.Errorf("%w: got %d, want %d (%s)", errCorrelation, got, pr.req.CorrelationID, wire.Lookup(pr.req.Key).Name)
	}
	key, ver := pr.req.Key, pr.req.Version
	switch {
	case key == wire.KeyApiVersions:
		if err := wire.RewriteApiVersions(buf, ver, nil); err != nil {
			return err
		}
	case wire.CarriesAddresses(key):
		if err := wire.RewriteAddresses(buf, key, ver, pr.flexible, s.ln); err != nil {
			return err
		}
	}
	if s.gw.policy == nil {
		return nil
	}
	t := s.gw.policy.Response(&s.info, &pr.req, buf)
	if t <= 0 {
		return nil
	}
	ms := int32(min(t.Milliseconds(), 1<<31-1))
	if _, err := wire.SetThrottle(buf, key, ver, pr.flexible, ms); err != nil {
		return err
	}
	s.mute(time.Now().Add(t))
	return nil
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
// the session closed meanwhile.
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
