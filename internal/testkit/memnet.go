package testkit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Network is an in-memory TCP-like network for tests, usable inside a
// testing/synctest bubble: every blocking operation (Accept, Read, Write,
// a dial waiting for backlog room) waits on channels, and deadlines are
// timers, so a bubble whose goroutines all wait on the network is durably
// blocked and its fake clock can advance. Create the Network inside the
// bubble that uses it: its channels and timers belong to the bubble that
// made them.
//
// Connections are buffered in each direction (BufferSize bytes, like a
// socket buffer), so a writer can get ahead of its reader a little. A
// listener's Addr and both ends' LocalAddr/RemoteAddr are *net.TCPAddr.
// Ports are one namespace per Network regardless of IP; a listener on an
// unspecified IP (":0", "0.0.0.0:0") takes dials to any IP.
//
// The zero value is ready to use.
type Network struct {
	// BufferSize is the per-direction buffer of each connection
	// (default 64 KiB). Set it before the first Listen.
	BufferSize int
	// Backlog is how many dialed connections a listener holds before
	// Accept takes them; further dials wait (default 128).
	Backlog int

	mu        sync.Mutex
	listeners map[int]*memListener
	nextPort  int
}

const (
	defaultBufferSize = 64 << 10
	defaultBacklog    = 128
	firstPort         = 20000
)

var loopback = netip.MustParseAddr("127.0.0.1")

// Listen listens on addr ("127.0.0.1:0" picks a fresh port that this
// Network has not handed out before; an explicit port is taken as is and
// fails with EADDRINUSE if a listener holds it). network must be tcp,
// tcp4 or tcp6.
func (n *Network) Listen(network, addr string) (net.Listener, error) {
	ip, port, err := n.parse("listen", network, addr, true)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[int]*memListener{}
	}
	if port == 0 {
		port = n.allocPortLocked()
	} else if _, taken := n.listeners[port]; taken {
		return nil, &net.OpError{Op: "listen", Net: network, Addr: tcpAddr(ip, port),
			Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	l := &memListener{
		n:       n,
		ip:      ip,
		addr:    tcpAddr(ip, port),
		port:    port,
		changed: make(chan struct{}),
	}
	n.listeners[port] = l
	return l, nil
}

// DialContext connects to addr. It fails with ECONNREFUSED if nothing
// listens there (or the listener is closed) and waits, until ctx ends,
// only when the listener's backlog is full. The listener's Accept returns
// the other end.
func (n *Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ip, port, err := n.parse("dial", network, addr, false)
	if err != nil {
		return nil, err
	}
	raddr := tcpAddr(ip, port)
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: err}
	}
	refused := &net.OpError{Op: "dial", Net: network, Addr: raddr,
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	n.mu.Lock()
	l := n.listeners[port]
	if l == nil || (!l.ip.IsUnspecified() && l.ip != ip) {
		n.mu.Unlock()
		return nil, refused
	}
	local := ip
	if !local.IsLoopback() {
		local = loopback
	}
	laddr := tcpAddr(local, n.allocPortLocked())
	size := n.BufferSize
	n.mu.Unlock()
	if size <= 0 {
		size = defaultBufferSize
	}
	cli, srv := newConnPair(laddr, raddr, size)
	backlog := n.Backlog
	if backlog <= 0 {
		backlog = defaultBacklog
	}
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, refused
		}
		if len(l.queue) < backlog {
			l.queue = append(l.queue, srv)
			l.notifyLocked()
			l.mu.Unlock()
			return cli, nil
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: network, Addr: raddr, Err: ctx.Err()}
		}
	}
}

// Dial is DialContext with a background context.
func (n *Network) Dial(network, addr string) (net.Conn, error) {
	return n.DialContext(context.Background(), network, addr)
}

// Listening reports whether a listener holds addr's port.
func (n *Network) Listening(addr string) bool {
	_, port, err := n.parse("dial", "tcp", addr, false)
	if err != nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listeners[port] != nil
}

func (n *Network) allocPortLocked() int {
	if n.nextPort < firstPort {
		n.nextPort = firstPort
	}
	for {
		p := n.nextPort
		n.nextPort++
		if n.nextPort > 65535 {
			n.nextPort = firstPort
		}
		if _, taken := n.listeners[p]; !taken {
			return p
		}
	}
}

