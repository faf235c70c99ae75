package accept

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
)

// A storm's refused sockets cost no allocation: accepted with accept4 into
// a value, parked in a heap of values, the admission.Conn reused. (Garbage
// at a storm's rate means a collection every fraction of a second, and its
// pauses land on the connections being served.)
func TestParkedSocketAllocatesNothing(t *testing.T) {
	s := admission.DefaultSettings()
	s.Listeners = []admission.ListenerSettings{{Name: "PLAINTEXT"}}
	s.DefaultIPConnectionRate = 1
	lim, err := admission.New(s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids atomic.Uint64
	g := NewServer(Options{Admission: lim,
		Log: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))}, func() uint64 { return ids.Add(1) })
	l := &Listener{srv: g, cfg: ListenerConfig{Name: "PLAINTEXT"}}

	tl, err := listenNoKeepAlive("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl, ok := rawCapable(tl).(*rawListener)
	if !ok {
		t.Fatal("a TCP listener is not raw-capable on Linux")
	}
	defer rl.Close()
	rc, err := rl.pollable()
	if err != nil {
		t.Fatal(err)
	}
	const runs = 300
	var clients []net.Conn
	for i := 0; i < runs+3; i++ { // AllocsPerRun adds a warm-up call
		c, err := net.Dial("tcp", rl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var spare *admission.Conn
	var rsa syscall.RawSockaddrAny
	var fd int
	var errno syscall.Errno
	accept := func(lfd uintptr) bool {
		fd, errno = accept4(int(lfd), &rsa)
		return errno != syscall.EAGAIN
	}
	acceptOne := func() {
		if err := rc.Read(accept); err != nil || errno != 0 {
			t.Fatal(err, errno)
		}
		l.admitAndServe(socket{fd: fd, addr: rawAddrPort(&rsa)}, 0, &spare)
	}
	// Use up 127.0.0.1's start-up allowance (Kafka admits Q·(N−1)·W at
	// once), so that every socket below is parked rather than served.
	lo := netip.MustParseAddr("127.0.0.1")
	for i := 0; ; i++ {
		tk, err := lim.Admit("PLAINTEXT", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if lim.AdmitIP(&tk, lo, &admission.Conn{}, time.Now()).Verdict != admission.Accept {
			break
		}
		if i > 1000 {
			t.Fatal("the per-IP rate never throttles")
		}
	}
	n := testing.AllocsPerRun(runs, acceptOne)
	if parked := g.parked.parkedNow(); parked < runs/2 {
		t.Fatalf("only %d of %d sockets were parked; the test did not exercise refusal", parked, runs)
	}
	if n != 0 {
		t.Fatalf("a parked socket costs %v allocations, want 0", n)
	}
}
