//go:build !linux

package proxy

import "net"

// rawListener exists on Linux only; elsewhere every listener runs the
// generic accept loop.
type rawListener struct{ net.Listener }

func rawCapable(ln net.Listener) net.Listener { return ln }

func rawAccept(*listener, *rawListener, int32) {}
