package accept

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
)

// admitConn runs Kafka's acceptor procedure for one accepted socket. It
// returns true when the connection is to be served (then ac is
// registered), and false when it was rejected or parked; it blocks this
// accept loop while the gateway or listener rate, or a count, says wait.
func (l *Listener) admitConn(c socket, ac *admission.Conn) bool {
	lim := l.srv.admit
	now := time.Now()
	t, err := lim.Admit(l.cfg.Name, now)
	if err != nil {
		l.srv.log.Error("admission", "listener", l.cfg.Name, "err", err)
		c.Close()
		return false
	}
	ip := c.remoteIP()
	for {
		d := lim.AdmitIP(&t, ip, ac, time.Now())
		switch d.Verdict {
		case admission.Accept:
			return true
		case admission.Wait:
			// Block this acceptor, as Kafka does: accept nothing more on
			// this port until the wait is over.
			l.srv.parked.flush() // what this batch parked, before blocking
			var timer <-chan time.Time
			if !d.Until.IsZero() {
				tm := time.NewTimer(time.Until(d.Until))
				defer tm.Stop()
				timer = tm.C
			}
			select {
			case <-timer:
			case <-d.Wake:
			case <-l.srv.closing:
				lim.Cancel(&t, time.Now())
				c.Close()
				return false
			}
		case admission.Park:
			// Per-IP rate: never serve the socket; close it once the
			// throttle has passed (Kafka's delayed close).
			if l.srv.log.Enabled(context.Background(), slog.LevelInfo) {
				l.srv.log.Info("connection refused", "listener", l.cfg.Name, "remote", c.String(),
					"reason", "connection_rate_"+d.Reason.String(), "close_in", d.Delay)
			}
			l.srv.noteRefused(l.cfg.Name, d.Reason.String())
			// Kafka closes every socket parked in one instant of the
			// window at the same moment (the delay ends when the window
			// admits again), so a storm's closes — and the clients'
			// reconnects — land together. Each close is spread at random
			// over [delay, 2·delay): never earlier than Kafka's.
			at := d.Until
			if d.Delay > 0 {
				at = at.Add(rand.N(d.Delay))
			}
			l.srv.parked.park(c, at)
			return false
		default: // Reject
			if l.srv.log.Enabled(context.Background(), slog.LevelInfo) {
				l.srv.log.Info("connection refused", "listener", l.cfg.Name, "remote", c.String(),
					"reason", "connection_limit_"+d.Reason.String())
			}
			l.srv.noteRefused(l.cfg.Name, d.Reason.String())
			l.srv.parked.closeSoon(c)
			return false
		}
	}
}

// socket is an accepted connection before admission: a net.Conn, or on
// Linux a bare file descriptor that only becomes one if it is served (see
// rawaccept_linux.go). It is a value, not an interface: a storm refuses
// thousands of sockets a second, and boxing each would be an allocation
// and, at that rate, a garbage collection (and its pauses) every fraction
// of a second for the sessions being served.
type socket struct {
	c    net.Conn       // accepted by a net.Listener; nil for a bare descriptor
	fd   int            // the bare descriptor when c is nil
	addr netip.AddrPort // the bare descriptor's remote address
}

func connSocket(c net.Conn) socket { return socket{c: c, fd: -1} }

func (s socket) remoteIP() netip.Addr {
	if s.c != nil {
		return remoteIP(s.c)
	}
	return s.addr.Addr()
}

// String is the remote address, for logs.
func (s socket) String() string {
	if s.c != nil {
		return s.c.RemoteAddr().String()
	}
	return s.addr.String()
}

func (s socket) Close() error {
	if s.c != nil {
		return s.c.Close()
	}
	return closeFD(s.fd)
}

// conn returns the socket as a net.Conn, handing a bare descriptor to the
// runtime.
func (s socket) conn() (net.Conn, error) {
	if s.c != nil {
		return s.c, nil
	}
	return fdConn(s.fd)
}

func remoteIP(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.IPv4Unspecified()
}

func (s *Server) noteRefused(listener, reason string) {
	if s.refused != nil {
		s.refused.Refused(listener, reason)
	}
}
