package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// plainReader and plainWriter hide bytes.Reader's WriteTo and
// bytes.Buffer's ReadFrom: they stand for a TLS connection, which has
// neither.
type plainReader struct{ r *bytes.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

type plainWriter struct{ n *int64 }

func (p plainWriter) Write(b []byte) (int, error) { *p.n += int64(len(b)); return len(b), nil }

// copyN copies exactly n bytes through its pooled buffer without
// allocating (io.CopyN allocates its 32 KiB buffer each call), and reports
// a source that ends early with io.EOF, as io.CopyN does.
func TestCopyNPooled(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 200<<10)
	var got int64
	src := plainReader{bytes.NewReader(data)}
	dst := plainWriter{&got}
	copyN(dst, src, 1) // the pool's first copier
	allocs := testing.AllocsPerRun(50, func() {
		src.r.Reset(data)
		if n, err := copyN(dst, src, 150<<10); n != 150<<10 || err != nil {
			t.Fatalf("copied %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("copyN allocates %.1f times per call, want 0", allocs)
	}
	if std := testing.AllocsPerRun(5, func() { src.r.Reset(data); io.CopyN(dst, src, 150<<10) }); std == 0 {
		t.Log("io.CopyN no longer allocates here either")
	}
	src.r.Reset(data[:10])
	if n, err := copyN(dst, src, 20); n != 10 || !errors.Is(err, io.EOF) {
		t.Errorf("a source 10 bytes short of 20: %d, %v; want 10 and io.EOF", n, err)
	}
}

// Between two TCP sockets copyN goes through ReadFrom (splice on Linux)
// and copies exactly n bytes, leaving the rest in the source.
func TestCopyNTCP(t *testing.T) {
	pair := func() (a, b *net.TCPConn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		return c.(*net.TCPConn), s.(*net.TCPConn)
	}
	inW, inR := pair()
	outW, outR := pair()
	go inW.Write(bytes.Repeat([]byte("y"), 100<<10))
	if n, err := copyN(outW, inR, 64<<10); n != 64<<10 || err != nil {
		t.Fatalf("copied %d, %v", n, err)
	}
	got := make([]byte, 64<<10)
	if _, err := io.ReadFull(outR, got); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, 36<<10)
	if _, err := io.ReadFull(inR, rest); err != nil {
		t.Fatalf("the rest of the source: %v", err)
	}
}
