package testkit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func listen(t *testing.T, n *Network, addr string) net.Listener {
	t.Helper()
	ln, err := n.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pair dials ln and returns the client end and the accepted end.
func pair(t *testing.T, n *Network, ln net.Listener) (cli, srv net.Conn) {
	t.Helper()
	cli, err := n.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	srv, err = ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	t.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv
}

func TestNetworkDialAccept(t *testing.T) {
	var n Network
	ln := listen(t, &n, "127.0.0.1:0")
	la, ok := ln.Addr().(*net.TCPAddr)
	if !ok || la.Port == 0 || !la.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("listener addr %#v", ln.Addr())
	}
	cli, srv := pair(t, &n, ln)
	for _, a := range []net.Addr{cli.LocalAddr(), cli.RemoteAddr(), srv.LocalAddr(), srv.RemoteAddr()} {
		if _, ok := a.(*net.TCPAddr); !ok {
			t.Fatalf("addr %#v is not a *net.TCPAddr", a)
		}
		if _, err := netip.ParseAddrPort(a.String()); err != nil {
			t.Fatalf("addr %q does not parse: %v", a, err)
		}
	}
	if cli.RemoteAddr().String() != ln.Addr().String() || srv.LocalAddr().String() != ln.Addr().String() {
		t.Errorf("client remote %s, server local %s, listener %s", cli.RemoteAddr(), srv.LocalAddr(), ln.Addr())
	}
	if cli.LocalAddr().String() != srv.RemoteAddr().String() {
		t.Errorf("client local %s != server remote %s", cli.LocalAddr(), srv.RemoteAddr())
	}
	if cli.LocalAddr().String() == ln.Addr().String() {
		t.Errorf("client got the listener's port")
	}

	if _, err := cli.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	if _, err := srv.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cli, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	if k, err := cli.Read(nil); k != 0 || err != nil {
		t.Errorf("zero-length read = %d, %v", k, err)
	}
}

func TestNetworkHosts(t *testing.T) {
	var n Network
	ln := listen(t, &n, "localhost:0")
	port := ln.Addr().(*net.TCPAddr).Port
	if got := ln.Addr().String(); got != net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) {
		t.Errorf("localhost listener addr %s", got)
	}
	for _, a := range []string{"localhost:" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(port), ":" + strconv.Itoa(port)} {
		c, err := n.Dial("tcp", a)
		if err != nil {
			t.Errorf("dial %s: %v", a, err)
			continue
		}
		c.Close()
	}
	if _, err := n.Dial("tcp", "10.1.2.3:"+strconv.Itoa(port)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial another IP on the port: %v, want ECONNREFUSED", err)
	}
	wild := listen(t, &n, ":0")
	if !wild.Addr().(*net.TCPAddr).IP.IsUnspecified() {
		t.Errorf("\":0\" listener addr %s", wild.Addr())
	}
	c, err := n.Dial("tcp", "10.1.2.3:"+strconv.Itoa(wild.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Errorf("dial an unspecified-address listener: %v", err)
	} else {
		c.Close()
	}
	if _, err := n.Listen("udp", "127.0.0.1:0"); err == nil {
		t.Error("udp listen succeeded")
	}
	if _, err := n.Dial("tcp", "kafka.example:9092"); err == nil {
		t.Error("dial of a host name succeeded")
	}
}

func TestNetworkFreshPorts(t *testing.T) {
	var n Network
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		ln, err := n.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		if seen[a] {
			t.Fatalf("port %s handed out twice", a)
		}
		seen[a] = true
		if i%2 == 0 {
			ln.Close() // a closed listener's port is not reused by :0 either
		} else {
			t.Cleanup(func() { ln.Close() })
		}
	}
}

func TestNetworkAddressInUse(t *testing.T) {
	var n Network
	ln := listen(t, &n, "127.0.0.1:9092")
	if got := ln.Addr().String(); got != "127.0.0.1:9092" {
		t.Fatalf("addr %s, want the explicit port", got)
	}
	_, err := n.Listen("tcp", "127.0.0.1:9092")
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listen: %v, want EADDRINUSE", err)
	}
	ln.Close()
	ln2 := listen(t, &n, "127.0.0.1:9092") // free again after Close
	c, err := n.Dial("tcp", "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln2.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestNetworkRefused(t *testing.T) {
	var n Network
	_, err := n.DialContext(context.Background(), "tcp", "127.0.0.1:4242")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial with no listener: %v, want ECONNREFUSED", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("error %#v is not a dial *net.OpError", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ln := listen(t, &n, "127.0.0.1:0")
	if _, err := n.DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.Canceled) {
		t.Errorf("dial with a canceled context: %v", err)
	}
}

