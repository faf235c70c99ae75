package accept

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/tollgate/tollgate/internal/admission"
)

// rawListener is a plain TCP listener taken over from its net.TCPListener:
// the gateway keeps only a duplicate of the listening descriptor
// (non-blocking) and closes the original, so that exactly one registration
// with the runtime's poller (made when rawAccept first needs it) — or none,
// while the acceptor helper accepts — wakes for each new connection.
type rawListener struct {
	addr net.Addr
	fd   int

	// waitingHelper is set while the gateway waits on this port's pair for
	// sockets from the acceptor helper (and not, say, in an admission
	// wait): a backlog that fills then is the helper's doing.
	waitingHelper atomic.Bool
	// viaHelper is set while the acceptor helper accepts on this port
	// (helperAccept reads its pair).
	viaHelper atomic.Bool

	mu     sync.Mutex
	f      *os.File // fd registered with the poller, once rawAccept runs
	rc     syscall.RawConn
	pair   *os.File // the acceptor helper's socketpair for this port, if any
	closed bool
}

var errRawListener = errors.New("a raw listener is accepted from with rawAccept")

func (l *rawListener) Accept() (net.Conn, error) { return nil, errRawListener }
func (l *rawListener) Addr() net.Addr            { return l.addr }

func (l *rawListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	l.closed = true
	if l.pair != nil {
		l.pair.Close() // the helper closes its copy of the port
	}
	if l.f != nil {
		return l.f.Close() // wakes rawAccept
	}
	return syscall.Close(l.fd)
}

// pollable registers the descriptor with the poller (once) for rawAccept.
func (l *rawListener) pollable() (syscall.RawConn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, net.ErrClosed
	}
	if l.f == nil {
		f := os.NewFile(uintptr(l.fd), "listener")
		rc, err := f.SyscallConn()
		if err != nil {
			return nil, err
		}
		l.f, l.rc = f, rc
	}
	return l.rc, nil
}

// setPair records the port's socketpair; false if the listener is closed.
func (l *rawListener) setPair(f *os.File) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.pair = f
	return true
}

func (l *rawListener) helperAccepts() bool { return l.viaHelper.Load() }

func (l *rawListener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// rawCapable takes over a *net.TCPListener for rawAccept; anything else (a
// PROXY-protocol listener, an in-memory test network) is returned as is.
func rawCapable(ln net.Listener) net.Listener {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln
	}
	sc, err := tl.SyscallConn()
	if err != nil {
		return ln
	}
	dup, derr := -1, error(nil)
	if err := sc.Control(func(fd uintptr) { dup, derr = syscall.Dup(int(fd)) }); err != nil || derr != nil {
		return ln
	}
	syscall.CloseOnExec(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return ln
	}
	addr := tl.Addr()
	tl.Close() // the socket stays open through dup
	return &rawListener{addr: addr, fd: dup}
}

// rawAccept is the accept loop of a plain TCP listener on Linux: sockets
// are accepted with accept4 and stay bare descriptors until admitted. A
// refused or parked socket — most of a connection storm — is never
// registered with Go's network poller and costs two system calls, accept4
// and close, instead of five, and none of its FIN or data events reach the
// poller that the served connections share. It allocates nothing per
// socket until one is admitted (then it becomes a net.Conn, net.FileConn):
// a storm's garbage would otherwise start a collection every fraction of a
// second, each pausing the sessions being served.
func rawAccept(l *Listener, rl *rawListener, node int32) {
	var (
		backoff time.Duration
		nfd     int
		rsa     syscall.RawSockaddrAny
		aerr    syscall.Errno
		spare   *admission.Conn
	)
	accept := func(fd uintptr) bool {
		nfd, aerr = accept4(int(fd), &rsa)
		return aerr != syscall.EAGAIN // else wait for the next connection
	}
	rc, err := rl.pollable()
	if err != nil { // the listener is closed
		return
	}
	for {
		if err := rc.Read(accept); err != nil { // the listener is closed
			return
		}
		if aerr != 0 {
			if aerr == syscall.ECONNABORTED || aerr == syscall.EINTR {
				continue
			}
			if !l.acceptBackoff(&backoff, aerr) {
				return
			}
			continue
		}
		backoff = 0
		l.admitAndServe(socket{fd: nfd, addr: rawAddrPort(&rsa)}, node, &spare)
		l.srv.parked.flush() // when an acceptor helper died, sockets parked meanwhile
	}
}

// accept4 is syscall.Accept4 without its allocation of a Sockaddr.
func accept4(fd int, rsa *syscall.RawSockaddrAny) (int, syscall.Errno) {
	n := uint32(syscall.SizeofSockaddrAny)
	r, _, e := syscall.Syscall6(syscall.SYS_ACCEPT4, uintptr(fd), uintptr(unsafe.Pointer(rsa)),
		uintptr(unsafe.Pointer(&n)), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), 0
}

// rawAddrPort reads the address accept4 wrote.
func rawAddrPort(rsa *syscall.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case syscall.AF_INET:
		a := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&a.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(p[0])<<8|uint16(p[1]))
	case syscall.AF_INET6:
		a := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&a.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(p[0])<<8|uint16(p[1]))
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

func closeFD(fd int) error { return syscall.Close(fd) }

// fdConn hands a bare descriptor to the runtime as a net.Conn (FileConn
// duplicates it; the original is closed).
func fdConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "tcp:"+strconv.Itoa(fd))
	c, err := net.FileConn(f)
	f.Close()
	return c, err
}
