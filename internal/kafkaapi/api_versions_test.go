package kafkaapi

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/proxy/proxytest"
	"github.com/tollgate/tollgate/internal/wire"
)

// Listener flavours for ApiVersions: the SASL ranges and the pre-login
// cache depend on whether the listener terminates SASL.
func plaintextConn() *proxytest.Conn { return connAs(principal.AnonymousPrincipal) }

func terminatingConn() *proxytest.Conn {
	c := connAs(principal.AnonymousPrincipal)
	c.Config.SecurityProtocol = proxy.ProtocolSASLPlaintext
	c.Unauthenticated = true
	return c
}

func passthroughConn() *proxytest.Conn {
	c := terminatingConn()
	c.Config.SASL.Mode = proxy.SASLPassthrough
	return c
}

type apiRange = kmsg.ApiVersionsResponseApiKey

// brokerVersions is an upstream's ApiVersions answer: some keys kmsg does
// not know, maxima beyond kmsg's, a range that is empty once clamped, a
// min that must not be raised, and SASL ranges of its own.
func brokerVersions() []apiRange {
	return []apiRange{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 99},              // max lowered to kmsg's
		{ApiKey: 1, MinVersion: 4, MaxVersion: 5},               // kept as is
		{ApiKey: 3, MinVersion: 50, MaxVersion: 60},             // min beyond kmsg's max: dropped
		{ApiKey: 17, MinVersion: 1, MaxVersion: 1},              //
		{ApiKey: 18, MinVersion: 0, MaxVersion: 9},              // lowered
		{ApiKey: kmsg.MaxKey + 1, MinVersion: 0, MaxVersion: 1}, // unknown to kmsg: dropped
		{ApiKey: 1000, MinVersion: 0, MaxVersion: 3},            // unknown: dropped
	}
}

// upstreamVersions answers an ApiVersions request as a broker would, with
// keys and a throttle.
func upstreamVersions(keys []apiRange, throttle int32) func(kmsg.Request) kmsg.Response {
	return func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ApiKeys = slices.Clone(keys)
		resp.ThrottleMillis = throttle
		return resp
	}
}

func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = version
	r.ClientSoftwareName, r.ClientSoftwareVersion = "franz-go", "1.22.3"
	return r
}

func TestApiVersionsClamp(t *testing.T) {
	max := func(k int16) int16 { return kmsg.RequestForKey(k).MaxVersion() }
	clamped := []apiRange{
		{ApiKey: 0, MinVersion: 3, MaxVersion: max(0)},
		{ApiKey: 1, MinVersion: 4, MaxVersion: 5},
	}
	for _, tc := range []struct {
		name string
		conn *proxytest.Conn
		want []apiRange
	}{
		{"plaintext listener: the broker's SASL ranges", plaintextConn(),
			append(slices.Clone(clamped), apiRange{ApiKey: 17, MinVersion: 1, MaxVersion: 1}, apiRange{ApiKey: 18, MaxVersion: max(18)})},
		{"pass-through listener: the broker's SASL ranges", passthroughConn(),
			append(slices.Clone(clamped), apiRange{ApiKey: 17, MinVersion: 1, MaxVersion: 1}, apiRange{ApiKey: 18, MaxVersion: max(18)})},
		{"terminating listener: Kafka's SASL ranges, the ones Tollgate serves", terminatingConn(),
			append(slices.Clone(clamped), apiRange{ApiKey: 17, MinVersion: 0, MaxVersion: 1}, apiRange{ApiKey: 18, MaxVersion: max(18)},
				apiRange{ApiKey: 36, MinVersion: 0, MaxVersion: 2})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int16{0, 3, 4} {
				x := pass(t, newAPIVersions(), tc.conn, apiVersionsReq(v), upstreamVersions(brokerVersions(), 0))
				if x.answeredLocally() {
					t.Fatalf("v%d: answered from an empty cache", v)
				}
				got := x.resp.(*kmsg.ApiVersionsResponse).ApiKeys
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("v%d: client sees\n%v\nwant\n%v", v, got, tc.want)
				}
			}
		})
	}
}

// primed returns an ApiVersions filter whose cache holds the answer a
// terminating listener passed at version v, and that answer.
func primed(t *testing.T, v int16, keys []apiRange) (*apiVersions, *kmsg.ApiVersionsResponse) {
	t.Helper()
	f := newAPIVersions()
	x := pass(t, f, terminatingConn(), apiVersionsReq(v), upstreamVersions(keys, 250))
	if x.answeredLocally() {
		t.Fatal("answered from an empty cache")
	}
	return f, x.resp.(*kmsg.ApiVersionsResponse)
}

