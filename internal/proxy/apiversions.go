package proxy

import (
	"regexp"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/wire"
)

// Before a client has logged in on a listener that terminates SASL, its
// ApiVersions is answered from the last ApiVersions response this listener
// passed for the same broker, so the gateway opens no upstream connection
// for a client that never authenticates: a flood of unauthenticated
// connections never reaches the cluster. Until the listener has seen one
// (its first client), or when the request asks the broker something the
// cache cannot answer for it, the request is forwarded as before.

// apiVersionsCache holds one listener's last ApiVersions answer per node,
// as the listener rewrote it (clamped, SASL ranges its own).
type apiVersionsCache struct {
	mu    sync.Mutex
	nodes map[int32]*kmsg.ApiVersionsResponse
}

func (c *apiVersionsCache) store(node int32, r *kmsg.ApiVersionsResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil {
		c.nodes = make(map[int32]*kmsg.ApiVersionsResponse)
	}
	c.nodes[node] = r
}

func (c *apiVersionsCache) load(node int32) *kmsg.ApiVersionsResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[node]
}

// rememberApiVersions caches a successful, already rewritten ApiVersions
// response.
func (s *session) rememberApiVersions(buf *wire.Buffer, pr *pending) {
	if s.ln.cfg.saslMode() != SASLTerminate || !s.ln.cfg.usesSASL() {
		return
	}
	r, ok := decodeResponse[*kmsg.ApiVersionsResponse](buf, pr)
	if !ok || r.ErrorCode != 0 {
		return
	}
	s.ln.apiVersions.store(s.info.NodeID, r)
}

// softwareName is Kafka's ApiVersionsRequest validation of
// ClientSoftwareName and ClientSoftwareVersion (v3+).
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// answerApiVersions answers a pre-authentication ApiVersions from the
// cache and reports whether it did.
func (s *session) answerApiVersions(req *Request) bool {
	cached := s.ln.apiVersions.load(s.info.NodeID)
	// The cached answer was decoded at its client's version: it holds
	// every field up to that version, no further.
	if cached == nil || req.Version > cached.Version || req.Version > maxVersionOf(cached, wire.KeyApiVersions) {
		return false
	}
	av, err := decodeRequest[*kmsg.ApiVersionsRequest](req)
	if err != nil {
		return false // the broker says what is wrong with it
	}
	if req.Version >= 3 && (!softwareName.MatchString(av.ClientSoftwareName) || !softwareName.MatchString(av.ClientSoftwareVersion)) {
		return false
	}
	if req.Version >= 5 && (av.ClusterID != nil || av.NodeID != -1) {
		// KIP-1242: answered here only when it names both this broker
		// and this cluster; one without the other, or another broker
		// or cluster, is for the broker to judge (INVALID_REQUEST,
		// REBOOTSTRAP_REQUIRED).
		id := s.gw.clusterID.Load()
		if av.ClusterID == nil || av.NodeID == -1 || id == nil || *av.ClusterID != *id || av.NodeID != s.info.NodeID {
			return false
		}
	}
	resp := *cached
	resp.Version = req.Version
	resp.ThrottleMillis = 0
	// The response header of ApiVersions is never flexible.
	s.respondLocal(req, false, wire.EncodeResponse(req.CorrelationID, false, &resp))
	return true
}

func maxVersionOf(r *kmsg.ApiVersionsResponse, key int16) int16 {
	for _, k := range r.ApiKeys {
		if k.ApiKey == key {
			return k.MaxVersion
		}
	}
	return -1
}
