package enforce

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/wire"
)

// pass passes r through the connection's filter as a session would: its
// request hook (a hold is waited out), forwarded at the clock's time, its
// answer after took, and the throttle hook. It returns the throttle.
func pass(t *testing.T, q proxy.Filter, c proxy.Conn, clk *clock, r *proxy.Request, took time.Duration) time.Duration {
	t.Helper()
	return passAnswered(t, q, c, clk, r, took, nil)
}

// passAnswered is pass with the answer's frame, if not nil, through the
// response hook first.
func passAnswered(t *testing.T, q proxy.Filter, c proxy.Conn, clk *clock, r *proxy.Request, took time.Duration, answer *proxy.Response) time.Duration {
	t.Helper()
	v := onRequest(q, c, r)
	if v.Close != "" || v.Respond != nil {
		t.Fatalf("%s: verdict %+v, want forwarded", kmsg.NameForKey(r.Key), v)
	}
	clk.advance(v.Hold)
	r.Forwarded = clk.now
	clk.advance(took)
	if answer != nil {
		if err := q.(proxy.ResponseHook).OnResponse(c, answer); err != nil {
			t.Fatalf("%s: the answer is refused: %v", kmsg.NameForKey(r.Key), err)
		}
	}
	return throttle(q, c, r, 100)
}

// requestRate is the client's request_percentage rate: percent of one
// thread over the window.
func requestRate(f *Filter, clk *clock, clientID string) float64 {
	r, _ := usage(f, clk.now, model.RequestPercentage, "", clientID)
	return r
}

// The request quota sees every API but those Kafka never charges at a
// client listener, and reads by content only those the other quotas (and
// JoinGroup's wait) need.
func TestRequestQuotaKeys(t *testing.T) {
	f, _ := newFilter(t)
	keys := f.Keys()
	for k := int16(0); k <= wire.MaxKey; k++ {
		known := kmsg.RequestForKey(k) != nil
		want := known && k != int16(kmsg.SASLHandshake) && k != int16(kmsg.SASLAuthenticate) && k != int16(kmsg.ApiVersions)
		if slices.Contains(keys, k) != want {
			t.Errorf("%s (key %d): seen %v, want %v", kmsg.NameForKey(k), k, !want, want)
		}
	}
	for _, k := range f.ByContent() {
		if !slices.Contains(keys, k) {
			t.Errorf("%s is read by content but not seen", kmsg.NameForKey(k))
		}
	}
}

// A client sending cheap requests as fast as it can — each takes the
// upstream 1 ms, the next is sent as soon as the throttle allows — is held
// to its request_percentage: over whole cycles of the sampled window, its
// share of the upstream's time is its quota, and no throttle exceeds the
// 1 s window. A client of another client-id on the same gateway, under no
// request quota, is never throttled.
func TestRequestQuotaHoldsClientToItsShare(t *testing.T) {
	const q = 10.0 // percent of one thread
	f, clk := newFilter(t, quotaSet{model.Entity{Client: model.Exact("hammer")}, model.RequestPercentage, q})
	c, fc := newConn(f, anonymous)
	oc, ofc := newConn(f, anonymous)
	start := clk.now
	var busy, measured time.Duration
	var worst time.Duration
	reqs := []func() kmsg.Request{
		func() kmsg.Request { return kmsg.NewPtrMetadataRequest() },
		func() kmsg.Request { return kmsg.NewPtrListOffsetsRequest() },
		func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxWaitMillis, r.MinBytes = 16, 0, 1 // an empty fetch, answered at once
			return r
		},
	}
	for i := 0; clk.now.Sub(start) < 66*time.Second; i++ {
		if i > 200_000 {
			t.Fatal("the loop does not end")
		}
		r := request(t, reqs[i%len(reqs)](), "hammer")
		began := clk.now
		th := pass(t, fc, c, clk, r, time.Millisecond)
		if began.Sub(start) >= 11*time.Second {
			busy += time.Millisecond
			measured += clk.now.Sub(began) + th
		}
		worst = max(worst, th)
		clk.advance(th) // the client waits (KIP-219); the gateway mutes it meanwhile
		if i%100 == 0 {
			// Someone else's request on the same gateway.
			if got := pass(t, ofc, oc, clk, request(t, kmsg.NewPtrMetadataRequest(), "other"), time.Millisecond); got != 0 {
				t.Fatalf("a client without a request quota was throttled %v", got)
			}
		}
	}
	share := 100 * busy.Seconds() / measured.Seconds()
	t.Logf("busy %v of %v after the first cycle: %.2f%% of a thread, quota %.0f%%; worst throttle %v", busy, measured, share, q, worst)
	if share < 0.9*q || share > 1.1*q {
		t.Errorf("the client took %.2f%% of the upstream's time, want %.0f%% ± 10%%", share, q)
	}
	if worst != time.Second {
		t.Errorf("worst throttle %v, want the 1 s window exactly (Kafka bounds it there)", worst)
	}
}

