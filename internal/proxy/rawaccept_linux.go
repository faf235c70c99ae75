package proxy

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"
)

// rawListener is a plain TCP listener whose accept loop takes sockets with
// accept4 on a duplicate of its descriptor (rawAccept). Closing it closes
// both descriptors.
type rawListener struct {
	*net.TCPListener
	f  *os.File // the duplicate, non-blocking and registered with the poller
	rc syscall.RawConn
}

func (l *rawListener) Close() error {
	err := l.TCPListener.Close()
	l.f.Close()
	return err
}

// rawCapable wraps a *net.TCPListener for rawAccept; anything else (a
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
	f := os.NewFile(uintptr(dup), "listener")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return ln
	}
	return &rawListener{TCPListener: tl, f: f, rc: rc}
}

// rawAccept is the accept loop of a plain TCP listener on Linux: sockets
// are accepted with accept4 and stay bare descriptors until admitted. A
// refused or parked socket — most of a connection storm — is never
// registered with Go's network poller and costs two system calls, accept4
// and close, instead of five, and none of its FIN or data events reach the
// poller that the served connections share. An admitted one becomes a
// net.Conn (net.FileConn).
func rawAccept(l *listener, rl *rawListener, node int32) {
	var backoff time.Duration
	for {
		var nfd int
		var sa syscall.Sockaddr
		var aerr error
		err := rl.rc.Read(func(fd uintptr) bool {
			nfd, sa, aerr = syscall.Accept4(int(fd), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
			return !errors.Is(aerr, syscall.EAGAIN) // else wait for the next connection
		})
		if err != nil { // the listener is closed
			return
		}
		if aerr != nil {
			if errors.Is(aerr, syscall.ECONNABORTED) || errors.Is(aerr, syscall.EINTR) {
				continue
			}
			if !l.acceptBackoff(&backoff, aerr) {
				return
			}
			continue
		}
		backoff = 0
		l.admitAndServe(rawSocket{fd: nfd, addr: sockaddrAddrPort(sa)}, node)
	}
}

// rawSocket is an accepted descriptor not yet handed to the runtime.
type rawSocket struct {
	fd   int
	addr netip.AddrPort
}

func (s rawSocket) remoteIP() netip.Addr { return s.addr.Addr() }
func (s rawSocket) String() string       { return s.addr.String() }
func (s rawSocket) Close() error         { return syscall.Close(s.fd) }

// conn hands the descriptor to the runtime as a net.Conn (FileConn
// duplicates it; the original is closed).
func (s rawSocket) conn() (net.Conn, error) {
	f := os.NewFile(uintptr(s.fd), "tcp:"+strconv.Itoa(s.fd))
	c, err := net.FileConn(f)
	f.Close()
	return c, err
}

func sockaddrAddrPort(sa syscall.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *syscall.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}
