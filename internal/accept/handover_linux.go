package accept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Inherit returns what this process inherited if a handover started it
// (HandoverEnv is set), and nil otherwise. It unsets HandoverEnv, so that
// the processes this one starts (its acceptor helper, its own successor)
// do not see it, and checks every descriptor it names: the control socket
// must be a unix SOCK_SEQPACKET socket and every other one a listening TCP
// socket. A malformed value is an error; the caller exits (its predecessor
// then carries on).
func Inherit() (*Inherited, error) {
	v, ok := os.LookupEnv(HandoverEnv)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(HandoverEnv)
	h, err := parseInherited(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", HandoverEnv, err)
	}
	return h, nil
}

// parseInherited checks a HandoverEnv value and the descriptors it names.
// On error it closes nothing: the descriptors may be anything.
func parseInherited(v string) (*Inherited, error) {
	if len(v) > maxHandoverEnv {
		return nil, fmt.Errorf("%d bytes, more than %d", len(v), maxHandoverEnv)
	}
	var e handoverEnv
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("not the JSON a tollgate handover sets: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	if len(e.Sockets) > maxInheritedSocket {
		return nil, fmt.Errorf("%d sockets, more than %d", len(e.Sockets), maxInheritedSocket)
	}
	if e.Control < 3 {
		return nil, fmt.Errorf("control descriptor %d: must be 3 or more", e.Control)
	}
	if err := checkSocket(e.Control, unix.AF_UNIX, unix.SOCK_SEQPACKET, false); err != nil {
		return nil, fmt.Errorf("control descriptor %d: %w", e.Control, err)
	}
	fds := map[int]bool{e.Control: true}
	socks := make(map[string]inheritedSocket, len(e.Sockets))
	for _, s := range e.Sockets {
		if err := validSocketKey(s.Key); err != nil {
			return nil, err
		}
		if _, dup := socks[s.Key]; dup {
			return nil, fmt.Errorf("socket %q named twice", s.Key)
		}
		if s.FD < 3 || fds[s.FD] {
			return nil, fmt.Errorf("socket %q: descriptor %d must be 3 or more and not named twice", s.Key, s.FD)
		}
		fds[s.FD] = true
		if err := checkSocket(s.FD, -1, unix.SOCK_STREAM, true); err != nil {
			return nil, fmt.Errorf("socket %q (descriptor %d): %w", s.Key, s.FD, err)
		}
		sa, err := unix.Getsockname(s.FD)
		if err != nil {
			return nil, fmt.Errorf("socket %q (descriptor %d): %w", s.Key, s.FD, err)
		}
		var addr *net.TCPAddr
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
		case *unix.SockaddrInet6:
			addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
		default:
			return nil, fmt.Errorf("socket %q (descriptor %d) is not a TCP socket", s.Key, s.FD)
		}
		socks[s.Key] = inheritedSocket{fd: s.FD, addr: addr}
	}
	for fd := range fds {
		syscall.CloseOnExec(fd)
	}
	if err := syscall.SetNonblock(e.Control, true); err != nil {
		return nil, fmt.Errorf("control descriptor %d: %w", e.Control, err)
	}
	return &Inherited{ctl: newControl(os.NewFile(uintptr(e.Control), "handover-control")), socks: socks}, nil
}

// checkSocket checks that fd is a socket of the given type (and family,
// unless -1), listening if listening is set.
func checkSocket(fd, family, typ int, listening bool) error {
	t, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("not a socket: %w", err)
	}
	if t != typ {
		return fmt.Errorf("socket type %d, want %d", t, typ)
	}
	if family >= 0 {
		if f, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || f != family {
			return fmt.Errorf("socket family %d (%v), want %d", f, err, family)
		}
	}
	if listening {
		if l, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || l != 1 {
			return errors.New("not a listening socket")
		}
	}
	return nil
}

// fdListener makes an inherited listening descriptor a net.Listener (it
// takes a duplicate; the original is closed).
func fdListener(fd int, name string) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), name)
	ln, err := net.FileListener(f)
	f.Close()
	return ln, err
}

// dupListener duplicates the listening descriptor under ln, close-on-exec.
// The duplicate keeps the descriptor's non-blocking mode: os.NewFile
// leaves a non-blocking descriptor so even when exec reads it with Fd
// (net.TCPListener.File would not: its Fd makes the shared socket
// blocking, and the accept loops on it would then block in accept).
func dupListener(ln net.Listener, name string) (*os.File, error) {
	var sc syscall.RawConn
	switch t := ln.(type) {
	case *rawListener:
		fd, err := t.dup()
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), name), nil
	case *proxyListener:
		return dupListener(t.Listener, name)
	case syscall.Conn:
		var err error
		if sc, err = t.SyscallConn(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cannot hand over a %T", ln)
	}
	fd, derr := -1, error(nil)
	if err := sc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(fd), name), nil
}

