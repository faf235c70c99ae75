package accept

// The acceptor process. Under a connection storm almost every socket is
// refused, and a refused socket still costs the kernel its accept and,
// above all, its teardown (~80 µs a socket on loopback), in whichever
// process does them, at that process's CPU priority. Done by the gateway,
// that work competes with the sessions it serves; a storm of a few
// thousand sockets a second then doubles an established producer's tail
// latency even though the gateway's own code is idle (bench/storm, its
// -control runs).
//
// So, on Linux, the gateway can hand that work to a helper process of its
// own binary running at the lowest CPU priority (nice 19): it accepts on
// every plain TCP listener and passes the sockets to the gateway (SCM_RIGHTS
// over a socketpair, one per listening port, in batches); the gateway
// decides as before (admission.Limiter, unchanged) and serves the admitted
// ones; those it refuses or parks go back to the helper with the moment to
// close them, and the helper closes them then. The gateway's cost per
// refused socket is a share of two batched messages.
//
// Kafka's blocking acceptor is kept: while admission tells a port to wait,
// the gateway stops reading that port's socketpair; the pair's small buffer
// fills, the helper stops accepting on that port, and connections wait in
// the kernel's backlog as they would. A helper that dies leaves the
// gateway accepting in-process, as without it.

import (
	"github.com/tollgate/tollgate/internal/admission"

	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// AcceptorHelperEnv marks a process started as the acceptor helper.
const AcceptorHelperEnv = "TOLLGATE_ACCEPTOR_HELPER"

const (
	acceptBatch = 64              // sockets per message
	closeBatch  = 250             // fds per close message (SCM_MAX_FD is 253)
	addrRecord  = 20              // one socket's peer address in a message
	closeRecord = 8               // one socket's close deadline, Unix ns
	pairSndBuf  = 4096            // a port's socketpair: a few messages in flight
	msgListen   = 'L'             // control: a listening socket and its pair
	msgClose    = 'C'             // control: sockets to close, with their deadlines
	msgStop     = 'S'             // control: stop accepting (a handover), keep closing
	msgReady    = 'R'             // helper -> gateway, once, when it runs
	helperReady = 5 * time.Second // how long the gateway waits for msgReady
	helperNice  = 19              // the helper's CPU priority
)

// acceptorProc is the gateway's side of the helper.
type acceptorProc struct {
	cmd *exec.Cmd
	ctl *os.File
	rc  syscall.RawConn
	log *slog.Logger

	mu     sync.Mutex // one control message at a time
	dead   bool
	exited chan struct{} // closed when the helper process has exited
}

func startAcceptor(exe string, log *slog.Logger) (*acceptorProc, error) {
	ctl, child, err := controlPair("acceptor-control")
	if err != nil {
		return nil, err
	}
	defer child.Close()
	cmd := exec.Command(exe, "acceptor-helper") // the argument only names it in ps; the environment marks it
	cmd.Env = append(os.Environ(), AcceptorHelperEnv+"=1")
	cmd.ExtraFiles = []*os.File{child} // fd 3 in the helper
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		ctl.Close()
		return nil, err
	}
	a := &acceptorProc{cmd: cmd, ctl: ctl, log: log, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		a.mu.Lock()
		a.dead = true
		a.mu.Unlock()
		close(a.exited)
	}()
	if a.rc, err = ctl.SyscallConn(); err != nil {
		a.stop()
		return nil, err
	}
	ctl.SetReadDeadline(time.Now().Add(helperReady))
	var b [1]byte
	if n, err := ctl.Read(b[:]); err != nil || n != 1 || b[0] != msgReady {
		a.stop()
		return nil, fmt.Errorf("acceptor helper did not start (read %d bytes: %v)", n, err)
	}
	ctl.SetReadDeadline(time.Time{})
	return a, nil
}

// kill ends a helper that stopped doing its work: every port's pair then
// reads EOF and its accept loop accepts in the gateway.
func (a *acceptorProc) kill() {
	a.mu.Lock()
	a.dead = true
	a.mu.Unlock()
	a.cmd.Process.Kill()
}

