package testkit

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FaultDialer is a fault layer between a dialer and the addresses it
// dials: in tests, between the gateway and the upstream brokers
// (app.Options.UpstreamDial, or proxy.WithDialFunc). Faults are set per
// dialed address (host:port exactly as dialed) and switched at run time;
// a change applies to the connections already open and to new ones.
//
// It works over real sockets (Dial nil) and over a Network (Dial set to
// the Network's DialContext) alike; every wait is on channels and timers,
// so inside a synctest bubble the faults' timing is virtual time.
//
// The zero value dials real sockets with no faults.
type FaultDialer struct {
	// Dial is the dialer underneath; nil dials real sockets (net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	addrs map[string]*faultAddr
	d     net.Dialer
}

// Fault is what happens to connections to one address. The zero value is
// no fault.
type Fault struct {
	// Refuse fails new dials with ECONNREFUSED (a broker process gone).
	Refuse bool
	// Blackhole makes new dials hang until their context ends (packets
	// dropped: the connect never completes) and open connections Stall.
	Blackhole bool
	// Stall passes nothing, in either direction, on open and new
	// connections (a broker that is hung, or a network that drops
	// everything): Writes succeed while up to HoldBytes are held (a
	// socket's send buffer), then block; Reads return nothing. Deadlines
	// and Close work as on a socket. When the stall is lifted the held
	// bytes go out, in order, and Reads resume.
	Stall bool
	// Delay holds each Write for d before it goes out and each Read's
	// bytes for d after they were read: latency both ways, per call (a
	// message read in several Reads is late several times; combined with
	// ReadChunk, d per chunk).
	Delay time.Duration
	// ReadChunk and ReadEvery make reads slow: each Read waits ReadEvery,
	// then returns at most ReadChunk bytes (0: no limit).
	ReadChunk int
	ReadEvery time.Duration
	// PartialWrite > 0 lets only the first PartialWrite bytes of each
	// Write out; then the Write blocks until the fault changes (the rest
	// then goes out) or, with PartialReset, the connection is reset: the
	// Write returns ECONNRESET and the peer sees an RST.
	PartialWrite int
	PartialReset bool
}

// HoldBytes is how much a stalled connection accepts from Writes before
// they block.
const HoldBytes = 256 << 10

func (f Fault) stalls() bool { return f.Stall || f.Blackhole }

// faultAddr is the state of one address.
type faultAddr struct {
	fault   Fault
	changed chan struct{} // closed and replaced on every change of fault
	conns   map[*faultConn]struct{}
}

func (f *FaultDialer) addrLocked(addr string) *faultAddr {
	if f.addrs == nil {
		f.addrs = map[string]*faultAddr{}
	}
	a := f.addrs[addr]
	if a == nil {
		a = &faultAddr{changed: make(chan struct{}), conns: map[*faultConn]struct{}{}}
		f.addrs[addr] = a
	}
	return a
}

// current returns addr's fault and a channel closed when it changes.
func (f *FaultDialer) current(addr string) (Fault, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.addrLocked(addr)
	return a.fault, a.changed
}

// DialContext dials addr through the fault layer.
func (f *FaultDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	for {
		ft, changed := f.current(addr)
		if ft.Refuse {
			return nil, refusedErr(network, addr)
		}
		if !ft.Blackhole {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			err := ctx.Err()
			if errors.Is(err, context.DeadlineExceeded) {
				err = os.ErrDeadlineExceeded // as a dial's own timeout reads
			}
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
	}
	dial := f.Dial
	if dial == nil {
		dial = f.d.DialContext
	}
	c, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, f: f, addr: addr, closed: make(chan struct{}), dlChanged: make(chan struct{})}
	f.mu.Lock()
	a := f.addrLocked(addr)
	if a.fault.Refuse { // killed while dialing
		f.mu.Unlock()
		c.Close()
		return nil, refusedErr(network, addr)
	}
	a.conns[fc] = struct{}{}
	f.mu.Unlock()
	return fc, nil
}

func refusedErr(network, addr string) error {
	return &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
		Addr: fakeAddr{network, addr}}
}

type fakeAddr struct{ network, addr string }

func (a fakeAddr) Network() string { return a.network }
func (a fakeAddr) String() string  { return a.addr }

// Set makes fault addr's fault, for the connections open to it and for
// new ones. Lifting a stall sends what the stalled connections held.
func (f *FaultDialer) Set(addr string, fault Fault) {
	f.mu.Lock()
	a := f.addrLocked(addr)
	a.fault = fault
	close(a.changed)
	a.changed = make(chan struct{})
	var flush []*faultConn
	if !fault.stalls() {
		for c := range a.conns {
			if c.held.Load() > 0 {
				flush = append(flush, c)
			}
		}
	}
	f.mu.Unlock()
	for _, c := range flush {
		// A writer blocked on the stall wakes and sends the held bytes
		// itself; with no writer, this does (and ends then, or when
		// the connection closes).
		go c.flush()
	}
}