// dup duplicates the listening descriptor, close-on-exec, unless closed.
func (l *rawListener) dup() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return -1, net.ErrClosed
	}
	return unix.FcntlInt(uintptr(l.fd), unix.F_DUPFD_CLOEXEC, 0)
}

// ListenerSocket is ln's listening socket as a Socket named key (the
// admin port's, say); the caller closes its File.
func ListenerSocket(key string, ln net.Listener) (Socket, error) {
	f, err := dupListener(ln, key)
	if err != nil {
		return Socket{}, fmt.Errorf("%s: %w", key, err)
	}
	return Socket{Key: key, File: f}, nil
}

// Sockets duplicates every open port's listening socket, named by
// listener and role, for a successor; the caller closes the Files.
func (s *Server) Sockets() ([]Socket, error) {
	s.mu.Lock()
	ls := slices.Clone(s.listeners)
	s.mu.Unlock()
	var out []Socket
	fail := func(err error) ([]Socket, error) {
		for _, so := range out {
			so.File.Close()
		}
		return nil, err
	}
	for _, l := range ls {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			continue
		}
		add := func(key string, ln net.Listener) error {
			f, err := dupListener(ln, key)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			out = append(out, Socket{Key: key, File: f})
			return nil
		}
		err := add(bootstrapKey(l.cfg.Name), l.boot)
		for id, bp := range l.ports {
			if err == nil {
				err = add(brokerKey(l.cfg.Name, id), bp.ln)
			}
		}
		l.mu.Unlock()
		if err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// Successor is the predecessor's side of a handover: the new process.
type Successor struct {
	cmd    *exec.Cmd
	ctl    *control
	exited chan struct{} // closed once the process has exited
	waited error         // its exit status, once exited is closed
}

// StartSuccessor starts exe with args as this process's successor: every
// socket in socks is inherited (descriptors 4 and up; 3 is the control
// socket) and named in HandoverEnv. The caller still owns socks' Files and
// may close them once this returns. stdout and stderr should be files
// (this process's own): a pipe copied by this process would break when it
// exits.
func StartSuccessor(exe string, args []string, socks []Socket, stdout, stderr io.Writer) (*Successor, error) {
	ctlFile, child, err := controlPair("handover-control")
	if err != nil {
		return nil, err
	}
	defer child.Close()
	env := handoverEnv{Control: 3}
	files := []*os.File{child}
	for i, so := range socks {
		if err := validSocketKey(so.Key); err != nil {
			ctlFile.Close()
			return nil, err
		}
		env.Sockets = append(env.Sockets, handoverSocket{FD: 4 + i, Key: so.Key})
		files = append(files, so.File)
	}
	val, err := json.Marshal(env)
	if err != nil {
		ctlFile.Close()
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != HandoverEnv && k != AcceptorHelperEnv {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, HandoverEnv+"="+string(val))
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		ctlFile.Close()
		return nil, err
	}
	s := &Successor{cmd: cmd, ctl: newControl(ctlFile), exited: make(chan struct{})}
	go func() {
		s.waited = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// Pid is the successor's process id.
func (s *Successor) Pid() int { return s.cmd.Process.Pid }

// AwaitPrepared waits until the successor asks for data_dir.
func (s *Successor) AwaitPrepared(ctx context.Context) error {
	return s.await(ctx, msgPrepared, "loaded its configuration")
}

// DataDirReleased tells the successor that data_dir is free.
func (s *Successor) DataDirReleased() error { return s.ctl.send(msgReleased) }

// AwaitServing waits until the successor serves.
func (s *Successor) AwaitServing(ctx context.Context) error {
	return s.await(ctx, msgServing, "served")
}

func (s *Successor) await(ctx context.Context, want byte, what string) error {
	err := s.ctl.await(ctx, want)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errGone):
		// Its exit status says more than the closed socket.
		select {
		case <-s.exited:
			return fmt.Errorf("the new process (pid %d) exited before it %s: %v", s.Pid(), what, s.waited)
		case <-time.After(5 * time.Second):
		}
		return fmt.Errorf("the new process (pid %d) closed its control socket before it %s", s.Pid(), what)
	case ctx.Err() != nil:
		return fmt.Errorf("the new process (pid %d) has not %s in time: %w", s.Pid(), what, err)
	}
	return fmt.Errorf("the new process (pid %d): %w", s.Pid(), err)
}

// Abort kills the successor and waits for it to exit (it then holds
// nothing: its sockets, data_dir, its acceptor helper by its parent-death
// signal).
func (s *Successor) Abort() {
	s.cmd.Process.Kill()
	<-s.exited
	s.ctl.close()
}

// Close lets a successor that serves go its own way: it outlives this
// process.
func (s *Successor) Close() { s.ctl.close() }