// stop ends the helper: on its control socket's end it closes every socket
// it still holds and exits (or is killed after 2 s).
func (a *acceptorProc) stop() {
	a.ctl.Close() // first: it also ends a send waiting for a helper that does not read
	a.mu.Lock()
	a.dead = true
	a.mu.Unlock()
	select {
	case <-a.exited:
	case <-time.After(2 * time.Second):
		a.cmd.Process.Kill()
		<-a.exited
	}
}

// running reports whether the helper is up (it has not exited, and no
// message to it has failed).
func (a *acceptorProc) running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.dead
}

// send writes one control message with fds attached; false once the
// helper is gone.
func (a *acceptorProc) send(p []byte, fds []int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead {
		return false
	}
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	var serr error
	err := a.rc.Write(func(fd uintptr) bool {
		serr = syscall.Sendmsg(int(fd), p, oob, nil, 0)
		return serr != syscall.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		a.dead = true
		a.log.Warn("acceptor helper gone; accepting and closing in the gateway", "err", err)
		return false
	}
	return true
}

// stopAccepting tells the helper to stop accepting on every port (a
// handover): it closes its copies of the listening sockets, passes on what
// it has accepted and then closes each port's pair. False if the helper is
// gone.
func (a *acceptorProc) stopAccepting() bool { return a.send([]byte{msgStop}, nil) }

// listen hands the helper a listening socket and returns the gateway's
// end of the port's socketpair, from which accepted sockets arrive.
func (a *acceptorProc) listen(rl *rawListener) (*os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	syscall.SetsockoptInt(fds[1], syscall.SOL_SOCKET, syscall.SO_SNDBUF, pairSndBuf)
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, err
	}
	ok := a.send([]byte{msgListen}, []int{rl.fd, fds[1]})
	syscall.Close(fds[1])
	if !ok {
		syscall.Close(fds[0])
		return nil, errors.New("acceptor helper gone")
	}
	return os.NewFile(uintptr(fds[0]), "acceptor-port"), nil
}

// helperAccept is rawAccept with the helper accepting: it admits the
// sockets that arrive on the port's socketpair. If the helper goes away it
// carries on as rawAccept.
func helperAccept(l *Listener, rl *rawListener, node int32) {
	pf, err := l.srv.acceptor.listen(rl)
	if err != nil {
		rawAccept(l, rl, node)
		return
	}
	if !rl.setPair(pf) { // the listener closed meanwhile
		pf.Close()
		return
	}
	rl.viaHelper.Store(true)
	defer rl.viaHelper.Store(false)
	rc, err := pf.SyscallConn()
	if err != nil {
		rawAccept(l, rl, node)
		return
	}
	var (
		buf   = make([]byte, acceptBatch*addrRecord)
		oob   = make([]byte, syscall.CmsgSpace(acceptBatch*4))
		fds   = make([]int, 0, acceptBatch)
		n     int
		oobn  int
		rerr  error
		spare *admission.Conn
	)
	recv := func(fd uintptr) bool {
		n, oobn, rerr = recvmsg(int(fd), buf, oob)
		return rerr != syscall.EAGAIN
	}
	l.srv.watch(rl)
	defer l.srv.unwatch(rl)
	for {
		rl.waitingHelper.Store(true)
		err := rc.Read(recv)
		rl.waitingHelper.Store(false)
		if err != nil { // the listener closed
			return
		}
		fds = parseRights(oob[:oobn], fds[:0])
		if rerr != nil || n == 0 {
			for _, fd := range fds {
				syscall.Close(fd)
			}
			if rl.isClosed() || l.srv.isStopping() {
				return // closed, or the helper stopped for a handover
			}
			l.srv.log.Warn("acceptor helper gone; accepting in the gateway", "listener", l.cfg.Name, "err", rerr)
			rawAccept(l, rl, node)
			return
		}
		for i, fd := range fds {
			if (i+1)*addrRecord > n {
				syscall.Close(fd) // a record short: cannot be
				continue
			}
			l.admitAndServe(socket{fd: fd, addr: decodeAddr(buf[i*addrRecord:])}, node, &spare)
		}
		l.srv.parked.flush()
	}
}

