package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

func metadataRequestFrame(corr int32, topics int) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for i := 0; i < topics; i++ {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr("topic-" + string(rune('a'+i%26)))
		req.Topics = append(req.Topics, t)
	}
	id := "frame-test"
	return requestFrame(req, corr, &id)
}

func TestReadFrame(t *testing.T) {
	f1 := metadataRequestFrame(1, 3)
	f2 := metadataRequestFrame(2, 400) // needs a larger class than f1
	f3 := metadataRequestFrame(3, 0)
	stream := append(append(clone(f1), f2...), f3...)

	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader(stream),
		"one byte": iotest.OneByteReader(bytes.NewReader(stream)),
		"half":     iotest.HalfReader(bytes.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			for i, want := range [][]byte{f1, f2, f3} {
				b, err := wire.ReadFrame(r, wire.DefaultMaxFrame)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(b.B, want) {
					t.Fatalf("frame %d: got %d bytes, want %d", i, len(b.B), len(want))
				}
				h, err := wire.ParseRequestHeader(b.B[4:])
				if err != nil || h.CorrelationID != int32(i+1) {
					t.Fatalf("frame %d: header %+v, %v", i, h, err)
				}
				b.Release()
			}
			if b, err := wire.ReadFrame(r, wire.DefaultMaxFrame); err != io.EOF || b != nil {
				t.Fatalf("after the last frame: %v, %v; want io.EOF", b, err)
			}
		})
	}
}

func TestReadFrameSizes(t *testing.T) {
	frame := metadataRequestFrame(1, 10)
	n := int32(len(frame) - 4)

	// Exactly max is fine, one byte over is not.
	b, err := wire.ReadFrame(bytes.NewReader(frame), n)
	if err != nil || !bytes.Equal(b.B, frame) {
		t.Fatalf("frame of exactly max: %v", err)
	}
	b.Release()
	if _, err := wire.ReadFrame(bytes.NewReader(frame), n-1); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Fatalf("frame over max: %v, want ErrFrameTooLarge", err)
	}

	// Sizes refused before anything is allocated or read.
	sizeOnly := func(sz uint32) io.Reader {
		var p [4]byte
		binary.BigEndian.PutUint32(p[:], sz)
		return bytes.NewReader(p[:]) // no payload: reading it would fail differently
	}
	for _, sz := range []uint32{wire.DefaultMaxFrame + 1, 0x7fffffff, 0x10000000} {
		if _, err := wire.ReadFrame(sizeOnly(sz), wire.DefaultMaxFrame); !errors.Is(err, wire.ErrFrameTooLarge) {
			t.Errorf("size %d: %v, want ErrFrameTooLarge", sz, err)
		}
	}
	for _, sz := range []uint32{0x80000000, 0xffffffff, 0xfffffffc} {
		if _, err := wire.ReadFrame(sizeOnly(sz), wire.DefaultMaxFrame); !errors.Is(err, wire.ErrNegativeSize) {
			t.Errorf("size %#x: %v, want ErrNegativeSize", sz, err)
		}
	}

	// An empty frame is a frame.
	b, err = wire.ReadFrame(sizeOnly(0), wire.DefaultMaxFrame)
	if err != nil || len(b.B) != 4 {
		t.Fatalf("empty frame: %v, %v", b, err)
	}
	b.Release()
}

func TestReadFrameTLS(t *testing.T) {
	// The first bytes of a TLS 1.2/1.3 ClientHello record and of a TLS
	// alert, as a TLS client (or a TLS upstream) would send them.
	for _, rec := range [][]byte{
		{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03},
		{0x16, 0x03, 0x03, 0x00, 0x7a},
		{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46},
	} {
		for _, max := range []int32{wire.DefaultMaxFrame, 0x7fffffff} {
			b, err := wire.ReadFrame(bytes.NewReader(rec), max)
			if !errors.Is(err, wire.ErrTLSOnPlaintext) || b != nil {
				t.Errorf("% x (max %d): %v, want ErrTLSOnPlaintext", rec[:3], max, err)
			}
		}
	}
}

