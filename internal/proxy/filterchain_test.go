package proxy_test

// The filter chain inside a session: a real gateway with test filters, a
// tiny upstream that answers with kmsg, and a raw client socket, all on
// one in-memory network in a synctest bubble, so holds and throttles are
// measured on the bubble's clock, exactly.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit"
	"github.com/tollgate/tollgate/internal/wire"
)

// events records what the filters' hooks heard, in order.
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.all = append(e.all, s)
	e.mu.Unlock()
}

// with returns the events whose text contains s.
func (e *events) with(s string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, x := range e.all {
		if strings.Contains(x, s) {
			out = append(out, x)
		}
	}
	return out
}

// probe is a test filter with every hook: it records each call and
// returns the verdict and throttle it is given.
type probe struct {
	name     string
	keys     []int16
	verdict  func(r *proxy.Request) proxy.Verdict
	throttle time.Duration
	ev       *events
}

func (p *probe) Name() string  { return p.name }
func (p *probe) Keys() []int16 { return p.keys }

func (p *probe) OnRequest(_ proxy.Conn, r *proxy.Request) proxy.Verdict {
	p.ev.add(p.name + ":request")
	if p.verdict == nil {
		return proxy.Verdict{}
	}
	return p.verdict(r)
}

func (p *probe) OnResponse(_ proxy.Conn, r *proxy.Response) error {
	resp, ok := r.Decode()
	if !ok {
		return errors.New("cannot decode")
	}
	var groups []string
	if dg, ok := resp.(*kmsg.DescribeGroupsResponse); ok {
		for _, g := range dg.Groups {
			groups = append(groups, g.Group)
		}
	}
	p.ev.add(fmt.Sprintf("%s:response %v", p.name, groups))
	return nil
}

func (p *probe) Throttle(_ proxy.Conn, r *proxy.Request, size int) time.Duration {
	p.ev.add(p.name + ":throttle")
	return p.throttle
}

func (p *probe) Dropped(_ proxy.Conn, r *proxy.Request) { p.ev.add(p.name + ":dropped") }

// closes records the reasons connections closed with.
type closes struct {
	mu      sync.Mutex
	reasons []proxy.Reason
}

func (c *closes) Closed(_ *principal.ConnInfo, r proxy.Reason, _ error) {
	c.mu.Lock()
	c.reasons = append(c.reasons, r)
	c.mu.Unlock()
}

func (c *closes) list() []proxy.Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reasons)
}

// upstream is a tiny broker: it answers ApiVersions and Metadata (naming
// itself node 0), and every other request with answer's response; a nil
// response is never answered. It records the requests it receives.
type upstream struct {
	addr   string
	answer func(kmsg.Request) kmsg.Response
	mu     sync.Mutex
	got    []kmsg.Request
}

func (u *upstream) received(key int16) []kmsg.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []kmsg.Request
	for _, r := range u.got {
		if r.Key() == key {
			out = append(out, r)
		}
	}
	return out
}

func startUpstream(t *testing.T, nw *testkit.Network, answer func(kmsg.Request) kmsg.Response) *upstream {
	t.Helper()
	ln, err := nw.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u := &upstream{addr: ln.Addr().String(), answer: answer}
	host, portS, _ := net.SplitHostPort(u.addr)
	port, _ := strconv.Atoi(portS)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c, host, int32(port))
		}
	}()
	return u
}

