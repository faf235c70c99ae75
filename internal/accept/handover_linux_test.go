package accept

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/admission"
)

// The test binary doubles as the acceptor helper and as the successor of
// a handover (as tollgate serve is both).
const (
	successorModeEnv   = "TOLLGATE_TEST_SUCCESSOR"
	successorAddrEnv   = "TOLLGATE_TEST_SUCCESSOR_BOOTSTRAP"
	successorBrokerEnv = "TOLLGATE_TEST_SUCCESSOR_BROKER_PORT"
)

func TestMain(m *testing.M) {
	RunAcceptorHelper()
	if mode := os.Getenv(successorModeEnv); mode != "" {
		os.Exit(runTestSuccessor(mode))
	}
	os.Exit(m.Run())
}

// markHandler answers every connection with one byte saying who served it,
// and closes it. With slow set it takes its time in Serve, holding up the
// accept loop: the acceptor helper gets ahead, and sockets it accepted
// wait in the ports' pairs.
type markHandler struct {
	mark  byte
	admit *admission.Limiter
	slow  bool
	n     atomic.Int64
}

func (h *markHandler) Serve(c net.Conn, _ int32, ac *admission.Conn) {
	h.n.Add(1)
	if h.slow {
		time.Sleep(time.Millisecond)
	}
	go func() {
		c.Write([]byte{h.mark})
		c.Close()
		if ac != nil {
			h.admit.Release(ac)
		}
	}()
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
}

func newLimiter(t testing.TB) *admission.Limiter {
	s := admission.DefaultSettings()
	s.Listeners = []admission.ListenerSettings{{Name: "L"}}
	lim, err := admission.New(s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// runTestSuccessor is the new process of a handover, by mode:
//
//	serve       take the sockets over, then data_dir, serve ('B') until SIGTERM
//	exit        exit 3 at once
//	after-data  take data_dir, then exit 4
//	silent      say nothing until killed
//	garbage     send a message the exchange does not know
func runTestSuccessor(mode string) int {
	inh, err := Inherit()
	if err != nil || inh == nil {
		fmt.Fprintln(os.Stderr, "successor:", err)
		return 2
	}
	defer inh.Close()
	if os.Getenv(HandoverEnv) != "" {
		fmt.Fprintln(os.Stderr, "successor: Inherit left", HandoverEnv, "set")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	switch mode {
	case "exit":
		return 3
	case "garbage":
		inh.ctl.send('Z')
		<-ctx.Done()
		return 0
	case "silent":
		<-ctx.Done()
		return 0
	}
	if err := inh.TakeDataDir(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "successor:", err)
		return 2
	}
	if mode == "after-data" {
		return 4
	}
	var ids atomic.Uint64
	lim := newLimiter(nil)
	srv := NewServer(Options{Log: quietLog(), Admission: lim, Inherited: inh}, func() uint64 { return ids.Add(1) })
	srv.Start()
	l, err := srv.Listen(ListenerConfig{Name: "L", Bootstrap: os.Getenv(successorAddrEnv)}, &markHandler{mark: 'B', admit: lim})
	if err != nil {
		fmt.Fprintln(os.Stderr, "successor:", err)
		return 2
	}
	l.Accept()
	// As the gateway does once it has read the brokers: the port taken
	// over starts accepting.
	if p, err := l.Port(0); err != nil || fmt.Sprint(p) != os.Getenv(successorBrokerEnv) {
		fmt.Fprintln(os.Stderr, "successor: broker port 0 not taken over:", p, err)
		return 2
	}
	if err := inh.Serving(); err != nil {
		fmt.Fprintln(os.Stderr, "successor:", err)
		return 2
	}
	<-ctx.Done()
	srv.Close()
	srv.Wait()
	return 0
}

// startSuccessor starts this test binary as a successor of srv.
func startSuccessor(t *testing.T, srv *Server, mode, bootstrap string) *Successor {
	t.Helper()
	socks, err := srv.Sockets()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(successorModeEnv, mode)
	t.Setenv(successorAddrEnv, bootstrap)
	succ, err := StartSuccessor(os.Args[0], nil, socks, os.Stdout, os.Stderr)
	for _, s := range socks {
		s.File.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(succ.Abort)
	return succ
}

// dialTally dials addr until stop closes (or limit dials), and reads the
// byte that says who served each connection.
type dialTally struct {
	mu      sync.Mutex
	served  map[byte]int
	refused int
	dropped []string // connected, then closed without an answer
	other   []string
}

func (d *dialTally) run(addr string, limit int, stop <-chan struct{}) {
	for i := 0; i < limit; i++ {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		d.mu.Lock()
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				d.refused++
			} else {
				d.other = append(d.other, err.Error())
			}
			d.mu.Unlock()
			continue
		}
		d.mu.Unlock()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var b [1]byte
		_, err = io.ReadFull(c, b[:])
		c.Close()
		d.mu.Lock()
		if err != nil {
			d.dropped = append(d.dropped, err.Error())
		} else {
			d.served[b[0]]++
		}
		d.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
	}
}

func (d *dialTally) count(mark byte) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served[mark]
}

