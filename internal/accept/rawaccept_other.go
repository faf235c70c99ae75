//go:build !linux

package accept

import (
	"errors"
	"log/slog"
	"net"
)

// rawListener exists on Linux only; elsewhere every listener runs the
// generic accept loop and every socket is a net.Conn.
type rawListener struct{ net.Listener }

func rawCapable(ln net.Listener) net.Listener { return ln }

func (*rawListener) helperAccepts() bool { return false }

func rawAccept(*Listener, *rawListener, int32) {}

var errNoFD = errors.New("bare descriptors are used on Linux only")

func closeFD(int) error            { return errNoFD }
func fdConn(int) (net.Conn, error) { return nil, errNoFD }

// RunAcceptorHelper does nothing outside Linux.
func RunAcceptorHelper() {}

type acceptorProc struct{}

func (*acceptorProc) running() bool { return false }

func (*acceptorProc) stop()                   {}
func (*acceptorProc) stopAccepting() bool     { return false }
func (*acceptorProc) send([]byte, []int) bool { return false }

func helperAccept(*Listener, *rawListener, int32) {}

func startAcceptor(string, *slog.Logger) (*acceptorProc, error) { return nil, errNoFD }

const (
	msgClose    = 'C'
	closeBatch  = 250
	closeRecord = 8
)

type stallWatch struct{}