func (u *upstream) serve(c net.Conn, host string, port int32) {
	defer c.Close()
	for {
		var sz [4]byte
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			return
		}
		p := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(c, p); err != nil {
			return
		}
		h, err := wire.ParseRequestHeader(p)
		if err != nil {
			return
		}
		req := kmsg.RequestForKey(h.Key)
		req.SetVersion(h.Version)
		if err := req.ReadFrom(p[h.BodyOffset:]); err != nil {
			return
		}
		var resp kmsg.Response
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			av := r.ResponseKind().(*kmsg.ApiVersionsResponse)
			for k := int16(0); k <= kmsg.MaxKey; k++ {
				if kr := kmsg.RequestForKey(k); kr != nil {
					av.ApiKeys = append(av.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: kr.MaxVersion()})
				}
			}
			resp = av
		case *kmsg.MetadataRequest:
			md := r.ResponseKind().(*kmsg.MetadataResponse)
			md.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: port}}
			md.ClusterID = kmsg.StringPtr("chain-test")
			resp = md
		default:
			u.mu.Lock()
			u.got = append(u.got, req)
			u.mu.Unlock()
			if resp = u.answer(req); resp == nil {
				continue
			}
		}
		resp.SetVersion(h.Version)
		buf := wire.EncodeResponse(h.CorrelationID, h.API.Flexible(h.Version), resp)
		_, err = c.Write(buf.B)
		buf.Release()
		if err != nil {
			return
		}
	}
}

// describeGroupsAnswer answers DescribeGroups with one group per name
// asked, and a throttle.
func describeGroupsAnswer(throttle int32) func(kmsg.Request) kmsg.Response {
	return func(req kmsg.Request) kmsg.Response {
		dg, ok := req.(*kmsg.DescribeGroupsRequest)
		if !ok {
			return nil // never answered
		}
		resp := dg.ResponseKind().(*kmsg.DescribeGroupsResponse)
		resp.ThrottleMillis = throttle
		for _, g := range dg.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = g
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
}

// rig is a gateway with a chain of test filters in front of an upstream.
type rig struct {
	nw     *testkit.Network
	gw     *proxy.Gateway
	up     *upstream
	closes *closes
}

// newRig must run inside the bubble.
func newRig(t *testing.T, answer func(kmsg.Request) kmsg.Response, chain ...proxy.Filter) *rig {
	t.Helper()
	return newRigConfig(t, proxy.Config{}, answer, chain...)
}

// newRigConfig is newRig with cfg's settings (its listeners and upstream
// are the rig's).
func newRigConfig(t *testing.T, cfg proxy.Config, answer func(kmsg.Request) kmsg.Response, chain ...proxy.Filter) *rig {
	t.Helper()
	return newRigHooks(t, cfg, nil, answer, chain...)
}

// newRigHooks is newRigConfig with more observer hooks.
func newRigHooks(t *testing.T, cfg proxy.Config, hooks []any, answer func(kmsg.Request) kmsg.Response, chain ...proxy.Filter) *rig {
	t.Helper()
	nw := &testkit.Network{}
	rg := &rig{nw: nw, up: startUpstream(t, nw, answer), closes: &closes{}}
	if len(cfg.Listeners) == 0 {
		cfg.Listeners = []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}}
	}
	cfg.Upstream = []string{rg.up.addr}
	gw, err := proxy.New(cfg,
		proxy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		proxy.WithListenFunc(nw.Listen), proxy.WithDialFunc(nw.DialContext),
		proxy.WithChain(chain), proxy.WithHooks(append([]any{rg.closes}, hooks...)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Shutdown(context.Background()) })
	rg.gw = gw
	return rg
}

// client is a raw client socket speaking kmsg.
type client struct {
	t    *testing.T
	c    net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

func (rg *rig) dial(t *testing.T) *client {
	t.Helper()
	return rg.dialAddr(t, rg.gw.Bootstrap())
}

// dialListener dials the bootstrap port of the listener named name.
func (rg *rig) dialListener(t *testing.T, name string) *client {
	t.Helper()
	return rg.dialAddr(t, rg.gw.BootstrapAddrs()[name])
}

func (rg *rig) dialAddr(t *testing.T, addr string) *client {
	t.Helper()
	c, err := rg.nw.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("chain-test"))}
}

func (c *client) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	if _, err := c.c.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
	return c.corr
}