// What each request is charged: the upstream's time for it, less the wait
// it lets the broker take.
func TestRequestQuotaCharges(t *testing.T) {
	fetchReq := func(maxWait, minBytes int32) *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.MaxWaitMillis, r.MinBytes = 16, maxWait, minBytes
		return r
	}
	produceReq := func(acks int16) *kmsg.ProduceRequest {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TimeoutMillis = 9, acks, 1000
		return r
	}
	joinReq := func(v int16, member string) *kmsg.JoinGroupRequest {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version, r.Group, r.MemberID, r.ProtocolType = v, "g", member, "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 45_000, 300_000
		return r
	}
	joined := func(code int16) func(*proxy.Request) *proxy.Response {
		return func(r *proxy.Request) *proxy.Response {
			resp := kmsg.NewPtrJoinGroupResponse()
			resp.ErrorCode = code
			return proxytest.Response(r, resp)
		}
	}
	garbled := func(r *proxy.Request) *proxy.Response {
		a := proxytest.Response(r, kmsg.NewPtrJoinGroupResponse())
		a.Buf.B = a.Buf.B[:10]
		return a
	}
	shareReq := func(minBytes int32) *kmsg.ShareFetchRequest {
		r := kmsg.NewPtrShareFetchRequest()
		r.Version, r.GroupID, r.MaxWaitMillis, r.MinBytes, r.MaxBytes = 1, kmsg.StringPtr("g"), 500, minBytes, 1<<20
		return r
	}
	for _, tc := range []struct {
		name    string
		req     kmsg.Request
		maxWait time.Duration // what the proxy reads (Fetch, Produce, ShareFetch)
		took    time.Duration
		want    time.Duration
		answer  func(*proxy.Request) *proxy.Response // through the response hook
		cut     bool                                 // the request's body is cut short
	}{
		{"Metadata: all of it", kmsg.NewPtrMetadataRequest(), 0, 7 * time.Millisecond, 7 * time.Millisecond, nil, false},
		{"Fetch long poll expired: beyond max_wait and its slack", fetchReq(500, 1), 500 * time.Millisecond, 553 * time.Millisecond, 3 * time.Millisecond, nil, false},
		{"Fetch answered with data before max_wait: nothing", fetchReq(500, 1), 500 * time.Millisecond, 40 * time.Millisecond, 0, nil, false},
		{"Fetch min_bytes 0 is never held: all of it", fetchReq(30_000, 0), 30 * time.Second, 40 * time.Millisecond, 40 * time.Millisecond, nil, false},
		{"Fetch max_wait 0: all of it", fetchReq(0, 1), 0, 2 * time.Millisecond, 2 * time.Millisecond, nil, false},
		{"Produce acks=all: beyond timeout_ms and its slack", produceReq(-1), time.Second, 1120 * time.Millisecond, 20 * time.Millisecond, nil, false},
		{"Produce acks=all within timeout_ms: nothing", produceReq(-1), time.Second, 20 * time.Millisecond, 0, nil, false},
		{"Produce acks=1: all of it", produceReq(1), time.Second, 20 * time.Millisecond, 20 * time.Millisecond, nil, false},
		{"JoinGroup v9 joined: the rebalance is not charged", joinReq(9, "m-1"), 0, 3 * time.Second, 0, joined(0), false},
		{"JoinGroup v9 new member sent back for its id: charged", joinReq(9, ""), 0, 3 * time.Millisecond, 3 * time.Millisecond,
			joined(kerr.MemberIDRequired.Code), false},
		{"JoinGroup with a bogus member id and a huge timeout: charged", joinReq(9, "bogus"), 0, 2 * time.Millisecond, 2 * time.Millisecond,
			joined(kerr.UnknownMemberID.Code), false},
		{"JoinGroup whose answer cannot be read: charged", joinReq(9, "m-1"), 0, 4 * time.Millisecond, 4 * time.Millisecond, garbled, false},
		{"JoinGroup that cannot be read: forwarded, charged", joinReq(9, "m-1"), 0, 4 * time.Millisecond, 4 * time.Millisecond, nil, true},
		{"JoinGroup v0: the session timeout is its rebalance", joinReq(0, ""), 0, 45_110 * time.Millisecond, 10 * time.Millisecond, joined(0), false},
		{"ShareFetch beyond max_wait and its slack", shareReq(1), 500 * time.Millisecond, 555 * time.Millisecond, 5 * time.Millisecond, nil, false},
		{"ShareFetch min_bytes 0: all of it", shareReq(0), 500 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, clk := newFilter(t, defaultClient(model.RequestPercentage, 1000))
			c, q := newConn(f, anonymous)
			// The connection's first answer is free (it waited for the
			// upstream connection): spend it.
			pass(t, q, c, clk, request(t, kmsg.NewPtrMetadataRequest(), "app"), time.Hour)
			if got := requestRate(f, clk, "app"); got != 0 {
				t.Fatalf("the first answer was charged: rate %v", got)
			}
			r := request(t, tc.req, "app")
			if tc.req.Key() != int16(kmsg.ShareFetch) {
				r.MaxWait = tc.maxWait
			}
			if tc.cut {
				r.Payload = r.Payload[:r.BodyOffset+3]
			}
			var answer *proxy.Response
			if tc.answer != nil {
				answer = tc.answer(r)
			}
			passAnswered(t, q, c, clk, r, tc.took, answer)
			// Kafka's window: the time since the first sample, filled up
			// to (N−1)·W = 10 s; a sample older than N·W = 11 s is gone.
			elapsed := tc.took
			if elapsed >= 11*time.Second {
				elapsed = 0
			}
			window := elapsed + time.Duration(10-min(int64(elapsed/time.Second), 10))*time.Second
			want := tc.want.Seconds() * 100 / window.Seconds()
			if got := requestRate(f, clk, "app"); math.Abs(got-want) > 1e-9 {
				t.Errorf("rate %v%%, want %v%% (%v charged)", got, want, tc.want)
			}
		})
	}
}