// Close unblocks Accept with net.ErrClosed, refuses later dials and resets
// connections dialed but never accepted.
func TestNetworkListenerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		ln, err := n.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()

		// Accept waits for a dial.
		type res struct {
			c   net.Conn
			err error
		}
		rc := make(chan res, 1)
		accept := func() {
			go func() {
				c, err := ln.Accept()
				rc <- res{c, err}
			}()
			synctest.Wait()
		}
		accept()
		select {
		case r := <-rc:
			t.Fatalf("Accept returned with nothing dialed: %v", r.err)
		default:
		}
		c1, err := n.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c1.Close()
		r := <-rc
		if r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		r.c.Close()

		// Close releases a parked Accept.
		accept()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if r := <-rc; !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("Accept parked at Close: %v, want net.ErrClosed", r.err)
		}
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("later Accept: %v, want net.ErrClosed", err)
		}
		if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v", err)
		}
		if _, err := n.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial after Close: %v, want ECONNREFUSED", err)
		}
		if n.Listening(addr) {
			t.Error("Listening after Close")
		}

		// A connection left in the backlog at Close is reset.
		ln2, _ := n.Listen("tcp", "127.0.0.1:0")
		orphan, err := n.Dial("tcp", ln2.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ln2.Close()
		if _, err := orphan.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read on a connection its listener dropped: %v, want EOF", err)
		}
		if _, err := orphan.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("write on a connection its listener dropped: %v, want EPIPE", err)
		}
		orphan.Close()
	})
}

func TestNetworkConnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		ln := listen(t, &n, "127.0.0.1:0")
		cli, srv := pair(t, &n, ln)

		// A reader blocked on the peer is released by the peer's Close
		// with EOF, after the data written before it.
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(srv)
			got <- b
		}()
		cli.Write([]byte("last words"))
		cli.Close()
		if b := <-got; string(b) != "last words" {
			t.Errorf("peer read %q before EOF", b)
		}
		if _, err := srv.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("write to a closed peer: %v, want EPIPE", err)
		}
		if _, err := cli.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("read after own Close: %v, want net.ErrClosed", err)
		}
		if _, err := cli.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("write after own Close: %v, want net.ErrClosed", err)
		}
		if err := cli.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v", err)
		}

		// Own Close releases a blocked Read and Write.
		cli2, srv2 := pair(t, &n, ln)
		errc := make(chan error, 2)
		go func() { _, err := cli2.Read(make([]byte, 1)); errc <- err }()
		go func() { _, err := cli2.Write(make([]byte, 1<<20)); errc <- err }()
		synctest.Wait()
		cli2.Close()
		for range 2 {
			if err := <-errc; !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked op after Close: %v, want net.ErrClosed", err)
			}
		}
		// The peer sees the buffered 64 KiB written before Close, then EOF.
		b, err := io.ReadAll(srv2)
		if err != nil || len(b) != defaultBufferSize {
			t.Errorf("peer read %d bytes, %v; want the %d buffered", len(b), err, defaultBufferSize)
		}

		// CloseWrite: the peer reads EOF, the other direction still works.
		cli3, srv3 := pair(t, &n, ln)
		cli3.Write([]byte("req"))
		if err := cli3.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(srv3); err != nil || string(b) != "req" {
			t.Errorf("after CloseWrite peer read %q, %v", b, err)
		}
		srv3.Write([]byte("resp"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(cli3, buf); err != nil || string(buf) != "resp" {
			t.Errorf("half-closed end read %q, %v", buf, err)
		}
	})
}

