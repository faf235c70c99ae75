package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/tollgate/tollgate/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// readBufSize is each connection's read buffer. Frames that fit are
	// read whole; the head of a larger one is parsed in place.
	readBufSize = 16 << 10
	// streamMin is the size from which a Produce request or a Fetch
	// response is streamed (spliced, socket to socket, on Linux) instead
	// of being read into a buffer and written out again.
	streamMin = 64 << 10
)

// read is the client-side loop: frame, header, auth gate, filters,
// forward. It reports whether it handed the wait for the next frame to
// idleWait (the session goes on there) rather than ending.
func (s *session) read() (handedOff bool) {
	var sz [4]byte // here, not in readFrameSize: it escapes, once per read, not per frame
	for {
		if handedOff, ok := s.awaitFrame(); !ok {
			return handedOff
		}
		n, ok := s.readFrameSize(&sz)
		if !ok || !s.handleFrame(sz, n) {
			return false
		}
	}
}

// awaitFrame waits until the client's next frame may be read: the channel
// unmuted, connections.max.idle armed and, when nothing is buffered, the
// socket readable. When it is not ok the reader ends, or, handedOff, goes
// on in idleWait.
func (s *session) awaitFrame() (handedOff, ok bool) {
	if !s.waitUnmuted() {
		s.stopReading(ReasonShutdown, nil) // no-op once closed
		return false, false
	}
	idleBy, ok := s.idleDeadline()
	if !ok {
		s.stopReading(ReasonShutdown, nil)
		return false, false
	}
	if s.cr.Buffered() != 0 || s.cr.rc == nil {
		return false, true
	}
	// Nothing buffered: wait here a moment, then hand the wait to a
	// small goroutine (see idleHandoff).
	err := s.cr.waitReadable()
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !s.draining.Load() && (idleBy.IsZero() || time.Now().Before(idleBy)) {
		if !s.rearm(idleBy) {
			s.stopReading(ReasonShutdown, nil)
			return false, false
		}
		go s.idleWait()
		return true, false
	}
	if err != nil {
		s.stopReading(s.readReason(err), err)
		return false, false
	}
	if !s.rearm(idleBy) {
		s.stopReading(ReasonShutdown, nil)
		return false, false
	}
	return false, true
}

// readFrameSize reads the next frame's size into sz and checks it; false
// when the reader ended.
func (s *session) readFrameSize(sz *[4]byte) (int, bool) {
	if _, err := io.ReadFull(s.cr, sz[:]); err != nil {
		s.stopReading(s.readReason(err), err)
		return 0, false
	}
	// Before a SASL login completes a frame may be no larger than
	// Kafka's sasl.server.max.receive.size, checked before any buffer is
	// taken: an unauthenticated client cannot make the gateway hold
	// 100 MiB.
	max := s.gw.cfg.MaxRequestSize
	if s.auth.needed {
		max = min(max, s.gw.cfg.SASLMaxReceiveSize)
	}
	n, err := wire.FrameSize(*sz, max)
	if err != nil {
		s.stopReading(clientReason(err), err)
		return 0, false
	}
	return n, true
}

// handleFrame reads and handles the frame whose size sz (n) has been
// read; false when the reader ended.
func (s *session) handleFrame(sz [4]byte, n int) bool {
	// A frame that arrived while the reader was already waiting for it is
	// still held for a mute set meanwhile (by the previous response): a
	// muted channel reads nothing.
	if !s.waitUnmuted() {
		s.stopReading(ReasonShutdown, nil)
		return false
	}
	if s.adm != nil {
		s.adm.Touch(time.Now()) // least recently used are shed first
	}
	// A frame whose size has been read is read, and forwarded, whole,
	// even if a shutdown begins meanwhile.
	s.frameMu.Lock()
	s.inFrame = true
	if s.draining.Load() {
		s.client.SetReadDeadline(time.Time{})
	}
	s.frameMu.Unlock()
	var r Reason
	var err error
	if n >= streamMin {
		r, err = s.handleLarge(sz, n)
	} else {
		r, err = s.handleSmall(sz, n)
	}
	s.frameMu.Lock()
	s.inFrame = false
	draining := s.draining.Load()
	s.frameMu.Unlock()
	switch {
	case err == errHeldAtShutdown:
		// The requests already forwarded still get their responses.
		s.stopReading(ReasonShutdown, nil)
		return false
	case err != nil:
		s.close(r, err)
		return false
	case draining:
		s.stopReading(ReasonShutdown, nil)
		return false
	}
	return true
}

