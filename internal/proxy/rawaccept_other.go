//go:build !linux

package proxy

import (
	"errors"
	"log/slog"
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

// WithAcceptorProcess is Linux-only; elsewhere the gateway always accepts
// in-process.
func WithAcceptorProcess(string) Option { return func(*Gateway) {} }

// RunAcceptorHelper does nothing outside Linux.
func RunAcceptorHelper() {}

type acceptorProc struct{}

func (*acceptorProc) running() bool { return false }

// AcceptorProcessRunning is always false outside Linux.
func (g *Gateway) AcceptorProcessRunning() bool { return false }

func (*acceptorProc) stop()                   {}
func (*acceptorProc) send([]byte, []int) bool { return false }

func helperAccept(*listener, *rawListener, int32) {}

func startAcceptor(string, *slog.Logger) (*acceptorProc, error) { return nil, errNoFD }

const (
	msgClose    = 'C'
	closeBatch  = 250
	closeRecord = 8
)