// A handover between two processes on real sockets, the acceptor helper
// accepting in the old one: clients dialing the bootstrap port and a
// broker port all through it are never refused, and every connection they
// make is answered — by the old process (what its helper had accepted is
// served after it is told to stop) or by the new one, which took the same
// sockets over and opened none.
func TestHandoverRefusesAndDropsNothing(t *testing.T) {
	var ids atomic.Uint64
	lim := newLimiter(t)
	a := NewServer(Options{Log: quietLog(), Admission: lim, AcceptorExe: os.Args[0]}, func() uint64 { return ids.Add(1) })
	a.Start()
	defer a.Close()
	if !a.AcceptorProcessRunning() {
		t.Fatal("no acceptor helper")
	}
	l, err := a.Listen(ListenerConfig{Name: "L", Bootstrap: "127.0.0.1:0"}, &markHandler{mark: 'A', admit: lim, slow: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Accept()
	if _, err := l.Port(0); err != nil {
		t.Fatal(err)
	}
	boot := l.Addr().String()
	bport, _ := l.Open(0)
	broker := net.JoinHostPort("127.0.0.1", fmt.Sprint(bport))
	tallies := map[string]*dialTally{boot: {served: map[byte]int{}}, broker: {served: map[byte]int{}}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for addr, d := range tallies {
		for range 8 { // concurrent dials: the pairs hold sockets when the old process stops
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.run(addr, 5000, stop)
			}()
		}
	}
	waitFor(t, "connections served by the old process", func() bool {
		return tallies[boot].count('A') >= 50 && tallies[broker].count('A') >= 50
	})

	t.Setenv(successorBrokerEnv, fmt.Sprint(bport))
	succ := startSuccessor(t, a, "serve", boot)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := succ.AwaitPrepared(ctx); err != nil {
		t.Fatal(err)
	}
	if err := succ.DataDirReleased(); err != nil {
		t.Fatal(err)
	}
	if err := succ.AwaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	succ.Close()
	stopping := time.Now()
	a.StopAccepting(5 * time.Second)
	a.Wait()
	t.Logf("the old server stopped accepting in %v", time.Since(stopping))
	servedByA := tallies[boot].count('A') + tallies[broker].count('A')
	waitFor(t, "connections served by the new process", func() bool {
		return tallies[boot].count('B') >= 50 && tallies[broker].count('B') >= 50
	})
	close(stop)
	wg.Wait()
	for addr, d := range tallies {
		t.Logf("%s: served by old %d, new %d; refused %d, dropped %d, other errors %d", addr, d.served['A'], d.served['B'], d.refused, len(d.dropped), len(d.other))
		if d.refused > 0 {
			t.Errorf("%s: %d dials refused during the handover", addr, d.refused)
		}
		if len(d.dropped) > 0 {
			t.Errorf("%s: %d connections closed unanswered, e.g. %s", addr, len(d.dropped), d.dropped[0])
		}
		if len(d.other) > 0 {
			t.Errorf("%s: %d dials failed, e.g. %s", addr, len(d.other), d.other[0])
		}
	}
	if got := tallies[boot].count('A') + tallies[broker].count('A'); got != servedByA {
		t.Errorf("the old process served %d connections after StopAccepting returned", got-servedByA)
	}
	if err := succ.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-succ.exited
	if succ.waited != nil {
		t.Errorf("successor: %v", succ.waited)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A successor that fails — exits at once, exits after taking data_dir,
// or never answers — is reported with why, killed, and the old server
// never stopped serving.
func TestHandoverSuccessorFails(t *testing.T) {
	var ids atomic.Uint64
	a := NewServer(Options{Log: quietLog()}, func() uint64 { return ids.Add(1) })
	a.Start()
	defer a.Close()
	h := &markHandler{mark: 'A'}
	l, err := a.Listen(ListenerConfig{Name: "L", Bootstrap: "127.0.0.1:0"}, h)
	if err != nil {
		t.Fatal(err)
	}
	l.Accept()
	boot := l.Addr().String()
	servedByA := func() {
		t.Helper()
		c, err := net.Dial("tcp", boot)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != 'A' {
			t.Fatalf("after the failed handover: %q %v, want the old server's answer", b, err)
		}
	}
	for _, tc := range []struct {
		mode, want string
		wait       time.Duration
	}{
		{"exit", "exited before it loaded its configuration: exit status 3", 30 * time.Second},
		{"after-data", "exited before it served: exit status 4", 30 * time.Second},
		{"silent", "has not loaded its configuration in time", 300 * time.Millisecond},
		{"garbage", `unexpected control message 'Z'`, 30 * time.Second},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			succ := startSuccessor(t, a, tc.mode, boot)
			ctx, cancel := context.WithTimeout(context.Background(), tc.wait)
			defer cancel()
			err := succ.AwaitPrepared(ctx)
			if err == nil {
				if err = succ.DataDirReleased(); err == nil {
					err = succ.AwaitServing(ctx)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("handover error %v, want %q", err, tc.want)
			}
			succ.Abort()
			servedByA()
		})
	}
}

// What a successor takes from HandoverEnv crosses a process boundary: a
// malformed value or a descriptor that is not what it claims is refused
// with a clear error.
func TestInheritRefusesBadInput(t *testing.T) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(pair[1])
	ctl := pair[0]
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	tf, err := dupListener(tcp, "tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	lfd := int(tf.Fd())
	unixLn, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer unixLn.Close()
	uf, err := dupListener(unixLn, "unix")
	if err != nil {
		t.Fatal(err)
	}
	defer uf.Close()
	conn, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cf, err := conn.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()

	env := func(control int, socks ...string) string {
		return fmt.Sprintf(`{"control":%d,"sockets":[%s]}`, control, strings.Join(socks, ","))
	}
	sock := func(fd int, key string) string { return fmt.Sprintf(`{"fd":%d,"key":%q}`, fd, key) }
	for _, tc := range []struct{ name, val, want string }{
		{"not JSON", "sockets: 4", "not the JSON"},
		{"unknown field", `{"control":3,"extra":1}`, "not the JSON"},
		{"trailing data", env(ctl) + "{}", "trailing data"},
		{"too long", strings.Repeat(" ", maxHandoverEnv+1), "more than"},
		{"stdin as control", env(0), "must be 3 or more"},
		{"control not a socket", env(int(pr.Fd())), "not a socket"},
		{"control a TCP socket", env(lfd), "socket type"},
		{"control not open", env(54321), "not a socket"},
		{"empty key", env(ctl, sock(lfd, "")), "socket key"},
		{"control character in key", env(ctl, sock(lfd, "a\nb")), "control character"},
		{"key named twice", env(ctl, sock(lfd, "k"), sock(int(uf.Fd()), "k")), "named twice"},
		{"control as a socket", env(ctl, sock(ctl, "k")), "not named twice"},
		{"stdout as a socket", env(ctl, sock(1, "k")), "3 or more"},
		{"a pipe", env(ctl, sock(int(pw.Fd()), "k")), "not a socket"},
		{"a connection, not listening", env(ctl, sock(int(cf.Fd()), "k")), "not a listening socket"},
		{"a unix listener", env(ctl, sock(int(uf.Fd()), "k")), "not a TCP socket"},
	} {
		if _, err := parseInherited(tc.val); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}

	// What a predecessor sets is taken, and Listener hands each socket
	// out once, where the configuration still puts it.
	vpair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(vpair[1])
	h, err := parseInherited(env(vpair[0], sock(mustDup(t, lfd), "kafka/L/bootstrap"), sock(mustDup(t, lfd), "kafka/L/7"),
		sock(mustDup(t, lfd), "kafka/L/x"), sock(mustDup(t, lfd), "kafka/LL/8")))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := strings.Join(h.Keys(), " "); got != "kafka/L/7 kafka/L/bootstrap kafka/L/x kafka/LL/8" {
		t.Fatalf("keys %q", got)
	}
	if got := fmt.Sprint(h.brokers("L")); got != "[7]" {
		t.Fatalf("broker ports of L: %s", got)
	}
	if got := h.brokers("M"); len(got) != 0 {
		t.Fatalf("broker ports of M: %v", got)
	}
	addr := tcp.Addr().String()
	ln, err := h.Listener("kafka/L/bootstrap", addr)
	if err != nil || ln == nil || ln.Addr().String() != addr {
		t.Fatalf("Listener: %v %v", ln, err)
	}
	ln.Close()
	if ln, err := h.Listener("kafka/L/bootstrap", addr); ln != nil || err != nil {
		t.Fatalf("a socket handed out twice: %v %v", ln, err)
	}
	if ln, err := h.Listener("kafka/L/7", "127.0.0.1:1"); ln != nil || !errors.Is(err, errMoved) {
		t.Fatalf("a socket the configuration moved: %v %v, want errMoved", ln, err)
	}
	if ln, err := h.Listener("nothing", addr); ln != nil || err != nil {
		t.Fatalf("a key not inherited: %v %v", ln, err)
	}
}

func mustDup(t *testing.T, fd int) int {
	t.Helper()
	d, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// addrMatches decides whether the configuration still puts a port where
// an inherited socket is bound.
func TestAddrMatches(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}
	any6 := &net.TCPAddr{IP: net.IPv6unspecified, Port: 9092}
	for _, tc := range []struct {
		configured string
		actual     *net.TCPAddr
		want       bool
	}{
		{"127.0.0.1:9092", v4, true},
		{"127.0.0.1:0", v4, true},
		{"127.0.0.1:9093", v4, false},
		{"127.0.0.2:9092", v4, false},
		{"localhost:9092", v4, true},
		{":9092", any6, true},
		{"0.0.0.0:9092", any6, true},
		{"[::]:9092", any6, true},
		{":9092", v4, false},
		{"0.0.0.0:9092", v4, false},
		{"[::ffff:127.0.0.1]:9092", v4, true},
		{"127.0.0.1", v4, false},
		{"127.0.0.1:http", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}, true},
		{"no-such-host.invalid:9092", v4, false},
	} {
		if got := addrMatches(tc.configured, tc.actual); got != tc.want {
			t.Errorf("addrMatches(%q, %v) = %v, want %v", tc.configured, tc.actual, got, tc.want)
		}
	}
}

// A PROXY-protocol port told to stop for a handover closes, but the
// connection whose header it is reading is still handed on once the header
// is in, not closed.
func TestProxyPortStopServesHeadersInProgress(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	rc, _ := tcp.(*net.TCPListener).SyscallConn()
	rc.Control(func(s uintptr) { fd = int(s) })
	p := newProxyListener(tcp, ListenerConfig{Name: "L", ProxyTrusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, quietLog())
	defer p.Close()
	c, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Taken from the backlog: its header is being read.
	// (run adds it to the headers in progress before it accepts again).
	waitFor(t, "the connection accepted", func() bool { return acceptQueue(fd) == 0 })
	p.stopAccepting()
	if _, err := c.Write([]byte("PROXY TCP4 10.1.2.3 10.0.0.1 40000 9092\r\n")); err != nil {
		t.Fatal(err)
	}
	got, err := p.Accept()
	if err != nil {
		t.Fatalf("the connection in its header was not handed on: %v", err)
	}
	defer got.Close()
	if got.RemoteAddr().String() != "10.1.2.3:40000" {
		t.Fatalf("remote %s", got.RemoteAddr())
	}
	if _, err := p.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after the headers in progress: %v, want closed", err)
	}
}