// SetLinger(0) makes Close a reset, as on TCP: the peer's reads (a
// blocked one too) and writes fail with ECONNRESET, and what was buffered
// is lost.
func TestNetworkConnReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		ln := listen(t, &n, "127.0.0.1:0")
		reset := func(c net.Conn) {
			t.Helper()
			if err := c.(interface{ SetLinger(int) error }).SetLinger(0); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		cli, srv := pair(t, &n, ln)
		srv.Write([]byte("unread"))
		cli.Write([]byte("lost"))
		reset(cli)
		if b, err := io.ReadAll(srv); !errors.Is(err, syscall.ECONNRESET) || len(b) != 0 {
			t.Errorf("the peer read %q, %v; want ECONNRESET and nothing", b, err)
		}
		if _, err := srv.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the peer's write: %v, want ECONNRESET", err)
		}
		if _, err := cli.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("read after own reset: %v, want net.ErrClosed", err)
		}

		cli2, srv2 := pair(t, &n, ln)
		errc := make(chan error, 1)
		go func() { _, err := srv2.Read(make([]byte, 1)); errc <- err }()
		synctest.Wait()
		reset(cli2)
		if err := <-errc; !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("the peer's blocked read: %v, want ECONNRESET", err)
		}
	})
}

// A writer gets BufferSize bytes ahead of its reader, then waits.
func TestNetworkBuffering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := Network{BufferSize: 1000}
		ln := listen(t, &n, "127.0.0.1:0")
		cli, srv := pair(t, &n, ln)
		if k, err := cli.Write(make([]byte, 1000)); k != 1000 || err != nil {
			t.Fatalf("write into an empty buffer: %d, %v", k, err)
		}
		done := make(chan int)
		go func() {
			k, _ := cli.Write(make([]byte, 500))
			done <- k
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("write past the buffer did not wait for the reader")
		default:
		}
		if _, err := io.ReadFull(srv, make([]byte, 700)); err != nil {
			t.Fatal(err)
		}
		if k := <-done; k != 500 {
			t.Fatalf("wrote %d", k)
		}
		if _, err := io.ReadFull(srv, make([]byte, 800)); err != nil {
			t.Fatal(err)
		}
	})
}

// Bulk data crosses intact in both directions at once, through the ring's
// wrap-around, and concurrent Writes do not interleave.
func TestNetworkTransfer(t *testing.T) {
	run := func(t *testing.T) {
		n := Network{BufferSize: 4093} // odd size: writes straddle the ring's end
		ln := listen(t, &n, "127.0.0.1:0")
		cli, srv := pair(t, &n, ln)
		up := make([]byte, 1<<20)
		down := make([]byte, 1<<20)
		rnd := rand.New(rand.NewPCG(1, 2))
		for i := range up {
			up[i], down[i] = byte(rnd.Uint32()), byte(rnd.Uint32())
		}
		var wg sync.WaitGroup
		var gotUp, gotDown []byte
		var errs [4]error
		wg.Go(func() { _, errs[0] = cli.Write(up); cli.(interface{ CloseWrite() error }).CloseWrite() })
		wg.Go(func() { _, errs[1] = srv.Write(down); srv.(interface{ CloseWrite() error }).CloseWrite() })
		wg.Go(func() { gotUp, errs[2] = io.ReadAll(srv) })
		wg.Go(func() { gotDown, errs[3] = io.ReadAll(cli) })
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(gotUp, up) || !bytes.Equal(gotDown, down) {
			t.Fatal("data corrupted in transit")
		}

		cli2, srv2 := pair(t, &n, ln)
		const each = 100_000
		for _, b := range []byte{'a', 'b', 'c'} {
			wg.Go(func() { cli2.Write(bytes.Repeat([]byte{b}, each)) })
		}
		got := make([]byte, 3*each)
		if _, err := io.ReadFull(srv2, got); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		runs := 1
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1] {
				runs++
			}
		}
		if runs != 3 {
			t.Errorf("concurrent writes interleaved into %d runs, want 3", runs)
		}
	}
	t.Run("real", run)
	t.Run("bubble", func(t *testing.T) { synctest.Test(t, run) })
}

