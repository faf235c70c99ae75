package proxy_test

// What one connection can make the gateway hold, and for how long: the
// limits a hostile client meets (issue "A hostile tenant gets nothing",
// points 4 and 5). Each runs in a synctest bubble, so timeouts are exact.

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

// A client with one request held upstream (a long-poll Fetch, say) that
// pipelines requests the gateway answers itself cannot queue those answers
// without end: each holds a socket.max_in_flight slot, and once they are
// all taken the reader stops reading. Before the fix the gateway read all
// twenty and queued twenty answers.
func TestLocalAnswersHoldInFlightSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ev := &events{}
		local := &probe{name: "local", keys: []int16{int16(kmsg.DescribeGroups)}, ev: ev,
			verdict: func(r *proxy.Request) proxy.Verdict {
				dg, err := proxy.DecodeAs[*kmsg.DescribeGroupsRequest](r)
				if err != nil || dg.Groups[0] == "held" {
					return proxy.Verdict{}
				}
				resp := dg.ResponseKind().(*kmsg.DescribeGroupsResponse)
				g := kmsg.NewDescribeGroupsResponseGroup()
				g.Group = dg.Groups[0]
				resp.Groups = append(resp.Groups, g)
				return proxy.Verdict{Respond: resp}
			}}
		answer := describeGroupsAnswer(0)
		rg := newRigConfig(t, proxy.Config{MaxInFlight: 4}, func(req kmsg.Request) kmsg.Response {
			<-release // the held request, answered only when the test says
			return answer(req)
		}, local)
		c := rg.dial(t)
		held := describeGroups("held")
		heldCorr := c.send(held)
		const n = 20
		reqs := make([]*kmsg.DescribeGroupsRequest, n)
		corrs := make([]int32, n)
		for i := range n {
			reqs[i] = describeGroups(fmt.Sprintf("local-%d", i))
			corrs[i] = c.send(reqs[i])
		}
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock)
		synctest.Wait()
		// One slot for the held request, three for queued answers, and
		// the fourth answer waits for a slot: nothing more is read.
		if got := len(ev.with("local:request")) - 1; got != 4 {
			t.Fatalf("the gateway read %d requests behind the held one with max_in_flight 4, want 4 (3 queued + 1 waiting)", got)
		}
		unblock()
		if resp, err := c.recv(held, heldCorr); err != nil || groupsOf(resp)[0] != "held" {
			t.Fatalf("held request: %v, %v", resp, err)
		}
		for i := range n {
			resp, err := c.recv(reqs[i], corrs[i])
			if err != nil || groupsOf(resp)[0] != fmt.Sprintf("local-%d", i) {
				t.Fatalf("answer %d: %v, %v", i, resp, err)
			}
		}
	})
}

// Before a SASL login completes, a frame larger than Kafka's
// sasl.server.max.receive.size closes the connection as soon as its size
// is read — the gateway does not wait for, or allocate, the body. The same
// size is only a frame on a listener without SASL.
func TestFrameBeforeLoginCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRigConfig(t, proxy.Config{Listeners: []proxy.ListenerConfig{
			{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"},
			{Name: "PLAIN", Bootstrap: "127.0.0.1:0"},
		}}, describeGroupsAnswer(0))
		size := func(c *client, n uint32) {
			var sz [4]byte
			binary.BigEndian.PutUint32(sz[:], n)
			if _, err := c.c.Write(sz[:]); err != nil {
				t.Fatal(err)
			}
		}
		sasl := rg.dialListener(t, "SASL")
		size(sasl, 600<<10) // 600 KiB > 512 KiB; only the size is sent
		sasl.expectClosed()
		plain := rg.dialListener(t, "PLAIN")
		size(plain, 600<<10)
		synctest.Wait()
		if got := rg.closes.list(); len(got) != 1 || got[0] != proxy.ReasonFrameTooLarge {
			t.Fatalf("close reasons %v, want one frame_too_large (the SASL listener's)", got)
		}
	})
}