func TestApiVersionsCacheBeforeDial(t *testing.T) {
	f, passed := primed(t, 4, brokerVersions())
	other := func(edit func(c *proxytest.Conn)) *proxytest.Conn {
		c := terminatingConn()
		edit(c)
		return c
	}
	named := func(v int16, name, version string) *kmsg.ApiVersionsRequest {
		r := apiVersionsReq(v)
		r.ClientSoftwareName, r.ClientSoftwareVersion = name, version
		return r
	}
	for _, tc := range []struct {
		name     string
		conn     *proxytest.Conn
		req      *kmsg.ApiVersionsRequest
		answered bool
	}{
		{"unauthenticated, same listener and broker, same version", terminatingConn(), apiVersionsReq(4), true},
		{"an older version", terminatingConn(), apiVersionsReq(3), true},
		{"v0", terminatingConn(), apiVersionsReq(0), true},
		{"a version newer than the cached answer's", terminatingConn(), apiVersionsReq(5), false},
		{"after the login, before the session dialed", other(func(c *proxytest.Conn) { c.Unauthenticated = false }), apiVersionsReq(4), true},
		{"once the session dialed its broker", other(func(c *proxytest.Conn) { c.Upstream = true }), apiVersionsReq(4), false},
		{"another broker", other(func(c *proxytest.Conn) { c.ConnInfo.NodeID = 1 }), apiVersionsReq(4), false},
		{"the bootstrap port", other(func(c *proxytest.Conn) { c.ConnInfo.NodeID = -1 }), apiVersionsReq(4), false},
		{"another listener", other(func(c *proxytest.Conn) { c.ConnInfo.Listener = "INTERNAL" }), apiVersionsReq(4), false},
		{"a pass-through listener", other(func(c *proxytest.Conn) { c.Config.SASL.Mode = proxy.SASLPassthrough }), apiVersionsReq(4), true},
		{"a plaintext listener", other(func(c *proxytest.Conn) { c.Config.SecurityProtocol = ""; c.Unauthenticated = false }), apiVersionsReq(4), true},
		{"empty software name", terminatingConn(), named(3, "", "1.0"), false},
		{"software name with a space", terminatingConn(), named(3, "my client", "1.0"), false},
		{"software name starting with a dash", terminatingConn(), named(3, "-client", "1.0"), false},
		{"software version ending with a dot", terminatingConn(), named(3, "client", "1.0."), false},
		{"empty software version", terminatingConn(), named(4, "client", ""), false},
		{"v2 has no software names to check", terminatingConn(), named(2, "", ""), true},
		{"dots, dashes and digits", terminatingConn(), named(4, "apache-kafka-java", "3.9.0-rc.1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var up func(kmsg.Request) kmsg.Response
			if !tc.answered {
				up = upstreamVersions(brokerVersions(), 0)
			}
			x := pass(t, f, tc.conn, tc.req, up)
			if x.answeredLocally() != tc.answered {
				t.Fatalf("answered locally = %v, want %v", x.answeredLocally(), tc.answered)
			}
			if !tc.answered {
				return
			}
			if !x.verdict.Replay {
				t.Error("answered from the cache without Replay: the broker would never see the client's software name")
			}
			got := x.resp.(*kmsg.ApiVersionsResponse)
			if got.Version != tc.req.Version || got.ThrottleMillis != 0 || got.ErrorCode != 0 {
				t.Errorf("cached answer v%d throttle %d error %d, want v%d throttle 0 error 0", got.Version, got.ThrottleMillis, got.ErrorCode, tc.req.Version)
			}
			if fmt.Sprint(got.ApiKeys) != fmt.Sprint(passed.ApiKeys) {
				t.Errorf("cached answer lists\n%v\nthe broker's (clamped) answer was\n%v", got.ApiKeys, passed.ApiKeys)
			}
		})
	}
}

