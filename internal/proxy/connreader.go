package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// connReader is a buffered reader of one connection that holds its buffer
// only while bytes are buffered. An idle connection — most of a gateway's,
// most of the time — then holds no read buffer at all: a session costs its
// goroutine and a few hundred bytes, not 16 KiB per direction (issue "Hold
// up at scale": at most 8 KiB of RSS per idle client connection).
//
// On a plain TCP connection the wait for data is the runtime poller's,
// without a buffer (syscall.RawConn.Read): the buffer is borrowed from a
// pool when the socket is readable, and read into at once, so this costs
// no system call more than bufio. On any other connection (TLS, PROXY
// protocol, in-memory test networks) the buffer is borrowed before the
// blocking Read; it is still given back whenever it empties.
//
// The interface is bufio.Reader's subset the session uses: Read (as an
// io.Reader), Peek, Discard, Buffered. Not safe for concurrent use.
type connReader struct {
	c    net.Conn
	rc   syscall.RawConn // non-nil for a plain TCP connection
	buf  *[]byte         // borrowed from readBufs while r < w
	r, w int

	// The poller's callback and its state: bound once, so that a read
	// allocates nothing.
	onReadable func(fd uintptr) bool
	onPeek     func(fd uintptr) bool
	direct     []byte // read straight into this instead of the buffer
	n          int
	rerr       error
	peekByte   [1]byte
}

// readBufs are the read buffers of every connection, readBufSize each.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

func newConnReader(c net.Conn) *connReader {
	cr := &connReader{c: c}
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			cr.rc = rc
			cr.onReadable = cr.readable
			cr.onPeek = cr.peek
		}
	}
	return cr
}

// Buffered is how many bytes can be read without waiting.
func (cr *connReader) Buffered() int { return cr.w - cr.r }

// release gives the buffer back once it is empty.
func (cr *connReader) release() {
	if cr.r == cr.w && cr.buf != nil {
		readBufs.Put(cr.buf)
		cr.buf, cr.r, cr.w = nil, 0, 0
	}
}

// fill reads at least one byte more into the buffer, waiting for it.
func (cr *connReader) fill() error {
	if cr.buf != nil && cr.r > 0 {
		// Slide what is left to the front (only Peek gets here with
		// bytes left; a frame head is small).
		n := copy(*cr.buf, (*cr.buf)[cr.r:cr.w])
		cr.r, cr.w = 0, n
	}
	if cr.rc == nil {
		if cr.buf == nil {
			cr.buf = readBufs.Get().(*[]byte)
		}
		n, err := cr.c.Read((*cr.buf)[cr.w:])
		cr.w += n
		if n > 0 {
			return nil
		}
		cr.release()
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	n, err := cr.readRaw(nil)
	cr.w += n
	if n == 0 {
		cr.release()
	}
	return err
}

// readRaw reads once from the socket — into direct, or into the buffer
// when direct is nil — waiting for readability in the poller first: the
// buffer is borrowed only when there is something to read, so nothing is
// held while the socket is idle.
func (cr *connReader) readRaw(direct []byte) (int, error) {
	cr.direct, cr.n, cr.rerr = direct, 0, nil
	err := cr.rc.Read(cr.onReadable)
	cr.direct = nil
	if err != nil {
		return 0, err // deadline, closed: the net package's errors
	}
	if cr.rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: cr.c.LocalAddr(), Addr: cr.c.RemoteAddr(), Err: cr.rerr}
	}
	if cr.n <= 0 {
		return 0, io.EOF
	}
	return cr.n, nil
}

// readable is the poller's callback: read what there is, or report that
// it must wait (giving the empty buffer back first).
func (cr *connReader) readable(fd uintptr) bool {
	for {
		p := cr.direct
		if p == nil {
			if cr.buf == nil {
				cr.buf = readBufs.Get().(*[]byte)
			}
			p = (*cr.buf)[cr.w:]
		}
		cr.n, cr.rerr = syscall.Read(int(fd), p)
		switch cr.rerr {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			cr.n, cr.rerr = 0, nil
			cr.release() // wait with nothing borrowed
			return false
		}
		return true
	}
}

// Read implements io.Reader: buffered bytes first; a read at least as
// large as the buffer when none are buffered goes straight to p.
func (cr *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if cr.r == cr.w {
		if len(p) >= readBufSize {
			if cr.rc == nil {
				return cr.c.Read(p)
			}
			return cr.readRaw(p)
		}
		if err := cr.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*cr.buf)[cr.r:cr.w])
	cr.r += n
	cr.release()
	return n, nil
}

// Peek returns the next n bytes without consuming them (n ≤ readBufSize),
// waiting for them.
func (cr *connReader) Peek(n int) ([]byte, error) {
	if n > readBufSize {
		return nil, errPeekTooLarge
	}
	for cr.w-cr.r < n {
		if err := cr.fill(); err != nil {
			if cr.buf == nil {
				return nil, err
			}
			return (*cr.buf)[cr.r:cr.w], err
		}
	}
	return (*cr.buf)[cr.r : cr.r+n], nil
}

// Discard skips n bytes, buffered or not.
func (cr *connReader) Discard(n int) (int, error) {
	done := 0
	for done < n {
		if cr.r == cr.w {
			if err := cr.fill(); err != nil {
				return done, err
			}
		}
		k := min(n-done, cr.w-cr.r)
		cr.r += k
		done += k
		cr.release()
	}
	return done, nil
}

var errPeekTooLarge = errors.New("peek larger than the read buffer")

// waitReadable waits in the poller, holding no buffer, until the socket
// has something to read (or is at EOF, or fails) — or its read deadline
// passes. Plain TCP only; it reads nothing.
func (cr *connReader) waitReadable() error {
	return cr.rc.Read(cr.onPeek)
}

// peek is waitReadable's poller callback: one byte peeked (MSG_PEEK), not
// consumed.
func (cr *connReader) peek(fd uintptr) bool {
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&cr.peekByte[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno != syscall.EAGAIN
	}
}