// An upstream response larger than socket.response_max_bytes closes its
// session instead of being buffered whole; a smaller one passes.
func TestResponseCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRigConfig(t, proxy.Config{MaxResponseSize: 4096}, describeGroupsAnswer(0))
		c := rg.dial(t)
		small := describeGroups("a", "b")
		if resp := c.roundTrip(small); len(groupsOf(resp)) != 2 {
			t.Fatalf("small response: %v", groupsOf(resp))
		}
		var many []string
		for i := range 200 {
			many = append(many, fmt.Sprintf("group-with-a-long-name-%04d", i))
		}
		big := describeGroups(many...)
		if resp, err := c.recv(big, c.send(big)); err == nil {
			t.Fatalf("a response over socket.response_max_bytes was passed: %d groups", len(groupsOf(resp)))
		}
		synctest.Wait()
		if got := rg.closes.list(); len(got) != 1 || got[0] != proxy.ReasonResponseTooLarge {
			t.Fatalf("close reasons %v, want response_too_large", got)
		}
	})
}

// closedAfter reads c until the gateway closes it and reports when,
// measured from start.
func closedAfter(c *client, start time.Time) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, c.c)
		done <- time.Since(start)
	}()
	return done
}

// A client that connects and sends nothing is closed after
// connections.max.idle.ms, to the nanosecond; one that sends a request
// every five minutes is not.
func TestIdleConnectionClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRigConfig(t, proxy.Config{IdleTimeout: 10 * time.Minute}, describeGroupsAnswer(0))
		start := time.Now()
		closed := closedAfter(rg.dial(t), start)
		busy := rg.dial(t)
		for range 4 {
			busy.roundTrip(describeGroups("ping"))
			time.Sleep(5 * time.Minute)
		}
		if d := <-closed; d != 10*time.Minute {
			t.Fatalf("the silent connection closed after %v, want exactly 10m", d)
		}
		busy.roundTrip(describeGroups("still-open")) // 20 minutes on
		if got := rg.closes.list(); len(got) != 1 || got[0] != proxy.ReasonIdle {
			t.Fatalf("close reasons %v, want one idle_timeout", got)
		}
	})
}

// The SASL login must complete within socket.handshake_timeout of the
// connection being accepted, however busy the client keeps it; and a TLS
// handshake trickled in a byte a second is cut at the same bound.
func TestHandshakeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca := testpki.NewCA(t, "handshake test CA")
		cert := ca.Server(t, "gateway", "127.0.0.1")
		rg := newRigConfig(t, proxy.Config{HandshakeTimeout: 10 * time.Second, Listeners: []proxy.ListenerConfig{
			{Name: "SASL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SASL_PLAINTEXT"},
			{Name: "SSL", Bootstrap: "127.0.0.1:0", SecurityProtocol: "SSL", TLS: auth.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile}},
		}}, describeGroupsAnswer(0))

		// Logged in never, though it sends ApiVersions every second.
		start := time.Now()
		sasl := rg.dialListener(t, "SASL")
		closed := closedAfter(sasl, start)
		var loginClosed time.Duration
	busy:
		for {
			av := kmsg.NewPtrApiVersionsRequest()
			sasl.corr++
			sasl.c.Write(sasl.f.AppendRequest(nil, av, sasl.corr))
			select {
			case loginClosed = <-closed:
				break busy
			case <-time.After(time.Second):
			}
		}
		if loginClosed != 10*time.Second {
			t.Fatalf("a client that never logs in was closed after %v, want exactly 10s", loginClosed)
		}

		// A TLS record header, then a byte a second.
		start = time.Now()
		tlsc := rg.dialListener(t, "SSL")
		closed = closedAfter(tlsc, start)
		tlsc.c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00})
		var tlsClosed time.Duration
	trickle:
		for {
			select {
			case tlsClosed = <-closed:
				break trickle
			case <-time.After(time.Second):
				tlsc.c.Write([]byte{0x01})
			}
		}
		if tlsClosed != 10*time.Second {
			t.Fatalf("a trickled TLS handshake was closed after %v, want exactly 10s", tlsClosed)
		}
		synctest.Wait()
		got := rg.closes.list()
		if len(got) != 2 || got[0] != proxy.ReasonHandshakeTimeout || got[1] != proxy.ReasonHandshakeTimeout {
			t.Fatalf("close reasons %v, want two handshake_timeout", got)
		}
	})
}

