package proxy

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/principal"
)

// WithAdmission makes every listener ask lim before serving a connection
// (KIP-612 creation rates, KIP-402 counts; admission.Limiter holds the
// rules). Listener names must be declared in lim's settings.
func WithAdmission(lim *admission.Limiter) Option {
	return func(g *Gateway) { g.admit = lim }
}

// admitConn runs Kafka's acceptor procedure for one accepted socket. It
// returns true when the connection is to be served (then ac is
// registered), and false when it was rejected or parked; it blocks this
// accept loop while the gateway or listener rate, or a count, says wait.
func (l *listener) admitConn(c socket, ac *admission.Conn) bool {
	lim := l.gw.admit
	now := time.Now()
	t, err := lim.Admit(l.cfg.Name, now)
	if err != nil {
		l.gw.log.Error("admission", "listener", l.cfg.Name, "err", err)
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
			l.gw.parked.flush() // what this batch parked, before blocking
			var timer <-chan time.Time
			if !d.Until.IsZero() {
				tm := time.NewTimer(time.Until(d.Until))
				defer tm.Stop()
				timer = tm.C
			}
			select {
			case <-timer:
			case <-d.Wake:
			case <-l.gw.closing:
				lim.Cancel(&t, time.Now())
				c.Close()
				return false
			}
		case admission.Park:
			// Per-IP rate: never serve the socket; close it once the
			// throttle has passed (Kafka's delayed close).
			if l.gw.log.Enabled(context.Background(), slog.LevelInfo) {
				l.gw.log.Info("connection refused", "listener", l.cfg.Name, "remote", c.String(),
					"reason", "connection_rate_"+d.Reason.String(), "close_in", d.Delay)
			}
			if l.gw.observer != nil {
				l.gw.noteRefused(l.cfg.Name, d.Reason.String())
			}
			// Kafka closes every socket parked in one instant of the
			// window at the same moment (the delay ends when the window
			// admits again), so a storm's closes — and the clients'
			// reconnects — land together. Each close is spread at random
			// over [delay, 2·delay): never earlier than Kafka's.
			at := d.Until
			if d.Delay > 0 {
				at = at.Add(rand.N(d.Delay))
			}
			l.gw.parked.park(c, at)
			return false
		default: // Reject
			if l.gw.log.Enabled(context.Background(), slog.LevelInfo) {
				l.gw.log.Info("connection refused", "listener", l.cfg.Name, "remote", c.String(),
					"reason", "connection_limit_"+d.Reason.String())
			}
			l.gw.noteRefused(l.cfg.Name, d.Reason.String())
			l.gw.parked.closeSoon(c)
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

// RefusalObserver is optionally implemented by an Observer that counts
// connections refused by admission, by Kafka setting name.
type RefusalObserver interface {
	Refused(listener, reason string)
}

// UpstreamObserver is optionally implemented by an Observer that counts
// the upstream connections the gateway opens (one per client connection
// that forwards a request; none for one that never does).
type UpstreamObserver interface {
	UpstreamOpened(c *principal.ConnInfo)
}

func (g *Gateway) noteRefused(listener, reason string) {
	if ro, ok := g.observer.(RefusalObserver); ok {
		ro.Refused(listener, reason)
	}
}

// shedLoop closes the least recently used connections when the gateway is
// over max.connections (after the limit was lowered, or while an exempt
// listener took more than its share).
func (g *Gateway) shedLoop() {
	defer g.wg.Done()
	var ids []uint64
	for {
		select {
		case <-g.closing:
			return
		case <-g.admit.ShedSignal():
		}
		ids = g.admit.Shed(ids[:0])
		if len(ids) == 0 {
			continue
		}
		want := make(map[uint64]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		g.mu.Lock()
		for s := range g.sessions {
			if want[s.info.ID] {
				go s.close(ReasonShed, nil)
			}
		}
		g.mu.Unlock()
	}
}