// Clear removes addr's fault.
func (f *FaultDialer) Clear(addr string) { f.Set(addr, Fault{}) }

// Reset resets every open connection to addr, as a broker's crash or a
// firewall does: the peer gets an RST (SetLinger(0), then Close), and
// the dialer's side reads and writes ECONNRESET until it closes. It
// returns how many connections it reset. New dials are not affected (set
// Refuse for that).
func (f *FaultDialer) Reset(addr string) int {
	conns := f.take(addr)
	for _, c := range conns {
		c.reset()
	}
	return len(conns)
}

// Kill makes addr refuse new dials and closes every connection open to
// it, which is what a broker crash looks like from the gateway. It
// returns how many connections it closed.
func (f *FaultDialer) Kill(addr string) int {
	f.Set(addr, Fault{Refuse: true})
	conns := f.take(addr)
	for _, c := range conns {
		c.Close()
	}
	return len(conns)
}

// Revive makes addr reachable again: it clears every fault of addr.
func (f *FaultDialer) Revive(addr string) { f.Clear(addr) }

// take removes and returns the connections open to addr.
func (f *FaultDialer) take(addr string) []*faultConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.addrLocked(addr)
	out := make([]*faultConn, 0, len(a.conns))
	for c := range a.conns {
		out = append(out, c)
		delete(a.conns, c)
	}
	return out
}

// Conns returns how many connections to addr are open.
func (f *FaultDialer) Conns(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.addrLocked(addr).conns)
}

// Held returns how many bytes written to addr's connections a stall holds
// (accepted, not sent).
func (f *FaultDialer) Held(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for c := range f.addrLocked(addr).conns {
		n += int(c.held.Load())
	}
	return n
}

// faultConn is one connection through the fault layer.
type faultConn struct {
	net.Conn
	f    *FaultDialer
	addr string

	closeOnce sync.Once
	closed    chan struct{}
	isReset   atomic.Bool // reset: reads and writes fail with ECONNRESET

	// Deadlines, kept to bound the layer's own waits.
	dlMu      sync.Mutex
	rdl, wdl  time.Time
	dlChanged chan struct{} // closed and replaced when a deadline changes

	wmu  sync.Mutex // one Write (or flush) at a time: held bytes stay in order
	hold []byte     // bytes accepted during a stall; guarded by wmu
	held atomic.Int64
}