// idleDeadline arms connections.max.idle.ms for the next frame: a client
// that sends nothing for that long is closed (the deadline also covers a
// frame trickled in slower than that). False when the session is draining:
// then no new frame is read.
//
// When the reader can hand its wait off (plain TCP, nothing buffered), the
// deadline armed is the hand-off's, idleHandoff from now, if that comes
// first; rearm sets the idle one once the client sends or the wait moves.
// It returns the idle deadline (zero: none).
func (s *session) idleDeadline() (time.Time, bool) {
	s.frameMu.Lock()
	defer s.frameMu.Unlock()
	if s.draining.Load() {
		return time.Time{}, false
	}
	now := time.Now()
	var idleBy time.Time
	if d := s.gw.cfg.IdleTimeout; d > 0 {
		idleBy = now.Add(d)
	}
	armed := idleBy
	if s.cr.Buffered() == 0 && s.cr.rc != nil {
		if h := now.Add(idleHandoff); idleBy.IsZero() || h.Before(idleBy) {
			armed = h
		}
	}
	s.client.SetReadDeadline(armed)
	return idleBy, true
}

// rearm sets the read deadline back to the idle one after the hand-off
// wait; false when the session is draining (whose deadline stays).
func (s *session) rearm(idleBy time.Time) bool {
	s.frameMu.Lock()
	defer s.frameMu.Unlock()
	if s.draining.Load() {
		return false
	}
	s.client.SetReadDeadline(idleBy)
	return true
}

