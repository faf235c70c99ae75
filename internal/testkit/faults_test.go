package testkit

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// faultRig is a listener and a FaultDialer in front of it, on real
// loopback sockets or on a Network in a synctest bubble (virtual: timings
// are exact there; on loopback only their lower bounds are checked).
type faultRig struct {
	fd      *FaultDialer
	ln      net.Listener
	addr    string
	virtual bool
}

// onBothNets runs f over loopback sockets and over a Network in a bubble.
func onBothNets(t *testing.T, f func(t *testing.T, r *faultRig)) {
	t.Run("loopback", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f(t, &faultRig{fd: &FaultDialer{}, ln: ln, addr: ln.Addr().String()})
	})
	t.Run("memnet", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			nw := &Network{}
			ln, err := nw.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			f(t, &faultRig{fd: &FaultDialer{Dial: nw.DialContext}, ln: ln, addr: ln.Addr().String(), virtual: true})
		})
	})
}

// pair dials the listener through the fault layer: c is the dialer's
// end, s the listener's.
func (r *faultRig) pair(t *testing.T) (c, s net.Conn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, _ := r.ln.Accept()
		accepted <- s
	}()
	c, err := r.fd.DialContext(context.Background(), "tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	s = <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// took checks an elapsed time: exactly want in a bubble, at least want on
// loopback.
func (r *faultRig) took(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if r.virtual && got != want || !r.virtual && got < want {
		t.Errorf("%s took %v, want %v", what, got, want)
	}
}

// readN reads exactly n bytes within 5 s.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(b)
}

// nothingFor checks that c receives nothing for d.
func nothingFor(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 64)
	n, err := c.Read(b)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want nothing until the deadline", b[:n], err)
	}
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("write %q: %d, %v", s, n, err)
	}
}

func TestFaultRefuseAndKill(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		r.fd.Set(r.addr, Fault{Refuse: true})
		if _, err := r.fd.DialContext(context.Background(), "tcp", r.addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial while refused: %v, want ECONNREFUSED", err)
		}
		// Refuse is about new dials: the open connection still works.
		write(t, c, "ping")
		if got := readN(t, s, 4); got != "ping" {
			t.Fatalf("got %q", got)
		}
		if n := r.fd.Kill(r.addr); n != 1 {
			t.Fatalf("Kill closed %d connections, want 1", n)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after Kill: %v", err)
		}
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := s.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("the peer read %v after Kill, want EOF", err)
		}
		if r.fd.Conns(r.addr) != 0 {
			t.Fatalf("%d connections left", r.fd.Conns(r.addr))
		}
		r.fd.Revive(r.addr)
		r.passes(t, "back")
	})
}

// passes dials a new pair and checks msg crosses it.
func (r *faultRig) passes(t *testing.T, msg string) {
	t.Helper()
	c, s := r.pair(t)
	write(t, c, msg)
	if got := readN(t, s, len(msg)); got != msg {
		t.Fatalf("got %q, want %q", got, msg)
	}
}

func TestFaultBlackhole(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		r.fd.Set(r.addr, Fault{Blackhole: true})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.fd.DialContext(ctx, "tcp", r.addr)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("dial into a blackhole: %v, want a timeout", err)
		}
		r.took(t, "the blackholed dial", time.Since(start), 300*time.Millisecond)
		// The open connection passes nothing either way.
		write(t, c, "lost?")
		write(t, s, "back?")
		nothingFor(t, s, 100*time.Millisecond)
		nothingFor(t, c, 100*time.Millisecond)
		// A dial waiting in the blackhole connects when it is lifted.
		dialed := make(chan error, 1)
		go func() {
			c, err := r.fd.DialContext(context.Background(), "tcp", r.addr)
			if err == nil {
				c.Close()
			}
			dialed <- err
		}()
		go func() {
			if s, err := r.ln.Accept(); err == nil {
				s.Close()
			}
		}()
		r.fd.Clear(r.addr)
		if err := <-dialed; err != nil {
			t.Fatalf("dial after the blackhole: %v", err)
		}
		if got := readN(t, s, 5); got != "lost?" {
			t.Fatalf("held bytes: %q", got)
		}
		if got := readN(t, c, 5); got != "back?" {
			t.Fatalf("held answer: %q", got)
		}
	})
}

// A stall holds what is written (up to HoldBytes, then writes block),
// delivers nothing, honours deadlines and Close, and when lifted sends
// the held bytes in order even if nothing more is written.
func TestFaultStall(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		r.fd.Set(r.addr, Fault{Stall: true})
		write(t, c, "request")
		if h := r.fd.Held(r.addr); h != 7 {
			t.Fatalf("held %d bytes, want 7", h)
		}
		write(t, s, "answer")
		nothingFor(t, s, 100*time.Millisecond)
		// A read waits for its deadline, and a deadline set meanwhile
		// counts.
		c.SetReadDeadline(time.Now().Add(time.Hour))
		start := time.Now()
		go func() {
			time.Sleep(50 * time.Millisecond)
			c.SetReadDeadline(time.Now().Add(time.Second))
		}()
		if _, err := c.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("stalled read: %v, want the deadline", err)
		}
		r.took(t, "the stalled read", time.Since(start), 1050*time.Millisecond)
		c.SetReadDeadline(time.Time{})
		// A full hold blocks the writer until its deadline.
		big := make([]byte, HoldBytes)
		start = time.Now() // before the deadline is set: it counts from then
		c.SetWriteDeadline(start.Add(2 * time.Second))
		n, err := c.Write(big)
		if !errors.Is(err, os.ErrDeadlineExceeded) || n != HoldBytes-7 {
			t.Fatalf("write past the hold: %d, %v; want %d and the deadline", n, err, HoldBytes-7)
		}
		r.took(t, "the blocked write", time.Since(start), 2*time.Second)
		c.SetWriteDeadline(time.Time{})
		// Lifted: everything held goes out, in order, with no further
		// write; the answer comes through.
		r.fd.Clear(r.addr)
		if got := readN(t, s, 7); got != "request" {
			t.Fatalf("first held bytes %q", got)
		}
		readN(t, s, HoldBytes-7)
		if got := readN(t, c, 6); got != "answer" {
			t.Fatalf("answer %q", got)
		}
		if h := r.fd.Held(r.addr); h != 0 {
			t.Fatalf("still holding %d bytes", h)
		}
		// Close ends a stalled read.
		r.fd.Set(r.addr, Fault{Stall: true})
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		c.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("stalled read after Close: %v", err)
		}
	})
}