// Deadlines run on the bubble's fake clock.
func TestNetworkDeadlinesSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		ln := listen(t, &n, "127.0.0.1:0")
		cli, srv := pair(t, &n, ln)

		start := time.Now()
		srv.SetReadDeadline(start.Add(3 * time.Second))
		_, err := srv.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past deadline: %v", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("deadline error %v is not a net.Error timeout", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("read deadline fired after %v, want 3s", d)
		}
		// Still expired: even buffered data is not returned.
		cli.Write([]byte("x"))
		if _, err := srv.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read with an expired deadline: %v", err)
		}
		srv.SetReadDeadline(time.Time{})
		if _, err := srv.Read(make([]byte, 1)); err != nil {
			t.Errorf("read after clearing the deadline: %v", err)
		}

		// SetReadDeadline(time.Now()) stops a blocked reader at once (the
		// gateway's drain).
		errc := make(chan error, 1)
		go func() { _, err := srv.Read(make([]byte, 1)); errc <- err }()
		time.Sleep(time.Hour) // the reader is durably blocked: instant
		select {
		case err := <-errc:
			t.Fatalf("read returned early: %v", err)
		default:
		}
		t0 := time.Now()
		srv.SetReadDeadline(time.Now())
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read stopped by a past deadline: %v", err)
		}
		if time.Since(t0) != 0 {
			t.Errorf("past deadline took %v", time.Since(t0))
		}

		// Extending a pending deadline moves it.
		srv.SetReadDeadline(time.Time{})
		srv.SetDeadline(time.Now().Add(time.Second))
		go func() { _, err := srv.Read(make([]byte, 1)); errc <- err }()
		time.Sleep(500 * time.Millisecond)
		t0 = time.Now()
		srv.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(t0) != 5*time.Second {
			t.Errorf("extended deadline: %v after %v, want timeout after 5s", err, time.Since(t0))
		}

		// Write deadline: a full buffer and no reader.
		srv.SetReadDeadline(time.Time{})
		cli.SetWriteDeadline(time.Now().Add(2 * time.Second))
		t0 = time.Now()
		k, err := cli.Write(make([]byte, defaultBufferSize+10))
		if !errors.Is(err, os.ErrDeadlineExceeded) || k != defaultBufferSize {
			t.Errorf("write past deadline: %d, %v; want %d, timeout", k, err, defaultBufferSize)
		}
		if time.Since(t0) != 2*time.Second {
			t.Errorf("write deadline fired after %v", time.Since(t0))
		}
		cli.Close()
		if err := cli.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("SetDeadline after Close: %v", err)
		}
	})
}

// Deadlines work outside a bubble too (real clock).
func TestNetworkDeadlinesReal(t *testing.T) {
	var n Network
	ln := listen(t, &n, "127.0.0.1:0")
	_, srv := pair(t, &n, ln)
	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := srv.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past deadline: %v", err)
	}
}

// A full backlog makes dials wait until Accept or the context ends.
func TestNetworkBacklogSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := Network{Backlog: 1}
		ln := listen(t, &n, "127.0.0.1:0")
		first, err := n.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t0 := time.Now()
		if _, err := n.DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial into a full backlog: %v", err)
		}
		if time.Since(t0) != 10*time.Second {
			t.Errorf("dial gave up after %v", time.Since(t0))
		}
		type res struct {
			c   net.Conn
			err error
		}
		rc := make(chan res, 1)
		go func() {
			c, err := n.DialContext(context.Background(), "tcp", ln.Addr().String())
			rc <- res{c, err}
		}()
		synctest.Wait()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		r := <-rc
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.c.Close()
	})
}

// Goroutines parked in Accept, Read and Write are durably blocked: the
// bubble's clock jumps past a long sleep, and a wrapped net.Pipe-style
// request/response exchange runs on virtual time.
func TestNetworkIdleBubbleSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n Network
		ln := listen(t, &n, "127.0.0.1:0")
		served := make(chan struct{})
		go func() {
			defer close(served)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4)
					for {
						if _, err := io.ReadFull(c, buf); err != nil {
							return
						}
						time.Sleep(time.Second) // a slow server
						c.Write(buf)
					}
				}()
			}
		}()
		c, err := n.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		time.Sleep(24 * time.Hour)
		for i := range 10 {
			c.Write([]byte{0, 0, 0, byte(i)})
			buf := make([]byte, 4)
			if _, err := io.ReadFull(c, buf); err != nil || buf[3] != byte(i) {
				t.Fatalf("echo %d: %v %v", i, buf, err)
			}
		}
		if d := time.Since(t0); d != 24*time.Hour+10*time.Second {
			t.Errorf("virtual time %v, want 24h10s", d)
		}
		c.Close()
		ln.Close()
		<-served
	})
}