// recv reads the answer to req, sent with corr; an error when the
// connection closed instead.
func (c *client) recv(req kmsg.Request, corr int32) (kmsg.Response, error) {
	c.t.Helper()
	var sz [4]byte
	if _, err := io.ReadFull(c.c, sz[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c.c, p); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(p)); got != corr {
		c.t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	off, err := wire.ResponseBodyOffset(p, req.Key(), wire.Lookup(req.Key()).Flexible(req.GetVersion()))
	if err != nil {
		c.t.Fatal(err)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(p[off:]); err != nil {
		c.t.Fatalf("response: %v", err)
	}
	return resp, nil
}

func (c *client) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp, err := c.recv(req, c.send(req))
	if err != nil {
		c.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed reads until the gateway closes the connection.
func (c *client) expectClosed() {
	c.t.Helper()
	if n, err := io.Copy(io.Discard, c.c); err != nil || n != 0 {
		c.t.Fatalf("read %d bytes (%v), want the connection closed without an answer", n, err)
	}
}

func describeGroups(groups ...string) *kmsg.DescribeGroupsRequest {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = groups
	return r
}

func groupsOf(resp kmsg.Response) []string {
	var out []string
	for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
		out = append(out, g.Group)
	}
	return out
}

// keyDG is the key the test filters declare.
var keyDG = []int16{int16(kmsg.DescribeGroups)}

func respondWith(groups ...string) func(*proxy.Request) proxy.Verdict {
	return func(*proxy.Request) proxy.Verdict {
		resp := kmsg.NewPtrDescribeGroupsResponse()
		for _, g := range groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = g
			resp.Groups = append(resp.Groups, rg)
		}
		return proxy.Verdict{Respond: resp}
	}
}

func appendGroup(name string) func(kmsg.Response) {
	return func(resp kmsg.Response) {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		dg := resp.(*kmsg.DescribeGroupsResponse)
		dg.Groups = append(dg.Groups, rg)
	}
}

// noHooks has a name and keys but no hook.
type noHooks struct{}

func (noHooks) Name() string  { return "no-hooks" }
func (noHooks) Keys() []int16 { return nil }

// misspelt means to be a request hook and is not.
type misspelt struct{ noHooks }

func (misspelt) Name() string                                        { return "misspelt" }
func (misspelt) OnRequests(proxy.Conn, *proxy.Request) proxy.Verdict { return proxy.Verdict{} }

// keyed is a request filter declaring keys.
type keyed struct{ keys []int16 }

func (k keyed) Name() string                                     { return "keyed" }
func (k keyed) Keys() []int16                                    { return k.keys }
func (keyed) OnRequest(proxy.Conn, *proxy.Request) proxy.Verdict { return proxy.Verdict{} }

// New refuses a chain with a filter that has no hook (a misspelt method
// is an error at start-up, not a filter that never runs), a key kmsg does
// not know, or a nil filter.
func TestChainRefused(t *testing.T) {
	cfg := proxy.Config{
		Listeners: []proxy.ListenerConfig{{Name: "PLAINTEXT", Bootstrap: "127.0.0.1:0"}},
		Upstream:  []string{"127.0.0.1:1"},
	}
	for _, tc := range []struct {
		name  string
		chain proxy.Chain
		err   string // "" accepted
	}{
		{"no hook", proxy.Chain{noHooks{}}, "no-hooks"},
		{"a misspelt hook", proxy.Chain{&probe{name: "ok", ev: &events{}}, misspelt{}}, "misspelt"},
		{"a negative key", proxy.Chain{keyed{[]int16{0, -1}}}, "-1"},
		{"a key past kmsg's", proxy.Chain{keyed{[]int16{wire.MaxKey + 1}}}, strconv.Itoa(wire.MaxKey + 1)},
		{"a nil filter", proxy.Chain{nil}, "nil"},
		{"every key kmsg knows", proxy.Chain{keyed{[]int16{0, wire.MaxKey}}, &probe{name: "all", ev: &events{}}}, ""},
		{"no filter", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proxy.New(cfg, proxy.WithChain(tc.chain))
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && err == nil:
				t.Error("accepted")
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Errorf("error %q does not say %q", err, tc.err)
			}
		})
	}
}