// An answer at a version is cached only up to the version the broker
// advertises for ApiVersions itself; a newer one gets KIP-511's answer with
// the broker's range (a v0 body: the session encodes it so), as the broker
// would give, without a dial and without a replay.
func TestApiVersionsCacheBrokerMax(t *testing.T) {
	keys := []apiRange{{ApiKey: 0, MaxVersion: 9}, {ApiKey: 18, MaxVersion: 3}}
	f, _ := primed(t, 4, keys)
	x := pass(t, f, terminatingConn(), apiVersionsReq(4), nil)
	if !x.answeredLocally() {
		t.Fatal("v4 to a broker that takes ApiVersions up to v3 was forwarded")
	}
	got := x.resp.(*kmsg.ApiVersionsResponse)
	if got.ErrorCode != kerr.UnsupportedVersion.Code || fmt.Sprint(got.ApiKeys) != fmt.Sprint([]kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}) || x.verdict.Replay {
		t.Errorf("v4 to a v3 broker: error %d, keys %v, replay %v; want UNSUPPORTED_VERSION, [{18 0 3}], no replay", got.ErrorCode, got.ApiKeys, x.verdict.Replay)
	}
	if x := pass(t, f, terminatingConn(), apiVersionsReq(3), nil); !x.answeredLocally() {
		t.Error("v3 not answered from the cache")
	}
}

// KIP-1242 (v5): a request naming a cluster and a node is answered from the
// cache only when it names both, and they are this broker's.
func TestApiVersionsCacheClusterAndNode(t *testing.T) {
	f, _ := primed(t, 5, brokerVersions())
	for _, tc := range []struct {
		name     string
		cluster  *string
		node     int32
		known    string // the cluster id the gateway knows ("" none)
		answered bool
	}{
		{"neither", nil, -1, "cluster-A", true},
		{"both, this broker's", kmsg.StringPtr("cluster-A"), 0, "cluster-A", true},
		{"cluster without node", kmsg.StringPtr("cluster-A"), -1, "cluster-A", false},
		{"node without cluster", nil, 0, "cluster-A", false},
		{"another cluster", kmsg.StringPtr("cluster-B"), 0, "cluster-A", false},
		{"another node", kmsg.StringPtr("cluster-A"), 1, "cluster-A", false},
		{"cluster id not known yet", kmsg.StringPtr("cluster-A"), 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := terminatingConn()
			c.Cluster = tc.known
			req := apiVersionsReq(5)
			req.ClusterID, req.NodeID = tc.cluster, tc.node
			var up func(kmsg.Request) kmsg.Response
			if !tc.answered {
				up = func(sent kmsg.Request) kmsg.Response {
					// Forwarded untouched, for the broker to judge.
					s := sent.(*kmsg.ApiVersionsRequest)
					if str(s.ClusterID) != str(tc.cluster) || s.NodeID != tc.node {
						t.Errorf("forwarded cluster %s node %d, want %s %d", str(s.ClusterID), s.NodeID, str(tc.cluster), tc.node)
					}
					r := s.ResponseKind().(*kmsg.ApiVersionsResponse)
					r.ErrorCode = kerr.InvalidRequest.Code
					return r
				}
			}
			if x := pass(t, f, c, req, up); x.answeredLocally() != tc.answered {
				t.Fatalf("answered locally = %v, want %v", x.answeredLocally(), tc.answered)
			}
		})
	}
}

// Error answers are passed on and never cached: KIP-511's v0 body with
// UNSUPPORTED_VERSION, and an error at the request's version.
func TestApiVersionsErrorNotCached(t *testing.T) {
	f := newAPIVersions()
	c := terminatingConn()

	// KIP-511: the broker answers a version it does not know with a v0
	// body, whatever the request's version.
	r, err := proxytest.Request(apiVersionsReq(4), 3)
	if err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.ErrorCode = kerr.UnsupportedVersion.Code
	v0.ApiKeys = []apiRange{{ApiKey: 18, MaxVersion: 3}}
	buf := wire.EncodeResponse(r.CorrelationID, false, v0)
	if err := f.OnResponse(c, &proxy.Response{Req: r, Buf: buf}); err != nil {
		t.Fatalf("the KIP-511 answer: %v", err)
	}
	got := kmsg.NewPtrApiVersionsResponse()
	if err := got.ReadFrom(buf.B[8:]); err != nil || got.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("the KIP-511 answer reaches the client as %+v (%v), want a v0 body with UNSUPPORTED_VERSION", got, err)
	}

	// An error answer at the request's version.
	x := pass(t, f, c, apiVersionsReq(3), func(req kmsg.Request) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	})
	if x.answeredLocally() {
		t.Fatal("answered from an empty cache")
	}
	for _, v := range []int16{0, 3} {
		if x := pass(t, f, c, apiVersionsReq(v), upstreamVersions(brokerVersions(), 0)); x.answeredLocally() {
			t.Fatalf("v%d answered from the cache after error answers only", v)
		}
	}
}