// readReason classifies an error reading a client frame; a deadline that
// is not the drain's is the idle timeout.
func (s *session) readReason(err error) Reason {
	if errors.Is(err, os.ErrDeadlineExceeded) && !s.draining.Load() {
		return ReasonIdle
	}
	return clientReason(err)
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

// handleSmall reads a whole frame into a pooled buffer and handles it.
func (s *session) handleSmall(sz [4]byte, n int) (r Reason, err error) {
	if m := s.gw.mem; m != nil {
		if !m.take(int64(4+n), s.closed, s.gw.closing) {
			return ReasonShutdown, net.ErrClosed
		}
		defer m.give(int64(4 + n))
	}
	buf := wire.GetBuffer(4 + n)
	copy(buf.B, sz[:])
	if _, err := io.ReadFull(s.cr, buf.B[4:]); err != nil {
		buf.Release()
		return s.readReason(err), err
	}
	defer buf.Release()
	if s.auth.raw {
		return s.rawToken(buf.B[4:])
	}
	req, r, err := s.parse(buf.B[4:], n)
	if err != nil || req == nil {
		return r, err
	}
	if handled, r, err := s.gate(req); err != nil || handled {
		return r, err
	}
	v, r, err := s.decide(req)
	if err != nil || v == nil {
		return r, err
	}
	if err := s.enqueue(req, v); err != nil {
		return ReasonIOError, err
	}
	defer func() {
		if ar, aerr := s.awaitPassthrough(); aerr != nil && err == nil {
			r, err = ar, aerr
		}
	}()
	if s.upstream == nil {
		if r, err := s.dialUpstream(); err != nil {
			return r, err
		}
	}
	out := buf.B
	if v.Forward != nil {
		v.Forward.SetVersion(req.Version)
		s.fwd = s.formatter(req.ClientID).AppendRequest(s.fwd[:0], v.Forward, req.CorrelationID)
		out = s.fwd
	}
	if _, err := s.upstream.Write(out); err != nil {
		return ReasonUpstreamClosed, fmt.Errorf("write upstream: %w", err)
	}
	s.afterForward(req, v)
	return "", nil
}

// handleLarge handles a frame too large to buffer whole: its head is parsed
// where it lies in the read buffer and the rest is streamed upstream. Only
// Produce is streamed; any other key this large is read whole.
func (s *session) handleLarge(sz [4]byte, n int) (Reason, error) {
	if s.auth.raw {
		return ReasonAuthFailed, errors.New("a raw SASL token of 64 KiB or more")
	}
	head, err := s.cr.Peek(min(n, readBufSize))
	if err != nil {
		return clientReason(err), err
	}
	if len(head) < 2 || int16(binary.BigEndian.Uint16(head)) != int16(kmsg.Produce) {
		return s.handleSmall(sz, n)
	}
	req, r, err := s.parse(head, n)
	if err != nil || req == nil {
		return r, err
	}
	if handled, r, err := s.gate(req); err != nil || handled {
		return r, err
	}
	v, r, err := s.decide(req)
	if err != nil || v == nil {
		if v == nil && err == nil {
			_, err = s.cr.Discard(n) // answered locally
		}
		return r, err
	}
	if v.Forward != nil || v.Merge != nil {
		return ReasonRefused, errors.New("a streamed Produce cannot be rewritten")
	}
	if err := s.enqueue(req, v); err != nil {
		return ReasonIOError, err
	}
	if s.upstream == nil {
		if r, err := s.dialUpstream(); err != nil {
			return r, err
		}
	}
	if v.Topics != nil || v.TopicBytes != nil {
		if r, err := s.streamProduceChecked(sz, n, req, v.Topics, v.TopicBytes); err != nil {
			return r, err
		}
	} else if r, err := s.streamToUpstream(sz, n); err != nil {
		return r, err
	}
	s.afterForward(req, v)
	return "", nil
}

// parse reads the header of payload p (whole or just the head of an
// n-byte payload). A nil Request with a nil error means the gateway has
// answered already (too-new ApiVersions).
func (s *session) parse(p []byte, n int) (*Request, Reason, error) {
	h, err := wire.ParseRequestHeader(p)
	if err != nil {
		return nil, clientReason(err), err
	}
	req := &s.req
	*req = Request{
		Key:           h.Key,
		Version:       h.Version,
		CorrelationID: h.CorrelationID,
		ClientID:      s.clientIDString(h.ClientID),
		Size:          n,
		Payload:       p,
		BodyOffset:    h.BodyOffset,
		Received:      time.Now(),
		Flexible:      h.API.Flexible(h.Version),
	}
	if h.Key == int16(kmsg.ApiVersions) && h.Version > wire.ApiVersionsMax {
		// KIP-511: answer a too-new ApiVersions ourselves, with the v0
		// error body, so the client retries at a version we can read.
		req.Flexible = false
		s.respondLocal(req, wire.UnsupportedApiVersions(h.CorrelationID, wire.ApiVersionsMax))
		return nil, "", nil
	}
	switch h.Key {
	case int16(kmsg.Produce):
		if req.Acks, err = wire.ProduceAcks(p, h); err != nil {
			return nil, ReasonBadFrame, err
		}
		if ms, err := wire.ProduceTimeout(p, h); err == nil {
			req.MaxWait = time.Duration(max(ms, 0)) * time.Millisecond
		}
	case int16(kmsg.Fetch):
		if ms, ok := wire.FetchMaxWait(p, h.BodyOffset, h.Version); ok {
			req.MaxWait = time.Duration(max(ms, 0)) * time.Millisecond
		}
	}
	return req, "", nil
}

// errHeldAtShutdown ends the reader when a held request is dropped because
// the session closed or the gateway is shutting down.
var errHeldAtShutdown = errors.New("request dropped while held: connection closing")

// decide runs the request through the connection's filters (see Verdict
// for how their verdicts combine), waits out a hold, and answers the
// request when a filter did. A nil verdict with a nil error means the
// request was answered locally.
func (s *session) decide(req *Request) (*Verdict, Reason, error) {
	v := &s.verdict
	last := s.runFilters(req, v)
	switch {
	case v.Close != "":
		s.dropSeen(req, last)
		return nil, v.Close, fmt.Errorf("%s v%d refused", wire.Lookup(req.Key).Name, req.Version)
	case v.Hold > 0 && !s.hold(v.Hold):
		// Closed, or the gateway is shutting down: the held request is
		// not forwarded (the client's retry writes it once) and gives
		// back what the filters reserved for it.
		s.drop(req)
		return nil, ReasonShutdown, errHeldAtShutdown
	}
	if v.Respond != nil {
		s.chargeLocal(req, v, last)
		s.answerLocally(req, v)
		s.dropSeen(req, last)
		return nil, "", nil
	}
	return v, "", nil
}

// chargeLocal charges a request answered by filter last to the filters
// before it (LocalHook), for the time since it was received and held, and
// raises the verdict's throttle to theirs.
func (s *session) chargeLocal(req *Request, v *Verdict, last int) {
	idx := s.gw.chain.local[req.Key]
	if len(idx) == 0 {
		return
	}
	took := max(time.Since(req.Received)-v.Hold, 0)
	fs := s.chain(req.Key)
	for _, i := range idx {
		if i >= last {
			break
		}
		v.Throttle = max(v.Throttle, fs[i].(LocalHook).AnsweredLocally(s, req, took))
	}
}

// runFilters passes the request to the filters that declare its key, first
// to last, and combines their verdicts into v. It returns the filter that
// ended the chain, len(s.filters) if none did: the later ones never saw the
// request.
func (s *session) runFilters(req *Request, v *Verdict) (last int) {
	*v = Verdict{}
	fs := s.chain(req.Key)
	for _, i := range s.gw.chain.request[req.Key] {
		stop, bug := v.combine(fs[i].(RequestHook).OnRequest(s, req))
		if bug != nil {
			s.gw.log.Error("filter chain bug", append(s.logAttrs(), "filter", fs[i].Name(), "err", bug)...)
			v.Close = ReasonRefused
		}
		if stop {
			return i
		}
	}
	return len(s.filters)
}

// answerLocally writes the verdict's Respond as the request's answer, with
// the Merges of the filters before the one that answered and the verdict's
// throttle, and mutes the connection for that throttle.
func (s *session) answerLocally(req *Request, v *Verdict) {
	v.Respond.SetVersion(req.Version)
	if av, ok := v.Respond.(*kmsg.ApiVersionsResponse); ok && av.ErrorCode == kerr.UnsupportedVersion.Code {
		// KIP-511: that answer is a v0 body whatever the version asked.
		av.Version, req.Flexible = 0, false
	}
	if v.Merge != nil {
		// The filters before the one that answered forwarded their part
		// to it: its answer is, for them, the upstream's.
		v.Merge(v.Respond)
	}
	if t, ok := v.Respond.(kmsg.SetThrottleResponse); ok && v.Throttle > 0 {
		if cur, _ := v.Respond.(kmsg.ThrottleResponse).Throttle(); cur < throttleMs(v.Throttle) {
			t.SetThrottle(throttleMs(v.Throttle))
		}
	}
	if v.Replay && s.upstream == nil {
		s.replay = append(append(s.replay[:0], sz4(len(req.Payload))...), req.Payload...)
	}
	b := wire.EncodeResponse(req.CorrelationID, req.Flexible, v.Respond)
	s.gw.hooks.served(&s.info, req, len(b.B)-4, v.Throttle)
	s.respondLocal(req, b)
	if v.Throttle > 0 {
		s.mute(time.Now().Add(v.Throttle))
	}
}

// enqueue records a forwarded request that expects a response, waiting
// while too many are in flight.
func (s *session) enqueue(req *Request, v *Verdict) error {
	if !req.ExpectsResponse() {
		return nil
	}
	select {
	case s.inFlt <- struct{}{}:
	case <-s.closed:
		s.drop(req)
		return net.ErrClosed
	}
	if req.Key == int16(kmsg.ShareFetch) {
		if sf, err := DecodeAs[*kmsg.ShareFetchRequest](req); err == nil {
			req.MaxWait = time.Duration(max(sf.MaxWaitMillis, 0)) * time.Millisecond
		}
	}
	now := time.Now()
	req.Forwarded = now // before the copy: the Throttle hook sees the queued copy
	pr := *req
	pr.Payload = nil
	pr.decoded = nil
	deadline := now.Add(s.gw.cfg.RequestTimeout + req.MaxWait)
	s.mu.Lock()
	s.queue = append(s.queue, pending{req: pr, throttle: v.Throttle, merge: v.Merge, deadline: deadline, topicBytes: v.TopicBytes, topics: v.Topics})
	if s.head == len(s.queue)-1 {
		s.upstreamDeadline() // the new head: the responder may be waiting with none
	}
	s.mu.Unlock()
	return nil
}

// upstreamDeadline arms the upstream read deadline for the oldest
// forwarded request (none when nothing is in flight): a broker that does
// not answer within socket's request timeout closes the session. mu is
// held.
func (s *session) upstreamDeadline() {
	s.upMu.Lock()
	up := s.upstream
	s.upMu.Unlock()
	if up == nil {
		return
	}
	var d time.Time
	if s.head < len(s.queue) && s.queue[s.head].local == nil {
		d = s.queue[s.head].deadline
	}
	up.SetReadDeadline(d)
}

// afterForward mutes a request without a response for its throttle; the
// others are muted when their response is written.
func (s *session) afterForward(req *Request, v *Verdict) {
	if req.ExpectsResponse() {
		return
	}
	if v.Throttle > 0 {
		s.mute(time.Now().Add(v.Throttle))
	}
	s.gw.hooks.served(&s.info, req, 0, v.Throttle)
}

// formatter returns a request formatter for the client's own client id.
func (s *session) formatter(clientID string) *kmsg.RequestFormatter {
	if s.fmtr == nil || s.fmtrID != clientID {
		s.fmtr, s.fmtrID = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), clientID
	}
	return s.fmtr
}

