package kafkaapi

import (
	"regexp"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// ApiVersions (key 18), v0–v5.
//
// Forwarded to the broker the client's port stands for, and rewritten: the
// answer is clamped to what kmsg can parse (keys it does not know are
// dropped, every max lowered to kmsg's; min versions never raised), so a
// client negotiates only versions the gateway can read. On a listener that
// terminates SASL, SaslHandshake and SaslAuthenticate are advertised with
// Kafka's own ranges (0–1, 0–2) whatever the broker says, because Tollgate
// answers them; so are GetTelemetrySubscriptions and PushTelemetry (kmsg's
// ranges) on every listener while telemetry.enabled is on.
//
// Answered by Tollgate:
//   - a request newer than kmsg knows gets KIP-511's answer (v0 body,
//     UNSUPPORTED_VERSION, ApiVersions 0–max) — in the session's reader
//     (proxy/reader.go), before any filter;
//   - a request newer than the broker takes, as the cached answer of the
//     broker says, gets the same KIP-511 answer with the broker's range
//     (while the session has no upstream connection);
//   - while the session has no upstream connection (on every listener),
//     from the last answer this listener passed for the same broker, so a
//     client that has only sent ApiVersions — or never logs in — holds no
//     upstream connection. The client's own request is replayed upstream
//     first when the session dials (Verdict.Replay): the broker still sees
//     its KIP-511 software name and version, and its answer refreshes the
//     cache. A request the cache cannot answer for the broker (the
//     listener's first client, a newer version than cached, client
//     software names Kafka would refuse, KIP-1242 cluster/node ids other
//     than this broker's) is forwarded for the broker to judge.
//
// Differs from a broker: the advertised ranges are the intersection of the
// broker's and kmsg's.

// apiVersions is the ApiVersions filter: one per gateway.
type apiVersions struct {
	mu    sync.Mutex
	cache map[listenerNode]*kmsg.ApiVersionsResponse
	// plain and sasl are the ranges advertised whatever the broker says,
	// on listeners that do not and that do terminate SASL.
	plain, sasl []kmsg.ApiVersionsResponseApiKey
}

type listenerNode struct {
	listener string
	node     int32
}

// newAPIVersions makes the filter; extra are the ranges of APIs Tollgate
// answers itself on every listener.
func newAPIVersions(extra ...kmsg.ApiVersionsResponseApiKey) *apiVersions {
	return &apiVersions{cache: map[listenerNode]*kmsg.ApiVersionsResponse{},
		plain: extra, sasl: append(slices.Clone(saslVersions), extra...)}
}

func (*apiVersions) Name() string  { return "api-versions" }
func (*apiVersions) Keys() []int16 { return []int16{int16(kmsg.ApiVersions)} }

// saslVersions are the ranges a terminating listener advertises for the
// SASL APIs: Kafka's (librdkafka logs in only if SaslHandshake v0 is in the
// range; it then uses v1, the only version served).
var saslVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: int16(kmsg.SASLHandshake), MinVersion: 0, MaxVersion: 1},
	{ApiKey: int16(kmsg.SASLAuthenticate), MinVersion: 0, MaxVersion: 2},
}

// OnRequest answers an ApiVersions from the cache while the session has
// no upstream connection, and has the session replay it upstream when it
// opens one.
func (a *apiVersions) OnRequest(c proxy.Conn, r *proxy.Request) proxy.Verdict {
	if r.Version >= 3 {
		// The client's software, as Kafka registers it for the
		// connection (client-metrics subscriptions match on it).
		if av, err := proxy.DecodeAs[*kmsg.ApiVersionsRequest](r); err == nil && validSoftware(av) {
			c.Info().SoftwareName, c.Info().SoftwareVersion = av.ClientSoftwareName, av.ClientSoftwareVersion
		}
	}
	if c.Dialed() {
		return proxy.Verdict{}
	}
	if resp := a.tooNew(c, r); resp != nil {
		return proxy.Verdict{Respond: resp}
	}
	if resp := a.cached(c, r); resp != nil {
		return proxy.Verdict{Respond: resp, Replay: true}
	}
	return proxy.Verdict{}
}

// OnResponse clamps the broker's answer and remembers it.
func (a *apiVersions) OnResponse(c proxy.Conn, r *proxy.Response) error {
	override := a.plain
	if c.Listener().TerminatesSASL() {
		override = a.sasl
	}
	if err := wire.RewriteApiVersions(r.Buf, r.Req.Version, nil, override...); err != nil {
		return err
	}
	if resp, ok := r.Decode(); ok && resp.(*kmsg.ApiVersionsResponse).ErrorCode == 0 {
		a.mu.Lock()
		a.cache[listenerNode{c.Info().Listener, c.Info().NodeID}] = resp.(*kmsg.ApiVersionsResponse)
		a.mu.Unlock()
	}
	return nil
}

// softwareName is Kafka's ApiVersionsRequest validation of
// ClientSoftwareName and ClientSoftwareVersion (v3+).
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func validSoftware(av *kmsg.ApiVersionsRequest) bool {
	return softwareName.MatchString(av.ClientSoftwareName) && softwareName.MatchString(av.ClientSoftwareVersion)
}

// tooNew is KIP-511's answer to a version newer than the broker takes, as
// the broker's cached answer says (UNSUPPORTED_VERSION and its ApiVersions
// range, in a v0 body), or nil. Franz-go opens with ApiVersions v5, which
// Kafka 3.x does not take: without this every such client in front of it
// would open an upstream connection before it logs in, for the broker to
// say the same.
func (a *apiVersions) tooNew(c proxy.Conn, r *proxy.Request) *kmsg.ApiVersionsResponse {
	a.mu.Lock()
	cached := a.cache[listenerNode{c.Info().Listener, c.Info().NodeID}]
	a.mu.Unlock()
	if cached == nil {
		return nil
	}
	max := maxVersionOf(cached, int16(kmsg.ApiVersions))
	if max < 0 || r.Version <= max {
		return nil
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: int16(kmsg.ApiVersions), MinVersion: 0, MaxVersion: max}}
	return resp
}

// cached returns the answer to r from the cache, or nil when the broker
// must answer it.
func (a *apiVersions) cached(c proxy.Conn, r *proxy.Request) *kmsg.ApiVersionsResponse {
	a.mu.Lock()
	cached := a.cache[listenerNode{c.Info().Listener, c.Info().NodeID}]
	a.mu.Unlock()
	// The cached answer was decoded at its client's version: it holds
	// every field up to that version, no further.
	if cached == nil || r.Version > cached.Version || r.Version > maxVersionOf(cached, int16(kmsg.ApiVersions)) {
		return nil
	}
	av, err := proxy.DecodeAs[*kmsg.ApiVersionsRequest](r)
	if err != nil {
		return nil // the broker says what is wrong with it
	}
	if r.Version >= 3 && !validSoftware(av) {
		return nil
	}
	if r.Version >= 5 && (av.ClusterID != nil || av.NodeID != -1) {
		// KIP-1242: answered here only when it names both this broker
		// and this cluster; one without the other, or another broker
		// or cluster, is for the broker to judge (INVALID_REQUEST,
		// REBOOTSTRAP_REQUIRED).
		id, ok := c.ClusterID()
		if av.ClusterID == nil || av.NodeID == -1 || !ok || *av.ClusterID != id || av.NodeID != c.Info().NodeID {
			return nil
		}
	}
	resp := *cached
	resp.Version = r.Version
	resp.ThrottleMillis = 0
	return &resp
}

func maxVersionOf(r *kmsg.ApiVersionsResponse, key int16) int16 {
	for _, k := range r.ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	return -1
}