// The first filter that answers ends the chain: later filters do not see
// the request, the broker does not get it, response hooks do not run; the
// drop hooks of the filters that saw it hear that it will not be answered.
func TestChainRespondEndsChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: respondWith("from-B")},
			&probe{name: "C", keys: keyDG, ev: ev, verdict: respondWith("from-C")},
		)
		c := rg.dial(t)
		if got := groupsOf(c.roundTrip(describeGroups("g"))); !slices.Equal(got, []string{"from-B"}) {
			t.Errorf("client got groups %v, want B's answer", got)
		}
		synctest.Wait()
		if got, want := ev.with(":"), []string{"A:request", "B:request", "A:dropped", "B:dropped"}; !slices.Equal(got, want) {
			t.Errorf("hooks heard %v, want %v", got, want)
		}
		if n := len(rg.up.received(int16(kmsg.DescribeGroups))); n != 0 {
			t.Errorf("the broker got %d DescribeGroups", n)
		}
	})
}

// The first filter that closes ends the chain and the connection.
func TestChainCloseEndsChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: func(*proxy.Request) proxy.Verdict { return proxy.Verdict{Close: proxy.ReasonBadFrame} }},
			&probe{name: "C", keys: keyDG, ev: ev, verdict: respondWith("from-C")},
		)
		c := rg.dial(t)
		c.send(describeGroups("g"))
		c.expectClosed()
		synctest.Wait()
		if got, want := ev.with(":"), []string{"A:request", "B:request", "A:dropped", "B:dropped"}; !slices.Equal(got, want) {
			t.Errorf("hooks heard %v, want %v", got, want)
		}
		if got := rg.closes.list(); !slices.Equal(got, []proxy.Reason{proxy.ReasonBadFrame}) {
			t.Errorf("closed with %v, want B's reason", got)
		}
		if n := len(rg.up.received(int16(kmsg.DescribeGroups))); n != 0 {
			t.Errorf("the broker got %d DescribeGroups", n)
		}
	})
}

// One filter may forward a rewritten request; the Merge functions compose,
// the later filter's applied first (it is nearer the broker), before the
// response hooks, which run in reverse chain order.
func TestChainForwardAndMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: func(*proxy.Request) proxy.Verdict {
				return proxy.Verdict{Merge: appendGroup("merged-by-A")}
			}},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: func(r *proxy.Request) proxy.Verdict {
				return proxy.Verdict{Forward: describeGroups("rewritten"), Merge: appendGroup("merged-by-B")}
			}},
			&probe{name: "C", keys: keyDG, ev: ev},
		)
		c := rg.dial(t)
		got := groupsOf(c.roundTrip(describeGroups("original")))
		if want := []string{"rewritten", "merged-by-B", "merged-by-A"}; !slices.Equal(got, want) {
			t.Errorf("client got groups %v, want %v", got, want)
		}
		sent := rg.up.received(int16(kmsg.DescribeGroups))
		if len(sent) != 1 || !slices.Equal(sent[0].(*kmsg.DescribeGroupsRequest).Groups, []string{"rewritten"}) || sent[0].GetVersion() != 5 {
			t.Errorf("the broker got %v, want B's rewrite at the client's version", sent)
		}
		synctest.Wait()
		merged := "[rewritten merged-by-B merged-by-A]"
		want := []string{"A:request", "B:request", "C:request",
			"C:response " + merged, "B:response " + merged, "A:response " + merged,
			"A:throttle", "B:throttle", "C:throttle"}
		if got := ev.with(":"); !slices.Equal(got, want) {
			t.Errorf("hooks heard\n%v\nwant\n%v", got, want)
		}
		// The connection goes on.
		if got := groupsOf(c.roundTrip(describeGroups("again"))); len(got) != 3 {
			t.Errorf("second request: %v", got)
		}
	})
}