func TestReadFrameTruncated(t *testing.T) {
	frame := metadataRequestFrame(1, 5)
	for _, n := range []int{4, 5, len(frame) / 2, len(frame) - 1} {
		b, err := wire.ReadFrame(bytes.NewReader(frame[:n]), wire.DefaultMaxFrame)
		if err != io.ErrUnexpectedEOF || b != nil {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	for _, n := range []int{1, 2, 3} {
		if _, err := wire.ReadFrame(bytes.NewReader(frame[:n]), wire.DefaultMaxFrame); err != io.ErrUnexpectedEOF {
			t.Errorf("size prefix cut at %d: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	if _, err := wire.ReadFrame(bytes.NewReader(nil), wire.DefaultMaxFrame); err != io.EOF {
		t.Errorf("nothing to read: %v, want io.EOF", err)
	}
	// Other read errors come back as they are.
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(frame[:10]), iotest.ErrReader(boom))
	if _, err := wire.ReadFrame(r, wire.DefaultMaxFrame); err != boom {
		t.Errorf("read error mid-body: %v, want %v", err, boom)
	}
	if _, err := wire.ReadFrame(iotest.ErrReader(boom), wire.DefaultMaxFrame); err != boom {
		t.Errorf("read error at start: %v, want %v", err, boom)
	}
}

// classSize is the capacity of the pool class that holds n bytes.
func classSize(n int) int {
	c := 512
	for c < n {
		c *= 2
	}
	return c
}

func TestGetBufferClasses(t *testing.T) {
	for _, n := range []int{0, 1, 4, 511, 512, 513, 1000, 1024, 1025, 4096, 16 << 10, 100 << 10, 1<<20 + 1, 8 << 20} {
		b := wire.GetBuffer(n)
		if len(b.B) != n {
			t.Fatalf("GetBuffer(%d): len %d", n, len(b.B))
		}
		if cap(b.B) < n || cap(b.B) < classSize(n) {
			t.Fatalf("GetBuffer(%d): cap %d, want at least %d", n, cap(b.B), classSize(n))
		}
		// Whatever the pool hands out must be fully usable.
		for i := range b.B {
			b.B[i] = byte(i)
		}
		b.Release()
		b2 := wire.GetBuffer(n)
		if len(b2.B) != n || cap(b2.B) < classSize(n) {
			t.Fatalf("GetBuffer(%d) after Release: len %d cap %d", n, len(b2.B), cap(b2.B))
		}
		b2.Release()
	}
	var nilBuf *wire.Buffer
	nilBuf.Release() // must not panic
}

func TestGetBufferLargerThanLargestClass(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 128 MiB")
	}
	const n = 128<<20 + 1
	b := wire.GetBuffer(n)
	if len(b.B) != n || cap(b.B) != n {
		t.Fatalf("GetBuffer(%d): len %d cap %d, want an exact unpooled buffer", n, len(b.B), cap(b.B))
	}
	b.Release()
	b.Release() // not pooled: releasing is a no-op, even twice
	if len(b.B) != n {
		t.Fatalf("Release touched an unpooled buffer")
	}
}

func TestBufferGrow(t *testing.T) {
	b := wire.GetBuffer(100)
	for i := range b.B {
		b.B[i] = byte(i)
	}
	want := clone(b.B)

	// Within the class: no move.
	p := unsafe.SliceData(b.B)
	b.Grow(400)
	if len(b.B) != 100 || unsafe.SliceData(b.B) != p || cap(b.B) < 500 {
		t.Fatalf("Grow within the class moved or resized: len %d cap %d", len(b.B), cap(b.B))
	}
	b.Grow(0)
	if unsafe.SliceData(b.B) != p {
		t.Fatalf("Grow(0) moved the buffer")
	}

	// Across several classes: contents kept, length unchanged.
	for _, more := range []int{413, 5000, 70 << 10, 3 << 20} {
		b.Grow(more)
		if len(b.B) != len(want) || !bytes.Equal(b.B, want) {
			t.Fatalf("Grow(%d) lost the contents", more)
		}
		if cap(b.B) < len(b.B)+more {
			t.Fatalf("Grow(%d): cap %d < %d", more, cap(b.B), len(b.B)+more)
		}
		b.B = append(b.B, make([]byte, more)...)
		if cap(b.B) < len(b.B) || unsafe.SliceData(b.B) == nil {
			t.Fatal("append after Grow reallocated")
		}
		want = clone(b.B)
	}
	b.Release()

	// Growing past the largest class gives an unpooled buffer.
	if !testing.Short() {
		b = wire.GetBuffer(1 << 20)
		b.B[0], b.B[len(b.B)-1] = 1, 2
		b.Grow(128 << 20)
		if len(b.B) != 1<<20 || b.B[0] != 1 || b.B[len(b.B)-1] != 2 || cap(b.B) < 129<<20 {
			t.Fatalf("Grow past the largest class: len %d cap %d", len(b.B), cap(b.B))
		}
		b.Release()
	}
}

// Buffers whose B was set by the caller, or grown by append after
// GetBuffer (as EncodeResponse and ReplaceBody do), must never make the
// pool hand out a buffer smaller than asked for.
func TestReleaseForeignBuffers(t *testing.T) {
	for i := 0; i < 200; i++ {
		small := &wire.Buffer{B: make([]byte, 10)}
		small.Release()
		grown := wire.GetBuffer(8)
		grown.B = append(grown.B, make([]byte, 3000)...)
		grown.Release()
		var got []*wire.Buffer
		for _, n := range []int{512, 500, 511, 1024, 4096, 2048} {
			b := wire.GetBuffer(n) // panicked with a 10-byte B in class 0
			if len(b.B) != n || cap(b.B) < classSize(n) {
				t.Fatalf("GetBuffer(%d): len %d cap %d", n, len(b.B), cap(b.B))
			}
			got = append(got, b)
		}
		for _, b := range got {
			b.Release()
		}
	}
}

func TestBufferPoolConcurrent(t *testing.T) {
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 500; i++ {
				n := (g*977 + i*131) % 20000
				b := wire.GetBuffer(n)
				for j := range b.B {
					b.B[j] = byte(g)
				}
				b.Grow(i)
				for j := range b.B {
					if b.B[j] != byte(g) {
						panic("buffer shared between goroutines")
					}
				}
				b.Release()
			}
		}(g)
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}
