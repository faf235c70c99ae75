//go:build !linux

package proxy

import (
	"errors"
	"net"
)

// rawListener exists on Linux only; elsewhere every listener runs the
// generic accept loop and every socket is a net.Conn.
type rawListener struct{ net.Listener }

func rawCapable(ln net.Listener) net.Listener { return ln }

func rawAccept(*listener, *rawListener, int32) {}

var errNoFD = errors.New("bare descriptors are used on Linux only")

func closeFD(int) error            { return errNoFD }
func fdConn(int) (net.Conn, error) { return nil, errNoFD }
