package accept

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pires/go-proxyproto"
)

// defaultHeaderTimeout bounds how long a client may take to send its PROXY
// protocol header when the listener does not say.
const defaultHeaderTimeout = 10 * time.Second

// proxyListener reads the PROXY protocol header (v1 or v2) of each
// connection in a goroutine of its own, so that a slow or silent client
// cannot stall the acceptor, and hands on only connections whose header
// parsed: their RemoteAddr is the client's real address, which is what
// per-IP connection limits must see. A missing or malformed header closes
// only that connection, and so does any connection from a peer that is not
// a trusted proxy: otherwise anyone could claim any source address, pick a
// principals_by_cidr principal or dodge per-IP limits.
type proxyListener struct {
	net.Listener
	log     *slog.Logger
	name    string
	trusted []netip.Prefix
	timeout time.Duration
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	err     error
	headers sync.WaitGroup // connections whose header is being read
	// stopped: stopAccepting closed the port; the accept loop ends once
	// the headers being read are in.
	stopped atomic.Bool
}

func newProxyListener(ln net.Listener, cfg ListenerConfig, log *slog.Logger) *proxyListener {
	p := &proxyListener{Listener: ln, log: log, name: cfg.Name, trusted: cfg.ProxyTrusted, timeout: cfg.HeaderTimeout,
		conns: make(chan net.Conn), done: make(chan struct{})}
	if p.timeout <= 0 {
		p.timeout = defaultHeaderTimeout
	}
	go p.run()
	return p
}

func (p *proxyListener) run() {
	for {
		c, err := p.Listener.Accept()
		if err != nil {
			if p.stopped.Load() {
				p.headers.Wait() // hand them on first: a handover
			}
			p.once.Do(func() {
				p.err = err // before done closes: Accept reads it after
				close(p.done)
			})
			return
		}
		p.headers.Add(1)
		go func() {
			defer p.headers.Done()
			p.header(c)
		}()
	}
}

// stopAccepting closes the port but lets the connections whose header is
// being read through (StopAccepting); Accept reports the port closed
// after them.
func (p *proxyListener) stopAccepting() {
	p.stopped.Store(true)
	p.Listener.Close()
}

// TrustedProxy reports whether addr is within one of the prefixes.
func TrustedProxy(trusted []netip.Prefix, addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

func (p *proxyListener) header(c net.Conn) {
	if !TrustedProxy(p.trusted, remoteIP(c)) {
		p.log.Warn("connection closed", "listener", p.name, "remote", c.RemoteAddr().String(),
			"reason", "untrusted_proxy", "err", "a PROXY protocol header is accepted only from proxy_protocol_trusted_cidrs")
		c.Close()
		return
	}
	pc := proxyproto.NewConn(c, proxyproto.WithPolicy(proxyproto.REQUIRE), proxyproto.SetReadHeaderTimeout(p.timeout))
	if pc.ProxyHeader() == nil {
		p.log.Warn("connection closed", "listener", p.name, "remote", c.RemoteAddr().String(),
			"reason", "bad_proxy_header", "err", "missing or malformed PROXY protocol header")
		c.Close()
		return
	}
	select {
	case p.conns <- pc:
	case <-p.done:
		c.Close()
	}
}

func (p *proxyListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		if p.err == nil { // closed by Close, not by a failed accept
			return nil, net.ErrClosed
		}
		return nil, p.err
	}
}

func (p *proxyListener) Close() error {
	err := p.Listener.Close()
	p.once.Do(func() { close(p.done) })
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