// A broker that stalls never hangs a client: a forwarded request not
// answered within upstream.request_timeout — beyond what the request lets
// the broker wait, a Fetch's max_wait_ms — closes the session, to the
// nanosecond, and holds nothing.
func TestUpstreamRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rg := newRigConfig(t, proxy.Config{RequestTimeout: 30 * time.Second}, func(kmsg.Request) kmsg.Response {
			return nil // a stalled broker: reads, never answers
		})
		start := time.Now()
		c := rg.dial(t)
		closed := closedAfter(c, start)
		c.send(describeGroups("stalled"))
		if d := <-closed; d != 30*time.Second {
			t.Fatalf("a stalled DescribeGroups closed the session after %v, want exactly 30s", d)
		}

		start = time.Now()
		f := rg.dial(t)
		closed = closedAfter(f, start)
		fetch := kmsg.NewPtrFetchRequest()
		fetch.Version, fetch.MaxWaitMillis, fetch.MaxBytes = 12, 10_000, 1<<20
		f.send(fetch)
		if d := <-closed; d != 40*time.Second {
			t.Fatalf("a stalled Fetch with max_wait_ms 10000 closed the session after %v, want exactly 40s", d)
		}
		synctest.Wait()
		if got := rg.closes.list(); len(got) != 2 || got[0] != proxy.ReasonUpstreamTimeout || got[1] != proxy.ReasonUpstreamTimeout {
			t.Fatalf("close reasons %v, want two upstream_timeout", got)
		}
	})
}

// served records the ServeHook's calls.
type served struct {
	mu    sync.Mutex
	calls []string
}

func (s *served) Served(_ *principal.ConnInfo, r *proxy.Request, respSize int, throttle time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf("%s size>0=%v throttle=%v", kmsg.NameForKey(r.Key), respSize > 0, throttle))
}

// Every answered request reaches the ServeHook once its answer is written,
// with the throttle the client was given — the broker's answers, the
// filters' own answers, and an acks=0 Produce when it is forwarded.
func TestServeHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := &served{}
		local := &probe{name: "local", keys: []int16{int16(kmsg.DescribeGroups)}, ev: &events{}, throttle: 2 * time.Second,
			verdict: func(r *proxy.Request) proxy.Verdict {
				dg, _ := proxy.DecodeAs[*kmsg.DescribeGroupsRequest](r)
				if dg.Groups[0] != "local" {
					return proxy.Verdict{}
				}
				return proxy.Verdict{Respond: dg.ResponseKind()}
			}}
		rg := newRigHooks(t, proxy.Config{}, []any{sv}, describeGroupsAnswer(0), local)
		c := rg.dial(t)
		c.roundTrip(describeGroups("forwarded"))
		time.Sleep(3 * time.Second) // the 2 s mute
		c.roundTrip(describeGroups("local"))
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks = 9, 0
		c.send(p)
		synctest.Wait()
		sv.mu.Lock()
		defer sv.mu.Unlock()
		want := []string{"DescribeGroups size>0=true throttle=2s", "DescribeGroups size>0=true throttle=0s", "Produce size>0=false throttle=0s"}
		if !slices.Equal(sv.calls, want) {
			t.Fatalf("served %q, want %q", sv.calls, want)
		}
	})
}