// A throttled client's requests wait for its bucket's deadline on every
// connection (the gateway's shared deadline), and a Produce's response
// carries the larger of its byte-rate and its request throttle.
func TestRequestQuotaHoldsEveryConnection(t *testing.T) {
	f, clk := newFilter(t, defaultClient(model.RequestPercentage, 10), defaultClient(model.ProducerByteRate, 1000))
	c1, q1 := newConn(f, anonymous)
	c2, q2 := newConn(f, anonymous)
	pass(t, q1, c1, clk, request(t, kmsg.NewPtrMetadataRequest(), "app"), 0)
	// 1.5 s of the upstream's time: 150 %-s over 10 s is 15%, 50% over
	// the quota: (15 − 10)/10 × 10 s = 5 s, bounded by the 1 s window.
	if got := pass(t, q1, c1, clk, request(t, kmsg.NewPtrMetadataRequest(), "app"), 1500*time.Millisecond); got != time.Second {
		t.Fatalf("throttle %v, want the 1 s window", got)
	}
	clk.advance(400 * time.Millisecond)
	if v := onRequest(q2, c2, request(t, kmsg.NewPtrMetadataRequest(), "app")); v.Hold != 600*time.Millisecond {
		t.Errorf("another connection's request held %v, want the 600 ms left", v.Hold)
	}
	if v := onRequest(q2, c2, produce(t, 100, 1, "app")); v.Hold != 600*time.Millisecond {
		t.Errorf("a Produce held %v, want the 600 ms left", v.Hold)
	}
	if v := onRequest(q2, c2, request(t, kmsg.NewPtrMetadataRequest(), "other")); v.Hold != 0 {
		t.Errorf("another client held %v", v.Hold)
	}
	// A Produce under its byte rate still carries the request throttle.
	clk.advance(600 * time.Millisecond)
	r := produce(t, 100, 1, "app")
	if got := pass(t, q1, c1, clk, r, 10*time.Millisecond); got != time.Second {
		t.Errorf("Produce throttle %v, want the request quota's 1 s", got)
	}
}

// A Produce with acks=all carries its wait and its reservation in
// Reserved; a drop gives back the reservation alone.
func TestRequestQuotaReservedKeepsReservation(t *testing.T) {
	f, _ := newFilter(t, defaultClient(model.ProducerByteRate, 100), defaultClient(model.RequestPercentage, 10))
	c, q := newConn(f, anonymous)
	r := produce(t, 900, -1, "app")
	r.MaxWait = 30 * time.Second
	onRequest(q, c, r)
	if reservation(r) != 900 || allowedWait(r) != 30*time.Second {
		t.Fatalf("reserved %d, wait %v; want 900 and 30s", reservation(r), allowedWait(r))
	}
	r2 := produce(t, 900, -1, "app")
	onRequest(q, c, r2)
	r3 := produce(t, 900, -1, "app")
	if v := onRequest(q, c, r3); v.Hold != ms(8000) {
		t.Fatalf("held %v with 1800 bytes in flight, want 8s", v.Hold)
	}
	for _, r := range []*proxy.Request{r, r2, r3} {
		dropped(q, c, r)
	}
	if v := onRequest(q, c, produce(t, 900, -1, "app")); v.Hold != 0 {
		t.Errorf("held %v after the requests in flight were dropped", v.Hold)
	}
}