// recvmsg is syscall.Recvmsg without the source address (a socketpair has
// none), so that it allocates nothing.
func recvmsg(fd int, p, oob []byte) (n, oobn int, err error) {
	var msg syscall.Msghdr
	var iov syscall.Iovec
	iov.Base = &p[0]
	iov.SetLen(len(p))
	msg.Iov = &iov
	msg.Iovlen = 1
	msg.Control = &oob[0]
	msg.SetControllen(len(oob))
	r, _, e := syscall.Syscall(syscall.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), syscall.MSG_CMSG_CLOEXEC)
	if e != 0 {
		return 0, 0, e
	}
	return int(r), int(msg.Controllen), nil
}

// parseRights appends the descriptors of every SCM_RIGHTS message in oob.
func parseRights(oob []byte, fds []int) []int {
	for len(oob) >= syscall.SizeofCmsghdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < syscall.SizeofCmsghdr || l > len(oob) {
			break
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_RIGHTS {
			data := oob[syscall.CmsgLen(0):l]
			for len(data) >= 4 {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data))))
				data = data[4:]
			}
		}
		next := syscall.CmsgSpace(l - syscall.CmsgLen(0))
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return fds
}

func encodeAddr(b []byte, ap netip.AddrPort) {
	clear(b[:addrRecord])
	a := ap.Addr()
	if a.Is4() {
		b[0] = 4
		a4 := a.As4()
		copy(b[4:], a4[:])
	} else {
		b[0] = 6
		a16 := a.As16()
		copy(b[4:], a16[:])
	}
	binary.BigEndian.PutUint16(b[2:], ap.Port())
}

func decodeAddr(b []byte) netip.AddrPort {
	port := binary.BigEndian.Uint16(b[2:])
	if b[0] == 4 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[4:20])).Unmap(), port)
}

// RunAcceptorHelper runs the acceptor helper and exits the process, when
// this process was started as one (AcceptorHelperEnv); otherwise it returns
// at once. Call it first thing in main.
func RunAcceptorHelper() {
	if os.Getenv(AcceptorHelperEnv) == "" {
		return
	}
	os.Exit(runHelper())
}

func runHelper() int {
	lowerPriority()
	if err := syscall.SetNonblock(3, true); err != nil {
		fmt.Fprintln(os.Stderr, "tollgate acceptor helper:", err)
		return 1
	}
	ctl := os.NewFile(3, "acceptor-control")
	rc, err := ctl.SyscallConn()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tollgate acceptor helper:", err)
		return 1
	}
	closing := make(chan struct{})
	parked := newParkedConns()
	ports := &helperPorts{open: map[*os.File]bool{}}
	closerDone := make(chan struct{})
	go func() { parked.run(closing); close(closerDone) }()
	if _, err := ctl.Write([]byte{msgReady}); err != nil {
		return 1
	}
	buf := make([]byte, 1+closeBatch*closeRecord)
	oob := make([]byte, syscall.CmsgSpace(closeBatch*4))
	var fds []int
	for {
		var n, oobn int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, oobn, rerr = recvmsg(int(fd), buf, oob)
			return rerr != syscall.EAGAIN
		}); err != nil {
			break
		}
		fds = parseRights(oob[:oobn], fds[:0])
		if rerr != nil || n == 0 { // the gateway is gone or stopping
			for _, fd := range fds {
				syscall.Close(fd)
			}
			break
		}
		switch buf[0] {
		case msgListen:
			if len(fds) == 2 {
				go helperListen(fds[0], fds[1], ports)
				continue
			}
		case msgStop:
			ports.stop()
		case msgClose:
			for i, fd := range fds {
				at := time.Now()
				if off := 1 + i*closeRecord; off+closeRecord <= n {
					at = time.Unix(0, int64(binary.LittleEndian.Uint64(buf[off:])))
				}
				parked.park(socket{fd: fd}, at)
			}
			continue
		}
		for _, fd := range fds { // a message it does not know
			syscall.Close(fd)
		}
	}
	close(closing) // closes every socket still parked
	<-closerDone
	return 0
}