// Two filters rewriting the same request is a bug in the chain: the
// connection closes instead of forwarding either rewrite.
func TestChainTwoForwardsClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		fwd := func(g string) func(*proxy.Request) proxy.Verdict {
			return func(*proxy.Request) proxy.Verdict { return proxy.Verdict{Forward: describeGroups(g)} }
		}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: fwd("by-A")},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: fwd("by-B")},
		)
		c := rg.dial(t)
		c.send(describeGroups("g"))
		c.expectClosed()
		synctest.Wait()
		if got := rg.closes.list(); !slices.Equal(got, []proxy.Reason{proxy.ReasonRefused}) {
			t.Errorf("closed with %v, want %s", got, proxy.ReasonRefused)
		}
		if n := len(rg.up.received(int16(kmsg.DescribeGroups))); n != 0 {
			t.Errorf("the broker got %d DescribeGroups", n)
		}
		if got := ev.with("dropped"); !slices.Equal(got, []string{"A:dropped", "B:dropped"}) {
			t.Errorf("drop hooks heard %v", got)
		}
	})
}

// Hold and Throttle take the largest of the chain's: the request waits
// for the largest hold; the response carries the largest throttle (and
// the broker's, if larger) and the connection is muted for the chain's.
func TestChainHoldAndThrottleLargest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		hold := func(h, th time.Duration) func(*proxy.Request) proxy.Verdict {
			return func(*proxy.Request) proxy.Verdict { return proxy.Verdict{Hold: h, Throttle: th} }
		}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: hold(time.Second, 2*time.Second)},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: hold(3*time.Second, 500*time.Millisecond)},
			&probe{name: "C", keys: keyDG, ev: ev, throttle: 1500 * time.Millisecond}, // a throttle hook
		)
		c := rg.dial(t)
		start := time.Now()
		resp := c.roundTrip(describeGroups("g")).(*kmsg.DescribeGroupsResponse)
		first := time.Now()
		if d := first.Sub(start); d != 3*time.Second {
			t.Errorf("answered after %v, want the largest hold, 3s", d)
		}
		if resp.ThrottleMillis != 2000 {
			t.Errorf("throttle_time_ms %d, want 2000 (the largest of 2s, 0.5s and the hook's 1.5s)", resp.ThrottleMillis)
		}
		// The next request is read once the 2s mute ends, then held 3s.
		c.roundTrip(describeGroups("g"))
		if d := time.Since(first); d != 5*time.Second {
			t.Errorf("the next answer came %v later, want 5s (2s muted, 3s held)", d)
		}
	})
}

// A broker's larger throttle reaches the client; the connection is muted
// for the chain's own (KIP-219), here the throttle hook's.
func TestChainThrottleHookAndBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(9000),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: func(*proxy.Request) proxy.Verdict { return proxy.Verdict{Throttle: time.Second} }},
			&probe{name: "B", keys: keyDG, ev: ev, throttle: 4 * time.Second},
		)
		c := rg.dial(t)
		resp := c.roundTrip(describeGroups("g")).(*kmsg.DescribeGroupsResponse)
		first := time.Now()
		if resp.ThrottleMillis != 9000 {
			t.Errorf("throttle_time_ms %d, want the broker's 9000", resp.ThrottleMillis)
		}
		c.roundTrip(describeGroups("g"))
		if d := time.Since(first); d != 4*time.Second {
			t.Errorf("muted %v, want the chain's largest, 4s", d)
		}
	})
}

