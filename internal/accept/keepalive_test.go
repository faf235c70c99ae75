package accept

import (
	"net"
	"syscall"
	"testing"
)

// Listeners accept without TCP keep-alive (a storm's refused sockets do
// not pay for it); served connections get it back.
func TestServedConnectionsKeepAlive(t *testing.T) {
	ln, err := listenNoKeepAlive("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keepAliveOn := func() int {
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var serr error
		rc.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE) })
		if serr != nil {
			t.Fatal(serr)
		}
		return v
	}
	if keepAliveOn() != 0 {
		t.Fatal("accepted socket has keep-alive before it is served")
	}
	setKeepAlive(c)
	if keepAliveOn() != 1 {
		t.Fatal("served socket has no keep-alive")
	}
}
