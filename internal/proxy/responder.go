package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponse bounds upstream responses (kgo's own default read cap is
// 100 MiB; a broker can exceed it only with absurd fetch sizes).
const maxResponse = 1 << 30

// respond is the upstream-side loop: read each response, check it belongs
// to the oldest request, rewrite, throttle, write, then flush any local
// responses queued behind it.
func (s *session) respond() {
	var sz [4]byte
	for {
		_, err := io.ReadFull(s.ur, sz[:])
		var n int
		if err == nil {
			n, err = wire.FrameSize(sz, maxResponse)
		}
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
			s.close(ReasonUpstreamProtocol, errors.New("response with no request outstanding"))
			return
		}
		// A copy in the session (not on the stack, where taking its
		// address would allocate): the head stays queued until written,
		// see respondLocal.
		s.cur = s.queue[s.head]
		s.mu.Unlock()
		pr := &s.cur
		var r Reason
		if n > int(s.gw.cfg.MaxResponseSize) && pr.req.Key != int16(kmsg.Fetch) {
			s.close(ReasonResponseTooLarge, fmt.Errorf("%s response of %d bytes > socket.response_max_bytes %d",
				wire.Lookup(pr.req.Key).Name, n, s.gw.cfg.MaxResponseSize))
			return
		}
		if n >= streamMin && pr.req.Key == int16(kmsg.Fetch) {
			r, err = s.streamFetch(pr, sz, n)
		} else {
			r, err = s.forwardSmall(pr, sz, n)
		}
		if err != nil {
			s.close(r, err)
			return
		}
		if pr.silent {
			s.signalPassthrough()
			if !s.popAndFlush() {
				return
			}
			continue
		}
		s.gw.hooks.served(&s.info, &pr.req, n, pr.throttle)
		s.signalPassthrough() // after the hooks: the reader may now bind a principal
		<-s.inFlt
		if !s.popAndFlush() {
			return
		}
	}
}

// forwardSmall reads a whole response, rewrites and throttles it, and
// writes it to the client.
func (s *session) forwardSmall(pr *pending, sz [4]byte, n int) (Reason, error) {
	buf := wire.GetBuffer(4 + n)
	defer func() { buf.Release() }()
	copy(buf.B, sz[:])
	if _, err := io.ReadFull(s.ur, buf.B[4:]); err != nil {
		return upstreamReason(err), err
	}
	if err := s.process(buf, pr); err != nil {
		return upstreamReason(err), err
	}
	if pr.silent {
		return "", nil // a replayed request's answer: the client had its own
	}
	if err := s.writeClient(buf.B); err != nil {
		return writeReason(err), err
	}
	return "", nil
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
		<-s.inFlt
		err := s.writeClient(b.B)
		b.Release()
		if err != nil {
			go s.close(writeReason(err), err)
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
	s.upstreamDeadline()
	return true
}

func checkCorrelation(p []byte, pr *pending) error {
	if len(p) < 4 {
		return wire.ErrShortFrame
	}
	if got := wire.CorrelationID(p); got != pr.req.CorrelationID {
		return fmt.Errorf("%w: got %d, want %d (%s)", errCorrelation, got, pr.req.CorrelationID, wire.Lookup(pr.req.Key).Name)
	}
	return nil
}

// process checks one buffered upstream response, runs it through the
// connection's response hooks (after the Merge of the request's verdict)
// and applies the throttle.
func (s *session) process(buf *wire.Buffer, pr *pending) error {
	if err := checkCorrelation(buf.B[4:], pr); err != nil {
		return err
	}
	key, ver := pr.req.Key, pr.req.Version
	if key == int16(kmsg.SASLAuthenticate) {
		s.passthroughResponse(buf, pr)
	}
	if pr.merge != nil {
		if err := wire.Edit(buf, key, ver, pr.req.Flexible, pr.merge); err != nil {
			return err
		}
	}
	if hs := s.gw.chain.response[key]; len(hs) > 0 {
		s.resp = Response{Req: &pr.req, Buf: buf}
		for _, i := range hs {
			f := s.chain(key)[i]
			if err := f.(ResponseHook).OnResponse(s, &s.resp); err != nil {
				s.resp = Response{}
				return fmt.Errorf("%w: filter %s: %w", wire.ErrMalformed, f.Name(), err)
			}
		}
		s.resp = Response{}
	}
	if pr.silent {
		return nil // not the client's: no throttle, no mute
	}
	t := s.throttleFor(pr, len(buf.B)-4)
	pr.throttle = t
	if t <= 0 {
		return nil
	}
	if _, err := wire.SetThrottle(buf, key, ver, pr.req.Flexible, throttleMs(t)); err != nil {
		return err
	}
	s.mute(time.Now().Add(t))
	return nil
}

// throttleFor is the gateway's throttle for a response of size bytes: the
// largest of the request's verdict and the chain's throttle hooks.
func (s *session) throttleFor(pr *pending, size int) time.Duration {
	t := pr.throttle
	for _, i := range s.gw.chain.throttle[pr.req.Key] {
		t = max(t, s.chain(pr.req.Key)[i].(ThrottleHook).Throttle(s, &pr.req, size))
	}
	return t
}

func throttleMs(t time.Duration) int32 {
	return int32(min(t.Milliseconds(), 1<<31-1))
}

// putThrottle raises the int32 at b to ms.
func putThrottle(b []byte, ms int32) {
	if int32(binary.BigEndian.Uint32(b)) < ms {
		binary.BigEndian.PutUint32(b, uint32(ms))
	}
}