// A local answer carries the chain's throttle, and mutes the connection.
func TestChainRespondCarriesThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: func(*proxy.Request) proxy.Verdict { return proxy.Verdict{Throttle: 3 * time.Second} }},
			&probe{name: "B", keys: keyDG, ev: ev, verdict: respondWith("local")},
		)
		c := rg.dial(t)
		resp := c.roundTrip(describeGroups("g")).(*kmsg.DescribeGroupsResponse)
		first := time.Now()
		if resp.ThrottleMillis != 3000 || !slices.Equal(groupsOf(resp), []string{"local"}) {
			t.Errorf("local answer %v throttle %d, want B's answer with 3000", groupsOf(resp), resp.ThrottleMillis)
		}
		c.roundTrip(describeGroups("g"))
		if d := time.Since(first); d != 3*time.Second {
			t.Errorf("muted %v, want 3s", d)
		}
	})
}

// Drop hooks hear about forwarded requests whose connection closes before
// their answer, and about a held request cut short by a shutdown.
func TestChainDroppedOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, func(kmsg.Request) kmsg.Response { return nil }, // never answers
			&probe{name: "A", keys: keyDG, ev: ev},
		)
		c := rg.dial(t)
		c.send(describeGroups("g"))
		c.send(describeGroups("h"))
		synctest.Wait()
		if n := len(rg.up.received(int16(kmsg.DescribeGroups))); n != 2 {
			t.Fatalf("the broker got %d requests, want 2", n)
		}
		if got := ev.with("dropped"); len(got) != 0 {
			t.Fatalf("dropped %v while in flight", got)
		}
		c.c.Close()
		synctest.Wait()
		if got := ev.with("dropped"); !slices.Equal(got, []string{"A:dropped", "A:dropped"}) {
			t.Errorf("drop hooks heard %v, want both requests in flight", got)
		}
		if got := ev.with("throttle"); len(got) != 0 {
			t.Errorf("throttle hooks heard %v for requests never answered", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		rg := newRig(t, describeGroupsAnswer(0),
			&probe{name: "A", keys: keyDG, ev: ev, verdict: func(*proxy.Request) proxy.Verdict { return proxy.Verdict{Hold: time.Hour} }},
		)
		c := rg.dial(t)
		c.send(describeGroups("g"))
		synctest.Wait()
		if err := rg.gw.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
		if got := ev.with(":"); !slices.Equal(got, []string{"A:request", "A:dropped"}) {
			t.Errorf("hooks heard %v, want the held request dropped", got)
		}
		if n := len(rg.up.received(int16(kmsg.DescribeGroups))); n != 0 {
			t.Errorf("the held request reached the broker")
		}
	})
}

// counting is a ConnFilter: each connection gets its own instance.
type counting struct {
	mu   sync.Mutex
	made int
}

func (*counting) Name() string  { return "counting" }
func (*counting) Keys() []int16 { return keyDG }
func (f *counting) ForConn(proxy.Conn) proxy.Filter {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made++
	return &perConn{id: f.made}
}

// OnRequest of the shared instance must never run.
func (*counting) OnRequest(proxy.Conn, *proxy.Request) proxy.Verdict {
	return proxy.Verdict{Close: proxy.ReasonRefused}
}

type perConn struct{ id, n int }

func (*perConn) Name() string  { return "counting" }
func (*perConn) Keys() []int16 { return keyDG }
func (p *perConn) OnRequest(proxy.Conn, *proxy.Request) proxy.Verdict {
	p.n++
	return respondWith(fmt.Sprintf("conn-%d-request-%d", p.id, p.n))(nil)
}

// A ConnFilter's hooks run on each connection's own instance.
func TestChainConnFilter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &counting{}
		rg := newRig(t, describeGroupsAnswer(0), f)
		c1, c2 := rg.dial(t), rg.dial(t)
		var got []string
		for _, c := range []*client{c1, c1, c2, c1, c2} {
			got = append(got, groupsOf(c.roundTrip(describeGroups("g")))...)
		}
		want := []string{"conn-1-request-1", "conn-1-request-2", "conn-2-request-1", "conn-1-request-3", "conn-2-request-2"}
		if !slices.Equal(got, want) {
			t.Errorf("answers %v, want %v", got, want)
		}
	})
}
