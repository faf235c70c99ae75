package accept

// Socket handover: a new binary takes over the listening sockets of the
// running one, so that an upgrade refuses no connection (nginx's and
// tableflip's procedure; the descriptors travel as the acceptor helper's
// do, but by inheritance).
//
// The running process (the predecessor) starts the new one (the
// successor) with every listening socket it holds as an inherited
// descriptor, and HandoverEnv naming each by its role (Socket.Key). Both
// hold the same kernel sockets: a connection waiting in a backlog is
// accepted by whichever process accepts first, and none is refused. They
// talk over a SOCK_SEQPACKET socketpair (the successor's descriptor 3),
// one byte a message:
//
//	successor → 'P'  configuration loaded, sockets matched: it needs
//	                 data_dir now (bbolt lets one process hold it)
//	predecessor → 'D' data_dir released (store closed, usage written)
//	successor → 'R'  serving: its gateway accepts on the inherited
//	                 sockets, its admin port is up
//
// Then the predecessor stops accepting (StopAccepting: the sockets its
// acceptor helper has accepted are served, nothing is dropped), drains its
// sessions and exits. If the successor exits, or says nothing within the
// predecessor's deadline, the predecessor kills it, takes data_dir back
// and carries on serving: it never stopped accepting.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HandoverEnv marks a process started by a handover; its value describes
// the inherited descriptors (handoverEnv, JSON).
const HandoverEnv = "TOLLGATE_HANDOVER"

// HTTPSocket is the key of the admin HTTP port's socket.
const HTTPSocket = "http"

// Control messages of a handover.
const (
	msgPrepared = 'P' // successor → predecessor: may it have data_dir?
	msgReleased = 'D' // predecessor → successor: data_dir is free
	msgServing  = 'R' // successor → predecessor: serving
)

// Limits on what a successor accepts from HandoverEnv.
const (
	maxHandoverEnv     = 1 << 20
	maxInheritedSocket = 1 << 16
	maxSocketKey       = 512
)

// handoverEnv is HandoverEnv's value.
type handoverEnv struct {
	Control int              `json:"control"`
	Sockets []handoverSocket `json:"sockets"`
}

type handoverSocket struct {
	FD  int    `json:"fd"`
	Key string `json:"key"`
}

// Socket is a listening socket handed to a successor, named by its role:
// HTTPSocket, or a Kafka listener's bootstrap or broker port.
type Socket struct {
	Key  string
	File *os.File
}

// bootstrapKey and brokerKey name a listener's ports.
func bootstrapKey(listener string) string { return "kafka/" + listener + "/bootstrap" }

func brokerKey(listener string, node int32) string {
	return "kafka/" + listener + "/" + strconv.Itoa(int(node))
}

func validSocketKey(k string) error {
	if k == "" || len(k) > maxSocketKey {
		return fmt.Errorf("socket key of %d bytes (1 to %d)", len(k), maxSocketKey)
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("socket key %q has a control character", k)
		}
	}
	return nil
}

// errMoved: an inherited socket is not where the configuration now puts
// its port.
var errMoved = errors.New("the configuration moved it")

// Inherited is what a successor inherited: the listening sockets, by key,
// and the control socket to its predecessor. Its methods are safe for
// concurrent use.
type Inherited struct {
	ctl *control

	mu    sync.Mutex
	socks map[string]inheritedSocket
}

type inheritedSocket struct {
	fd   int
	addr *net.TCPAddr
}

// Keys lists the keys of the sockets not taken yet, sorted.
func (h *Inherited) Keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.socks))
}

