//go:build !linux

package accept

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
)

var errNoHandover = errors.New("socket handover is supported on Linux only")

// Inherit fails outside Linux if a handover started this process.
func Inherit() (*Inherited, error) {
	if _, ok := os.LookupEnv(HandoverEnv); ok {
		return nil, errNoHandover
	}
	return nil, nil
}

func fdListener(int, string) (net.Listener, error) { return nil, errNoHandover }

// ListenerSocket: Linux only.
func ListenerSocket(string, net.Listener) (Socket, error) { return Socket{}, errNoHandover }

// Sockets: Linux only.
func (s *Server) Sockets() ([]Socket, error) { return nil, errNoHandover }

// Successor: Linux only.
type Successor struct{}

// StartSuccessor: Linux only.
func StartSuccessor(string, []string, []Socket, io.Writer, io.Writer) (*Successor, error) {
	return nil, errNoHandover
}

func (*Successor) Pid() int                            { return 0 }
func (*Successor) AwaitPrepared(context.Context) error { return errNoHandover }
func (*Successor) DataDirReleased() error              { return errNoHandover }
func (*Successor) AwaitServing(context.Context) error  { return errNoHandover }
func (*Successor) Abort()                              {}
func (*Successor) Close()                              {}
