package proxy

import (
	"io"
	"net"
	"sync"
)

// copyN copies n bytes from src to dst, as io.CopyN does, without
// allocating: between two TCP sockets through dst's ReadFrom (splice on
// Linux, never entering user space); otherwise (a TLS or PROXY-protocol
// listener's connection, a fault-injecting test dialer) through a pooled
// 32 KiB buffer, where io.CopyN would allocate one per call (and
// net.TCPConn's ReadFrom from a non-socket too). Like io.CopyN it returns
// io.EOF when src ends early.
func copyN(dst io.Writer, src io.Reader, n int64) (int64, error) {
	c := copiers.Get().(*copier)
	c.lr = io.LimitedReader{R: src, N: n}
	var written int64
	var err error
	_, srcTCP := src.(*net.TCPConn)
	_, dstTCP := dst.(*net.TCPConn)
	if srcTCP && dstTCP {
		written, err = io.Copy(dst, &c.lr)
	} else {
		c.w.Writer = dst
		written, err = io.CopyBuffer(&c.w, &c.lr, c.buf[:])
	}
	c.lr, c.w.Writer = io.LimitedReader{}, nil
	copiers.Put(c)
	if written == n {
		return n, nil
	}
	if err == nil {
		err = io.EOF // src stopped early
	}
	return written, err
}

// copier is copyN's reusable state: pointers to its fields pass as
// interfaces without an allocation.
type copier struct {
	lr  io.LimitedReader
	w   writerOnly
	buf [32 << 10]byte
}

// writerOnly hides a writer's ReadFrom, so that io.CopyBuffer uses the
// buffer it is given.
type writerOnly struct{ io.Writer }

var copiers = sync.Pool{New: func() any { return new(copier) }}
