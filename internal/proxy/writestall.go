package proxy

import (
	"errors"
	"net"
	"os"
	"time"
)

// A client that stops reading its answers must not hold a session for
// ever: its socket's send buffer fills, the responder blocks in Write (and
// a local answer's writer with the queue's lock held), the reader waits for
// an in-flight slot, and the session's goroutines, buffers and upstream
// connection stay. Kafka's selector closes a connection with no activity
// for connections.max.idle.ms; Tollgate closes one whose write makes no
// progress for socket.connections_max_idle (IdleTimeout), with reason
// write_timeout. Progress, not the whole write: a slow client that drains
// a large answer bit by bit is served.
//
// On a plain TCP connection each write arms the write deadline and, when
// it fires after some bytes went, arms it again for the rest. On TLS the
// same loop runs below the TLS record layer (stallConn), since a TLS
// connection whose write timed out is broken for good. A record block
// spliced socket to socket is copied in spliceChunk pieces, each with its
// own deadline (a splice that timed out may have lost what it read, so it
// is never resumed).

// spliceChunk is the most of a record block spliced under one write
// deadline (Go's splice moves at most 1 MiB a call anyway).
const spliceChunk = 1 << 20

// errWriteStalled marks a client write that made no progress in time.
var errWriteStalled = errors.New("the client read nothing of its answers for socket.connections_max_idle")

// writeProgress writes p to c; with idle > 0, a write that makes no
// progress for idle fails with errWriteStalled (wrapping the deadline
// error). The deadline is armed a quarter of idle ahead at a time, so a
// stall is seen between idle and 1¼ idle after the last byte went, and a
// write that keeps moving is never cut.
func writeProgress(c net.Conn, p []byte, idle time.Duration) (int, error) {
	if idle <= 0 {
		return c.Write(p)
	}
	total := 0
	last := time.Now() // the last progress (or the write's start)
	for {
		now := time.Now()
		c.SetWriteDeadline(now.Add(max(idle/4, time.Millisecond)))
		n, err := c.Write(p[total:])
		total += n
		switch {
		case err == nil:
			return total, nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return total, err
		case n > 0:
			last = time.Now()
		case time.Since(last) >= idle:
			return total, stalled(err)
		}
	}
}

func stalled(err error) error { return errors.Join(errWriteStalled, err) }

// stallConn gives the connection under a TLS one writeProgress's writes.
type stallConn struct {
	net.Conn
	idle time.Duration
}

func (c stallConn) Write(p []byte) (int, error) { return writeProgress(c.Conn, p, c.idle) }

// writeClient writes p to the client under the progress bound.
func (s *session) writeClient(p []byte) error {
	_, err := writeProgress(s.client, p, s.wIdle)
	return err
}

// writeReason classifies an error writing to the client.
func writeReason(err error) Reason {
	if errors.Is(err, errWriteStalled) {
		return ReasonWriteTimeout
	}
	return ReasonClientClosed
}

// clientWriter is the client connection as an io.Writer for copyN's
// buffered path (a connection splice cannot reach): writes under the
// progress bound, errors marked as the client's.
type clientWriter struct{ s *session }

func (w clientWriter) Write(p []byte) (int, error) {
	n, err := writeProgress(w.s.client, p, w.s.wIdle)
	if err != nil {
		err = errClientWrite{err}
	}
	return n, err
}

// copyToClient copies k bytes from the upstream to the client: spliced
// between two TCP sockets, spliceChunk at a time, each under the
// progress bound; otherwise through clientWriter.
func (s *session) copyToClient(k int) error {
	tc, ok := s.client.(*net.TCPConn)
	if !ok {
		_, err := copyN(clientWriter{s}, s.upstream, int64(k))
		return err
	}
	idle := s.wIdle
	for k > 0 {
		n := k
		if idle > 0 {
			n = min(k, spliceChunk)
			tc.SetWriteDeadline(time.Now().Add(idle))
		}
		if _, err := copyN(tc, s.upstream, int64(n)); err != nil {
			var ne net.Error
			if idle > 0 && errors.As(err, &ne) && ne.Timeout() && s.clientWriteExpired(tc) {
				return errClientWrite{stalled(err)}
			}
			return err
		}
		k -= n
	}
	return nil
}

// clientWriteExpired tells a splice's deadline error that is the client's
// (its write deadline passed) from the upstream's read deadline.
func (s *session) clientWriteExpired(tc *net.TCPConn) bool {
	// A zero-length write fails at once when the write deadline passed.
	_, err := tc.Write(nil)
	return errors.Is(err, os.ErrDeadlineExceeded)
}