// Delay makes a round trip 2·d late: d on the way out, d on the way back.
func TestFaultDelay(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		const d = 300 * time.Millisecond
		r.fd.Set(r.addr, Fault{Delay: d})
		go func() {
			b := make([]byte, 4)
			if _, err := io.ReadFull(s, b); err == nil {
				s.Write(b)
			}
		}()
		start := time.Now()
		write(t, c, "echo")
		if got := readN(t, c, 4); got != "echo" {
			t.Fatalf("got %q", got)
		}
		r.took(t, "the delayed round trip", time.Since(start), 2*d)
		// A deadline set while a write is held does not cut the delay.
		go func() {
			time.Sleep(d / 3)
			c.SetWriteDeadline(time.Now().Add(time.Hour))
		}()
		start = time.Now()
		write(t, c, "late")
		r.took(t, "a delayed write whose deadline changed", time.Since(start), d)
	})
}

// Slow reads return ReadChunk bytes every ReadEvery.
func TestFaultSlowReads(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		r.fd.Set(r.addr, Fault{ReadChunk: 3, ReadEvery: 100 * time.Millisecond})
		write(t, s, "0123456789")
		start := time.Now()
		var got []byte
		reads := 0
		for len(got) < 10 {
			b := make([]byte, 64)
			n, err := c.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			if n > 3 {
				t.Fatalf("a slow read returned %d bytes, want at most 3", n)
			}
			got = append(got, b[:n]...)
			reads++
		}
		if string(got) != "0123456789" {
			t.Fatalf("got %q", got)
		}
		// At least 4 reads (3+3+3+1), each 100 ms after the last.
		r.took(t, "reading 10 bytes 3 at a time", time.Since(start), time.Duration(reads)*100*time.Millisecond)
		if r.virtual && reads != 4 {
			t.Errorf("%d reads, want 4", reads)
		}
	})
}

// A partial write sends its first bytes, then stalls until the fault is
// lifted, or resets the connection.
func TestFaultPartialWrite(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		r.fd.Set(r.addr, Fault{PartialWrite: 4})
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := c.Write([]byte("0123456789"))
			done <- result{n, err}
		}()
		if got := readN(t, s, 4); got != "0123" {
			t.Fatalf("got %q", got)
		}
		nothingFor(t, s, 100*time.Millisecond)
		select {
		case res := <-done:
			t.Fatalf("the partial write returned %+v while stalled", res)
		default:
		}
		r.fd.Clear(r.addr)
		if res := <-done; res.n != 10 || res.err != nil {
			t.Fatalf("the write after the stall: %+v", res)
		}
		if got := readN(t, s, 6); got != "456789" {
			t.Fatalf("got %q", got)
		}

		r.fd.Set(r.addr, Fault{PartialWrite: 4, PartialReset: true})
		n, err := c.Write([]byte("abcdefgh"))
		if n != 4 || !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("partial write then reset: %d, %v", n, err)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after the reset: %v", err)
		}
		// The peer sees the reset (possibly after the 4 bytes that went
		// out before it).
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(s)
		if !errors.Is(err, syscall.ECONNRESET) || (string(got) != "" && string(got) != "abcd") {
			t.Fatalf("the peer read %q, %v; want ECONNRESET", got, err)
		}
		if r.fd.Conns(r.addr) != 0 {
			t.Fatal("the reset connection is still counted")
		}
	})
}

// Reset sends an RST on every open connection: both ends see ECONNRESET.
func TestFaultReset(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		c2, s2 := r.pair(t)
		blocked := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			blocked <- err
		}()
		if n := r.fd.Reset(r.addr); n != 2 {
			t.Fatalf("Reset reset %d connections, want 2", n)
		}
		if err := <-blocked; !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a read blocked at the reset: %v, want ECONNRESET", err)
		}
		if _, err := c2.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("write after the reset: %v", err)
		}
		for _, p := range []net.Conn{s, s2} {
			p.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := p.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the peer read %v, want ECONNRESET", err)
			}
		}
		// New dials are not affected.
		r.passes(t, "ok")
	})
}

// Faults are per address: another address dialed through the same layer
// is untouched.
func TestFaultPerAddress(t *testing.T) {
	onBothNets(t, func(t *testing.T, r *faultRig) {
		c, s := r.pair(t)
		r.fd.Set("127.0.0.1:1", Fault{Stall: true, Refuse: true})
		write(t, c, "free")
		if got := readN(t, s, 4); got != "free" {
			t.Fatalf("got %q", got)
		}
	})
}