// parse resolves addr: "localhost" is 127.0.0.1; an empty host is the
// unspecified address to listen on and loopback to dial.
func (n *Network) parse(op, network, addr string, listen bool) (netip.Addr, int, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return netip.Addr{}, 0, &net.OpError{Op: op, Net: network, Err: net.UnknownNetworkError(network)}
	}
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, 0, &net.OpError{Op: op, Net: network, Err: err}
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 || (!listen && port == 0) {
		return netip.Addr{}, 0, &net.OpError{Op: op, Net: network,
			Err: &net.AddrError{Err: "invalid port", Addr: addr}}
	}
	var ip netip.Addr
	switch host {
	case "":
		if listen {
			ip = netip.IPv6Unspecified()
		} else {
			ip = loopback
		}
	case "localhost":
		ip = loopback
	default:
		ip, err = netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, 0, &net.OpError{Op: op, Net: network,
				Err: &net.DNSError{Err: "no such host (in-memory network)", Name: host, IsNotFound: true}}
		}
		ip = ip.Unmap()
		if !listen && ip.IsUnspecified() {
			ip = loopback
		}
	}
	return ip, port, nil
}

func tcpAddr(ip netip.Addr, port int) *net.TCPAddr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port)))
}

// memListener is a Network listener.
type memListener struct {
	n    *Network
	ip   netip.Addr
	addr *net.TCPAddr
	port int

	mu      sync.Mutex
	queue   []*memConn
	closed  bool
	changed chan struct{} // closed and replaced on every change
}

func (l *memListener) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Accept waits for a dialed connection; after Close it fails with
// net.ErrClosed.
func (l *memListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		}
		if len(l.queue) > 0 {
			c := l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
			l.notifyLocked()
			l.mu.Unlock()
			return c, nil
		}
		ch := l.changed
		l.mu.Unlock()
		<-ch
	}
}

// Close frees the port, fails pending and later Accepts with
// net.ErrClosed and resets connections dialed but not yet accepted.
func (l *memListener) Close() error {
	l.n.mu.Lock()
	if l.n.listeners[l.port] == l {
		delete(l.n.listeners, l.port)
	}
	l.n.mu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	q := l.queue
	l.queue = nil
	l.notifyLocked()
	l.mu.Unlock()
	for _, c := range q {
		c.Close()
	}
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }

// halfPipe is one direction of a connection: a bounded byte ring.
type halfPipe struct {
	mu      sync.Mutex
	buf     []byte // ring, allocated on first write
	size    int
	start   int
	n       int
	wclosed bool          // the writing end closed: EOF once drained
	rclosed bool          // the reading end closed: writes fail
	reset   bool          // an end closed with SetLinger(0): both ends fail with ECONNRESET
	changed chan struct{} // closed and replaced on every change
}

func newHalfPipe(size int) *halfPipe {
	return &halfPipe{size: size, changed: make(chan struct{})}
}

func (h *halfPipe) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *halfPipe) readLocked(p []byte) int {
	total := 0
	for len(p) > 0 && h.n > 0 {
		end := h.start + h.n
		if end > h.size {
			end = h.size
		}
		k := copy(p, h.buf[h.start:end])
		p = p[k:]
		total += k
		h.start = (h.start + k) % h.size
		h.n -= k
	}
	if h.n == 0 {
		h.start = 0
	}
	return total
}

func (h *halfPipe) writeLocked(p []byte) int {
	if h.buf == nil {
		h.buf = make([]byte, h.size)
	}
	total := 0
	for len(p) > 0 && h.n < h.size {
		at := (h.start + h.n) % h.size
		end := h.size
		if at < h.start {
			end = h.start
		}
		k := copy(h.buf[at:end], p)
		p = p[k:]
		total += k
		h.n += k
	}
	return total
}

// memConn is one end of a connection.
type memConn struct {
	in, out       *halfPipe
	local, remote *net.TCPAddr
	wlock         chan struct{} // a Write holds it: writes do not interleave

	closeOnce sync.Once
	closed    chan struct{}
	rdl, wdl  *deadline
	linger0   atomic.Bool // SetLinger(0): Close resets
}

func newConnPair(cliAddr, srvAddr *net.TCPAddr, size int) (cli, srv *memConn) {
	a, b := newHalfPipe(size), newHalfPipe(size) // a: cli->srv, b: srv->cli
	mk := func(in, out *halfPipe, local, remote *net.TCPAddr) *memConn {
		return &memConn{
			in: in, out: out, local: local, remote: remote,
			wlock:  make(chan struct{}, 1),
			closed: make(chan struct{}),
			rdl:    newDeadline(),
			wdl:    newDeadline(),
		}
	}
	return mk(b, a, cliAddr, srvAddr), mk(a, b, srvAddr, cliAddr)
}

