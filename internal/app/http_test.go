package app

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestHTTPConfigValidate(t *testing.T) {
	base := "listeners:\n  - name: A\n    bootstrap: 127.0.0.1:1\n"
	for _, tc := range []struct{ yaml, want string }{
		{"http:\n  address: nope\n", `http.address "nope"`},
		{"http:\n  tls: {cert_file: c.pem}\n", "http.tls: cert_file and key_file are required"},
		{"http:\n  tls: {cert_file: c.pem, key_file: k.pem, client_auth: required}\n", "http.tls: client_auth required needs client_ca_file"},
		{"http:\n  ssl_principal_mapping_rules: 'RULE:(/x/'\n", "http.ssl_principal_mapping_rules"},
		{"http:\n  allowed_hosts: [localhost:9644]\n", `http.allowed_hosts: "localhost:9644" has a port`},
		{"http:\n  allowed_hosts: [127.0.0.1]\n", "IP addresses are always accepted"},
		{"http:\n  allowed_hosts: ['*.example.com']\n", "is not a host name"},
		{"http:\n  allowed_hosts: ['']\n", "is empty"},
		{"http:\n  open_endpoints: [/api/v1/audit]\n", `http.open_endpoints: "/api/v1/audit": want /metrics, /healthz or /readyz`},
		{"http:\n  read_header_timeout: -1s\n", "http.read_header_timeout must not be negative"},
		{"http:\n  idle_timeout: -1s\n", "http.idle_timeout must not be negative"},
	} {
		if _, err := Parse("t.yaml", strings.NewReader(base+tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	ok := base + `http:
  address: 0.0.0.0:9644
  tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem, client_auth: requested}
  ssl_principal_mapping_rules: RULE:^CN=(.*?),.*$/$1/
  allowed_hosts: [tollgate-admin.example.com, localhost]
  open_endpoints: [/healthz, /readyz]
  read_header_timeout: 5s
  read_timeout: 10s
  write_timeout: 20s
  idle_timeout: 1m
`
	c, err := Parse("t.yaml", strings.NewReader(ok))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.HTTP.OpenEndpoints) != 2 || c.HTTP.TLS.ClientAuth != "requested" {
		t.Fatalf("%+v", c.HTTP)
	}
	// open_endpoints: [] is "none", not "the default".
	c, err = Parse("t.yaml", strings.NewReader(base+"http:\n  open_endpoints: []\n"))
	if err != nil || c.HTTP.OpenEndpoints == nil || len(c.HTTP.OpenEndpoints) != 0 {
		t.Fatalf("open_endpoints: []: %#v %v", c.HTTP.OpenEndpoints, err)
	}
}

func TestHTTPServerBounds(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	s := newHTTPServer(HTTPConfig{}, http.NotFoundHandler(), log)
	if s.ReadHeaderTimeout != DefaultHTTPReadHeaderTimeout || s.ReadTimeout != DefaultHTTPReadTimeout ||
		s.WriteTimeout != DefaultHTTPWriteTimeout || s.IdleTimeout != DefaultHTTPIdleTimeout || s.MaxHeaderBytes != HTTPMaxHeaderBytes {
		t.Errorf("defaults: %+v", s)
	}
	s = newHTTPServer(HTTPConfig{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second}, http.NotFoundHandler(), log)
	if s.ReadHeaderTimeout != time.Second || s.ReadTimeout != 2*time.Second || s.WriteTimeout != 3*time.Second || s.IdleTimeout != 4*time.Second {
		t.Errorf("configured: %+v", s)
	}
}

// pipeListener hands out the server ends of net.Pipe connections.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9644} }

// closedBy reports whether c has been closed by the server, from a reader
// goroutine's result once the bubble is idle.
type reader struct {
	mu   sync.Mutex
	err  error
	done bool
	got  strings.Builder
}

func readAll(c net.Conn) *reader {
	r := &reader{}
	go func() {
		b, err := io.ReadAll(c)
		r.mu.Lock()
		r.got.Write(b)
		r.err, r.done = err, true
		r.mu.Unlock()
	}()
	return r
}

func (r *reader) closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// A client that trickles its headers is cut at read_header_timeout however
// steadily it sends (the deadline is for the whole header, not per byte);
// an idle kept-alive connection is closed at idle_timeout. In a synctest
// bubble: the clock is fake, so this is exact and takes no real time.
func TestHTTPServerCutsSlowClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
		srv := newHTTPServer(HTTPConfig{ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 5 * time.Second}, ok, slog.New(slog.DiscardHandler))
		ln := newPipeListener()
		go srv.Serve(ln)
		defer srv.Close()

		// Slowloris: one header byte every 100ms, forever.
		c := ln.dial()
		r := readAll(c)
		start := time.Now()
		trickle := "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 1000)
		for i := 0; i < len(trickle); i++ {
			if _, err := c.Write([]byte{trickle[i]}); err != nil {
				break // the server closed the connection
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if r.closed() {
				break
			}
		}
		el := time.Since(start)
		if !r.closed() {
			t.Fatal("a trickling client was never cut")
		}
		if el < 2*time.Second || el > 2100*time.Millisecond {
			t.Errorf("cut after %v of trickling, want read_header_timeout (2s)", el)
		}
		if strings.Contains(r.got.String(), "200 OK") {
			t.Errorf("the trickling client was served: %q", r.got.String())
		}
		c.Close()

		// A served connection left idle is closed at idle_timeout.
		c = ln.dial()
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("served request: %v %v", resp, err)
		}
		io.ReadAll(resp.Body)
		idleSince := time.Now()
		done := make(chan error, 1)
		go func() { _, err := br.ReadByte(); done <- err }()
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("closed before idle_timeout: %v", err)
		default:
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, io.EOF) {
				t.Errorf("idle connection: %v, want EOF", err)
			}
		default:
			t.Fatalf("idle connection still open after %v", time.Since(idleSince))
		}
		c.Close()
	})
}

// The examples in docs/config.md are valid configs, and the production
// example does not leave the admin port open: TLS, named hosts, metrics
// closed, no ANONYMOUS rights.
func TestConfigExamplesAreValid(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	var prod *Config
	for _, b := range blocks {
		if !strings.Contains(b[1], "listeners:") {
			continue // a fragment
		}
		c, err := Parse("docs/config.md", strings.NewReader(b[1]))
		if err != nil {
			t.Errorf("example does not parse: %v\n%s", err, b[1])
			continue
		}
		if c.HTTP.Address == "0.0.0.0:9644" {
			prod = &c
		}
	}
	if prod == nil {
		t.Fatal("no production example with the admin port on 0.0.0.0")
	}
	h, az := prod.HTTP, prod.Authorization
	if h.TLS == nil || len(h.AllowedHosts) == 0 || slices.Contains(h.OpenEndpoints, "/metrics") || h.OpenEndpoints == nil ||
		az.AllowAnonymousDescribe || slices.Contains(az.QuotaAdmins, "ANONYMOUS") || len(az.QuotaAdmins) == 0 {
		t.Errorf("the production example leaves the admin port open: http %+v, authorization %+v", h, az)
	}
}