// helperPorts are the listening sockets the helper accepts on, for
// msgStop.
type helperPorts struct {
	mu      sync.Mutex
	open    map[*os.File]bool
	stopped bool
}

// add records a port's listening socket; false once stopped.
func (p *helperPorts) add(lf *os.File) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.open[lf] = true
	return true
}

func (p *helperPorts) remove(lf *os.File) {
	p.mu.Lock()
	delete(p.open, lf)
	p.mu.Unlock()
}

// stop closes every listening socket: each port's loop then passes on the
// sockets it has accepted and closes its pair, which the gateway reads to
// its end.
func (p *helperPorts) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for lf := range p.open {
		lf.Close()
	}
}

// helperListen accepts on one port and passes the sockets to the gateway
// until the gateway closes its end of the port's pair, or msgStop closes
// the listening socket.
func helperListen(lfd, pfd int, ports *helperPorts) {
	syscall.SetNonblock(lfd, true)
	lf := os.NewFile(uintptr(lfd), "listener")
	syscall.SetNonblock(pfd, true)
	pf := os.NewFile(uintptr(pfd), "acceptor-port")
	defer pf.Close()
	if !ports.add(lf) {
		lf.Close()
		return
	}
	defer ports.remove(lf)
	lrc, err1 := lf.SyscallConn()
	prc, err2 := pf.SyscallConn()
	if err1 != nil || err2 != nil {
		lf.Close()
		return
	}
	// The gateway never writes on the pair: a read returns when it closes
	// its end (the port closed), and then this copy of the listening
	// socket must go too, or the port would stay open.
	go func() {
		var b [1]byte
		pf.Read(b[:])
		lf.Close()
	}()
	buf := make([]byte, acceptBatch*addrRecord)
	fds := make([]int, 0, acceptBatch)
	var rsa syscall.RawSockaddrAny
	var lastErr syscall.Errno
	accept := func(fd uintptr) bool {
		for len(fds) < acceptBatch {
			nfd, e := accept4(int(fd), &rsa)
			if e != 0 {
				lastErr = e
				break
			}
			encodeAddr(buf[len(fds)*addrRecord:], rawAddrPort(&rsa))
			fds = append(fds, nfd)
		}
		return len(fds) > 0 || (lastErr != syscall.EAGAIN && lastErr != syscall.ECONNABORTED && lastErr != syscall.EINTR)
	}
	for {
		fds, lastErr = fds[:0], 0
		if err := lrc.Read(accept); err != nil {
			return
		}
		if len(fds) == 0 { // accept failed (out of descriptors...)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		oob := syscall.UnixRights(fds...)
		var serr error
		err := prc.Write(func(fd uintptr) bool {
			serr = syscall.Sendmsg(int(fd), buf[:len(fds)*addrRecord], oob, nil, 0)
			return serr != syscall.EAGAIN
		})
		for _, fd := range fds {
			syscall.Close(fd) // the gateway holds them now (or they were not sent)
		}
		if err != nil || serr != nil {
			lf.Close()
			return
		}
	}
}

// lowerPriority sets every thread of this process to helperNice; threads
// started later inherit it from the thread that starts them.
func lowerPriority() {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		syscall.Setpriority(syscall.PRIO_PROCESS, 0, helperNice)
		return
	}
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			syscall.Setpriority(syscall.PRIO_PROCESS, tid, helperNice)
		}
	}
}

// controlPair makes the control socket pair between this process and a
// child it starts: ctl, non-blocking, stays here; child is handed to the
// child process (and closed here once it has started).
func controlPair(name string) (ctl, child *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), name), os.NewFile(uintptr(fds[1]), name+"-child"), nil
}