// Listener takes the inherited socket named key, if configured (host:port,
// as net.Listen takes it) still names its address: port 0 matches any
// port, a host name matches any of its addresses. It returns nil, nil when
// nothing was inherited under key, and an error (having closed the socket)
// when the configuration moved the port: the caller listens afresh.
func (h *Inherited) Listener(key, configured string) (net.Listener, error) {
	if h == nil {
		return nil, nil
	}
	h.mu.Lock()
	s, ok := h.socks[key]
	delete(h.socks, key)
	h.mu.Unlock()
	if !ok {
		return nil, nil
	}
	if !addrMatches(configured, s.addr) {
		closeFD(s.fd)
		return nil, fmt.Errorf("%s was %s: %w to %s", key, s.addr, errMoved, configured)
	}
	ln, err := fdListener(s.fd, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return ln, nil
}

// brokers lists the node ids of the inherited broker ports of a listener,
// sorted.
func (h *Inherited) brokers(listener string) []int32 {
	if h == nil {
		return nil
	}
	prefix := "kafka/" + listener + "/"
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int32
	for k := range h.socks {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if id, err := strconv.ParseInt(rest, 10, 32); err == nil && id >= 0 && brokerKey(listener, int32(id)) == k {
			out = append(out, int32(id))
		}
	}
	slices.Sort(out)
	return out
}

// TakeDataDir tells the predecessor that this process is ready to open
// data_dir and waits until the predecessor has released it.
func (h *Inherited) TakeDataDir(ctx context.Context) error {
	if err := h.ctl.send(msgPrepared); err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	if err := h.ctl.await(ctx, msgReleased); err != nil {
		return fmt.Errorf("handover: waiting for the old process to release data_dir: %w", err)
	}
	return nil
}

// Serving tells the predecessor that this process serves: it stops
// accepting, drains and exits.
func (h *Inherited) Serving() error {
	if err := h.ctl.send(msgServing); err != nil {
		return fmt.Errorf("handover: %w", err)
	}
	return nil
}

// Close closes the control socket and every socket not taken.
func (h *Inherited) Close() {
	if h == nil {
		return
	}
	h.ctl.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, s := range h.socks {
		closeFD(s.fd)
		delete(h.socks, k)
	}
}

// addrMatches reports whether a listener configured at configured
// (host:port) would be the socket bound at actual.
func addrMatches(configured string, actual *net.TCPAddr) bool {
	host, port, err := net.SplitHostPort(configured)
	if err != nil || actual == nil {
		return false
	}
	if p, err := net.LookupPort("tcp", port); err != nil || (p != 0 && p != actual.Port) {
		return false
	}
	got, ok := netip.AddrFromSlice(actual.IP)
	if !ok {
		return false
	}
	got = got.Unmap()
	if host == "" {
		return got.IsUnspecified()
	}
	if want, err := netip.ParseAddr(host); err == nil {
		want = want.Unmap()
		// Go listens on "0.0.0.0" with a dual-stack [::] socket.
		return want == got || (want.IsUnspecified() && got.IsUnspecified())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if ip.Unmap() == got {
			return true
		}
	}
	return false
}

// control is one end of a handover's control socketpair: one byte a
// message, read by a goroutine of its own until the other end closes.
type control struct {
	f    *os.File
	msgs chan byte // closed at the other end's close (or a read error)
	once sync.Once
	err  error // why msgs closed; read after it has
}

func newControl(f *os.File) *control {
	c := &control{f: f, msgs: make(chan byte, 4)}
	go func() {
		defer close(c.msgs)
		var b [16]byte
		for {
			n, err := f.Read(b[:])
			if err != nil {
				c.err = err
				return
			}
			if n == 0 { // SOCK_SEQPACKET: the other end closed
				c.err = io.EOF
				return
			}
			for _, m := range b[:n] {
				c.msgs <- m
			}
		}
	}()
	return c
}

func (c *control) send(m byte) error {
	if _, err := c.f.Write([]byte{m}); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	return nil
}

// await waits for message want; any other message is an error, and so is
// the other end going away (errGone).
func (c *control) await(ctx context.Context, want byte) error {
	select {
	case m, ok := <-c.msgs:
		if !ok {
			if errors.Is(c.err, io.EOF) {
				return errGone
			}
			return fmt.Errorf("%w (%v)", errGone, c.err)
		}
		if m != want {
			return fmt.Errorf("unexpected control message %q, want %q", m, want)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *control) close() {
	c.once.Do(func() { c.f.Close() })
}

// errGone: the other process closed its end of the control socket (it
// exited).
var errGone = errors.New("the other process went away")