func (c *memConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

func isClosedChan(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Read reads what is buffered, waiting for data; io.EOF once the peer has
// closed and everything it wrote has been read.
func (c *memConn) Read(p []byte) (int, error) {
	h := c.in
	for {
		if isClosedChan(c.closed) {
			return 0, c.opErr("read", net.ErrClosed)
		}
		dl := c.rdl.wait()
		if isClosedChan(dl) {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		h.mu.Lock()
		if h.reset {
			h.mu.Unlock()
			return 0, c.opErr("read", os.NewSyscallError("read", syscall.ECONNRESET))
		}
		if len(p) == 0 {
			h.mu.Unlock()
			return 0, nil
		}
		if h.n > 0 {
			k := h.readLocked(p)
			h.notifyLocked()
			h.mu.Unlock()
			return k, nil
		}
		if h.wclosed {
			h.mu.Unlock()
			return 0, io.EOF
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-dl:
		case <-c.closed:
		}
	}
}

// Write writes all of p, waiting for buffer room as needed. It fails with
// EPIPE once the peer has closed.
func (c *memConn) Write(p []byte) (int, error) {
	select {
	case c.wlock <- struct{}{}:
	case <-c.closed:
		return 0, c.opErr("write", net.ErrClosed)
	case <-c.wdl.wait():
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	defer func() { <-c.wlock }()
	h := c.out
	total := 0
	for {
		if isClosedChan(c.closed) {
			return total, c.opErr("write", net.ErrClosed)
		}
		dl := c.wdl.wait()
		if isClosedChan(dl) {
			return total, c.opErr("write", os.ErrDeadlineExceeded)
		}
		h.mu.Lock()
		if h.reset {
			h.mu.Unlock()
			return total, c.opErr("write", os.NewSyscallError("write", syscall.ECONNRESET))
		}
		if h.rclosed || h.wclosed {
			h.mu.Unlock()
			return total, c.opErr("write", os.NewSyscallError("write", syscall.EPIPE))
		}
		if len(p) == 0 {
			h.mu.Unlock()
			return total, nil
		}
		if h.n < h.size {
			k := h.writeLocked(p)
			p = p[k:]
			total += k
			h.notifyLocked()
			if len(p) == 0 {
				h.mu.Unlock()
				return total, nil
			}
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-dl:
		case <-c.closed:
		}
	}
}

// Close closes this end: its reads and writes fail with net.ErrClosed,
// the peer reads what was already written and then io.EOF, and the peer's
// writes fail. After SetLinger(0) it resets the connection instead, as TCP
// sends an RST: what either end had not read yet is lost and the peer's
// reads and writes fail with ECONNRESET at once.
func (c *memConn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		reset := c.linger0.Load()
		close(c.closed)
		c.in.mu.Lock()
		c.in.rclosed = true
		c.in.reset = c.in.reset || reset
		c.in.n, c.in.start = 0, 0
		c.in.notifyLocked()
		c.in.mu.Unlock()
		c.out.mu.Lock()
		c.out.wclosed = true
		if reset {
			c.out.reset = true
			c.out.n, c.out.start = 0, 0
		}
		c.out.notifyLocked()
		c.out.mu.Unlock()
		c.rdl.stop()
		c.wdl.stop()
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

// CloseWrite shuts down the writing side: the peer reads io.EOF after the
// data already written.
func (c *memConn) CloseWrite() error {
	if isClosedChan(c.closed) {
		return c.opErr("close", net.ErrClosed)
	}
	c.out.mu.Lock()
	c.out.wclosed = true
	c.out.notifyLocked()
	c.out.mu.Unlock()
	return nil
}

// SetLinger is TCP's SO_LINGER as far as tests need it: 0 makes Close
// reset the connection (see Close); any other value restores the ordinary
// close.
func (c *memConn) SetLinger(sec int) error {
	if isClosedChan(c.closed) {
		return c.opErr("set", net.ErrClosed)
	}
	c.linger0.Store(sec == 0)
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) SetDeadline(t time.Time) error {
	if isClosedChan(c.closed) {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	if isClosedChan(c.closed) {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

func (c *memConn) SetWriteDeadline(t time.Time) error {
	if isClosedChan(c.closed) {
		return c.opErr("set", net.ErrClosed)
	}
	c.wdl.set(t)
	return nil
}

func (c *memConn) String() string {
	return fmt.Sprintf("memconn %s->%s", c.local, c.remote)
}

// deadline is a channel closed when the deadline passes (as in net.Pipe).
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the callback is closing it
	}
	d.timer = nil
	closed := isClosedChan(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel
	}
	d.timer = nil
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

var _ net.Conn = (*memConn)(nil)
var _ net.Listener = (*memListener)(nil)