// Read reads through the fault: nothing while stalled, slowly, late.
func (c *faultConn) Read(p []byte) (int, error) {
	for {
		if err := c.state("read"); err != nil {
			return 0, err
		}
		ft, changed := c.f.current(c.addr)
		if ft.stalls() {
			if err := c.wait("read", changed); err != nil {
				return 0, err
			}
			continue
		}
		if ft.ReadEvery > 0 {
			// A deadline set meanwhile does not restart the interval; a
			// change of the fault does (look again).
			end := time.Now().Add(ft.ReadEvery)
			for d := ft.ReadEvery; d > 0 && !isClosedChan(changed); d = time.Until(end) {
				if _, err := c.waitFor("read", changed, d, true); err != nil {
					return 0, err
				}
			}
			if isClosedChan(changed) {
				continue
			}
		}
		q := p
		if ft.ReadChunk > 0 && len(q) > ft.ReadChunk {
			q = q[:ft.ReadChunk]
		}
		n, err := c.Conn.Read(q)
		if err != nil {
			return n, c.mapErr("read", err)
		}
		if n > 0 && ft.Delay > 0 {
			// The bytes are off the socket: they arrive late whatever the
			// deadline says, or not at all if the connection closes.
			if _, err := c.waitFor("read", nil, ft.Delay, false); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
}

// Write writes through the fault: held while stalled, late, partly.
func (c *faultConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	total := 0
	for {
		if err := c.state("write"); err != nil {
			return total, err
		}
		ft, changed := c.f.current(c.addr)
		if !ft.stalls() && len(c.hold) > 0 {
			if err := c.flushLocked(); err != nil {
				return total, err
			}
		}
		switch {
		case len(p) == 0:
			return total, nil
		case ft.stalls():
			if room := HoldBytes - len(c.hold); room > 0 {
				k := min(room, len(p))
				c.hold = append(c.hold, p[:k]...)
				c.held.Store(int64(len(c.hold)))
				total += k
				p = p[k:]
				continue
			}
			if err := c.wait("write", changed); err != nil {
				return total, err
			}
		case ft.PartialWrite > 0:
			k := min(ft.PartialWrite, len(p))
			n, err := c.Conn.Write(p[:k])
			total += n
			p = p[n:]
			if err != nil {
				return total, c.mapErr("write", err)
			}
			if len(p) == 0 {
				return total, nil
			}
			if ft.PartialReset {
				c.reset()
				return total, c.opErr("write", os.NewSyscallError("write", syscall.ECONNRESET))
			}
			if err := c.wait("write", changed); err != nil {
				return total, err
			}
		default:
			end := time.Now().Add(ft.Delay)
			for d := ft.Delay; d > 0; d = time.Until(end) {
				if _, err := c.waitFor("write", nil, d, true); err != nil {
					return total, err
				}
			}
			n, err := c.Conn.Write(p)
			return total + n, c.mapErr("write", err)
		}
	}
}

// flush sends what a lifted stall held, unless a Write does it first.
func (c *faultConn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if ft, _ := c.f.current(c.addr); !ft.stalls() && c.state("write") == nil {
		c.flushLocked()
	}
}

func (c *faultConn) flushLocked() error {
	// No longer held once handed to the socket: a peer that has read
	// them all must not see them counted (a write that fails puts back
	// what it did not send).
	c.held.Store(0)
	n, err := c.Conn.Write(c.hold)
	c.hold = c.hold[:copy(c.hold, c.hold[n:])]
	c.held.Store(int64(len(c.hold)))
	return c.mapErr("write", err)
}

// state is the error every operation on a closed or reset connection
// returns.
func (c *faultConn) state(op string) error {
	if c.isReset.Load() {
		return c.opErr(op, os.NewSyscallError(op, syscall.ECONNRESET))
	}
	if isClosedChan(c.closed) {
		return c.opErr(op, net.ErrClosed)
	}
	return nil
}

// wait blocks until the fault changes (changed), a deadline changes, the
// connection closes or is reset, or its op deadline passes.
func (c *faultConn) wait(op string, changed <-chan struct{}) error {
	_, err := c.waitFor(op, changed, 0, true)
	return err
}

// waitFor is wait that also ends, reporting true, after d (d > 0);
// without withDeadline the op deadline does not end it.
func (c *faultConn) waitFor(op string, changed <-chan struct{}, d time.Duration, withDeadline bool) (bool, error) {
	dl, dlChanged := c.deadline(op)
	var dlC, dC <-chan time.Time
	if withDeadline && !dl.IsZero() {
		until := time.Until(dl)
		if until <= 0 {
			return false, c.opErr(op, os.ErrDeadlineExceeded)
		}
		t := time.NewTimer(until)
		defer t.Stop()
		dlC = t.C
	} else {
		dlChanged = nil
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		dC = t.C
	}
	select {
	case <-changed:
		return false, nil
	case <-dlChanged:
		return false, nil
	case <-c.closed:
		return false, c.state(op)
	case <-dlC:
		return false, c.opErr(op, os.ErrDeadlineExceeded)
	case <-dC:
		return true, nil
	}
}

func (c *faultConn) deadline(op string) (time.Time, <-chan struct{}) {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	if op == "read" {
		return c.rdl, c.dlChanged
	}
	return c.wdl, c.dlChanged
}

func (c *faultConn) setDeadline(r, w bool, t time.Time) {
	c.dlMu.Lock()
	if r {
		c.rdl = t
	}
	if w {
		c.wdl = t
	}
	close(c.dlChanged)
	c.dlChanged = make(chan struct{})
	c.dlMu.Unlock()
}

func (c *faultConn) SetDeadline(t time.Time) error {
	c.setDeadline(true, true, t)
	return c.Conn.SetDeadline(t)
}

func (c *faultConn) SetReadDeadline(t time.Time) error {
	c.setDeadline(true, false, t)
	return c.Conn.SetReadDeadline(t)
}

func (c *faultConn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(false, true, t)
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection (and forgets it).
func (c *faultConn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.f.mu.Lock()
		delete(c.f.addrLocked(c.addr).conns, c)
		c.f.mu.Unlock()
	})
	err := c.Conn.Close()
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return err
}

// reset closes the connection with an RST; this side then reads and
// writes ECONNRESET, as after a peer's reset.
func (c *faultConn) reset() {
	c.isReset.Store(true)
	if l, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		l.SetLinger(0)
	}
	c.Close()
}

// mapErr turns the error of an operation on the connection underneath
// into what the caller would see: ECONNRESET once the layer reset it.
func (c *faultConn) mapErr(op string, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if c.isReset.Load() {
		return c.opErr(op, os.NewSyscallError(op, syscall.ECONNRESET))
	}
	return err
}

func (c *faultConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