// streamToUpstream forwards the size prefix and n payload bytes from the
// client: what is already buffered is written with the prefix in one
// call, the rest is copied socket to socket (splice on Linux).
func (s *session) streamToUpstream(sz [4]byte, n int) (Reason, error) {
	b := s.cr.Buffered()
	first, _ := s.cr.Peek(min(b, n))
	bufs := net.Buffers{sz[:], first}
	if _, err := bufs.WriteTo(s.upstream); err != nil {
		return ReasonUpstreamClosed, fmt.Errorf("write upstream: %w", err)
	}
	s.cr.Discard(len(first))
	if rest := int64(n - len(first)); rest > 0 {
		// Copied socket to socket (spliced on Linux). A short copy with
		// io.EOF is the client leaving mid-frame (a timed-out client
		// closes while its request is held, for one); a write to a
		// closed upstream fails with another error.
		if _, err := copyN(s.upstream, s.client, rest); err != nil {
			if errors.Is(err, io.EOF) {
				return ReasonClientClosed, fmt.Errorf("client closed mid-frame: %w", err)
			}
			return ReasonUpstreamClosed, fmt.Errorf("stream to upstream: %w", err)
		}
	}
	return "", nil
}

// respondLocal writes a response the gateway built, in order: directly if
// nothing is in flight, else queued behind the upstream responses.
//
// A queued local response holds a slot of socket.max_in_flight like a
// forwarded request, so a client with one long-poll Fetch in flight cannot
// queue the gateway's own answers without end: the reader waits for a
// slot (reading nothing meanwhile).
func (s *session) respondLocal(req *Request, b *wire.Buffer) {
	s.mu.Lock()
	if s.head == len(s.queue) {
		s.writeLocal(b)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	select {
	case s.inFlt <- struct{}{}:
	case <-s.closed:
		b.Release()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == len(s.queue) { // the responder caught up meanwhile
		<-s.inFlt
		s.writeLocal(b)
		return
	}
	pr := *req
	pr.Payload, pr.decoded = nil, nil
	s.queue = append(s.queue, pending{req: pr, local: b})
}

// writeLocal writes a local response now; mu is held.
func (s *session) writeLocal(b *wire.Buffer) {
	err := s.writeClient(b.B)
	b.Release()
	if err != nil {
		go s.close(writeReason(err), err)
	}
}

// hold waits d before the request is forwarded, like a mute; false if the
// session closed meanwhile.
func (s *session) hold(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closed:
		return false
	case <-s.gw.closing:
		return false
	}
}

// sz4 is a frame's size prefix.
func sz4(n int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return b[:]
}
