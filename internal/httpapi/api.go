package httpapi

import (
	"encoding/json"
	"math"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/quota/model"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/internal/admission"
	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/telemetry"
	"github.com/tollgate/tollgate/internal/usage"
)

// Sources are what the API reads. Any field may be nil; its endpoints then
// answer 503.
type Sources struct {
	Engine    *quota.Engine
	Admission *admission.Limiter
	// Sessions returns open client connections per listener.
	Sessions func() map[string]int
	// IPRate returns the connection_creation_rate that applies to an
	// address and the entity it comes from ("" = the default entity), or
	// ok=false when none does.
	IPRate func(ip netip.Addr) (rate int, entity string, ok bool)
	// Audit returns the most recent audit events, newest last.
	Audit func(n int) []any
	// Ready reports whether the gateway knows its upstream brokers.
	Ready    func() bool
	Registry *prometheus.Registry
	Now      func() time.Time
	// APIKeys manages API keys (/api/v1/apikeys, apikeys.go).
	APIKeys APIKeyManager
	// Usage answers usage queries from the usage ledger (/api/v1/usage,
	// usage.go).
	Usage func(usage.Query) (*usage.Report, error)
	// Suggest proposes byte-rate quotas from the instance's ledger
	// (/api/v1/quotas/suggest, usage.go).
	Suggest func(usage.SuggestQuery) ([]usage.Proposal, error)
	// Cluster returns the Tollgate cluster's state; ok false (or a nil
	// func) outside one (/api/v1/cluster, cluster.go).
	Cluster func() (api.ClusterStatus, bool)
	// Tenants manages tenants (/api/v1/tenants, tenants.go).
	Tenants TenantManager
	// Telemetry holds the clients' own metrics (KIP-714); nil when
	// telemetry.enabled is false (/api/v1/telemetry, telemetry.go).
	Telemetry *telemetry.Manager
	// Access is who may do what (access.go). The zero value lets nobody
	// change anything and ANONYMOUS read nothing.
	Access Access
}

// Handler returns the admin port's handler. Every request passes the Host
// check and authentication first (access.go); each endpoint then states
// what it needs: nothing (the dashboard's static files), nothing when open
// (metrics, health), the read right, or the right to change (checked by
// the APIKeyManager).
func Handler(s Sources) http.Handler {
	if s.Now == nil {
		s.Now = time.Now
	}
	g := newGuard(s.Access)
	mux := http.NewServeMux()
	mux.Handle("GET "+EndpointHealthz, g.open(EndpointHealthz, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }))
	mux.Handle("GET "+EndpointReadyz, g.open(EndpointReadyz, func(w http.ResponseWriter, _ *http.Request) {
		if s.Ready != nil && !s.Ready() {
			http.Error(w, "not ready: upstream brokers unknown\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	}))
	if s.Registry != nil {
		mux.Handle("GET "+EndpointMetrics, g.open(EndpointMetrics, promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}).ServeHTTP))
	}
	mux.Handle("GET /api/v1/buckets", g.read(s.buckets))
	mux.Handle("GET /api/v1/resolve", g.read(s.resolve))
	mux.Handle("GET /api/v1/connections", g.read(s.connections))
	mux.Handle("GET /api/v1/audit", g.read(s.audit))
	mux.Handle("GET /api/v1/usage", g.read(s.usage))
	mux.Handle("GET /api/v1/quotas/suggest", g.read(s.suggest))
	mux.Handle("GET "+EndpointCluster, g.read(s.cluster))
	mux.Handle("GET "+EndpointTelemetry, g.read(s.telemetry))
	keys := apiKeys{s.APIKeys}
	mux.Handle("POST /api/v1/apikeys", g.change(keys.create))
	mux.Handle("GET /api/v1/apikeys", g.read(keys.list))
	mux.Handle("DELETE /api/v1/apikeys/{id}", g.change(keys.revoke))
	tn := tenants{m: s.Tenants, eng: s.Engine, now: s.Now}
	mux.Handle("GET /api/v1/tenants", g.read(tn.list))
	mux.Handle("POST /api/v1/tenants", g.change(tn.create))
	mux.Handle("GET /api/v1/tenants/{name}", g.read(tn.get))
	mux.Handle("PUT /api/v1/tenants/{name}", g.change(tn.replace))
	mux.Handle("PATCH /api/v1/tenants/{name}", g.change(tn.alter))
	mux.Handle("DELETE /api/v1/tenants/{name}", g.change(tn.delete))
	// Static files only: the page asks for a key when the API answers 401.
	mux.Handle("GET /", dashboard())
	return g.wrap(mux)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// Errors echo parts of the request (a refused Host): never let a
	// browser sniff them into something else.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func fail(w http.ResponseWriter, code int, msg string) { writeJSON(w, code, api.Error{Error: msg}) }

// num renders Kafka's "unlimited" (Long.MAX_VALUE) as null.
func num(v float64) *float64 {
	if v >= model.Unlimited || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

// modeJSON is how a quota applies: shadow or not (with what its bucket
// would have throttled), and the burst options o set.
func modeJSON(shadow bool, s model.ShadowStats, o model.Options) api.QuotaMode {
	m := api.QuotaMode{Shadow: shadow, Shadowed: shadowJSON(shadow, s)}
	if o.HasBurst {
		v := o.Burst
		m.BurstSeconds = &v
	}
	return m
}

func shadowJSON(on bool, s model.ShadowStats) *api.Shadow {
	if !on {
		return nil
	}
	return &api.Shadow{Records: s.Records, Throttled: s.Throttled, ThrottledPercent: s.Percent(),
		ThrottleMsTotal: s.Total.Milliseconds(), ThrottleMsMax: s.Max.Milliseconds()}
}

func (s Sources) buckets(w http.ResponseWriter, r *http.Request) {
	if s.Engine == nil {
		fail(w, http.StatusServiceUnavailable, "no quota engine")
		return
	}
	limit := DefaultBucketsLimit
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			fail(w, http.StatusBadRequest, "limit: want a positive integer")
			return
		}
		limit = n
	}
	usage := s.Engine.Usage(s.Now())
	// Busiest first: what an operator looks at; the rest left out beyond
	// limit (the buckets' number is client-chosen, up to
	// quota.max_buckets).
	sort.SliceStable(usage, func(i, j int) bool { return usage[i].Utilization > usage[j].Utilization })
	total := len(usage)
	usage = usage[:min(len(usage), limit)]
	out := []api.Bucket{}
	for _, u := range usage {
		b := api.Bucket{
			Quota: u.Key.String(), User: u.User, ClientID: u.ClientID, Level: u.Level.String(),
			Limit: num(u.Quota), BucketRate: api.BucketRate{Rate: u.Rate, InstanceRate: u.InstanceRate, Utilization: u.Utilization},
			Throttled: u.Throttles, ThrottleMs: u.ThrottleTotal.Milliseconds(),
			LastActive: u.LastActive.UTC().Format(time.RFC3339Nano),
			QuotaMode:  modeJSON(u.Shadow, u.Shadowed, u.Options),
		}
		if u.ClientIDPrefix {
			b.ClientID, b.ClientIDPrefix = "", u.ClientID
		}
		if u.TopicPrefix {
			b.TopicPrefix = u.Topic
		} else {
			b.Topic = u.Topic
		}
		if u.Level != model.LevelNone {
			b.Entity = entityJSON(u.Entity)
		}
		out = append(out, b)
	}
	writeJSON(w, http.StatusOK, api.Buckets{Buckets: out, Total: total})
}

// DefaultBucketsLimit is how many buckets GET /api/v1/buckets lists
// without a limit parameter.
const DefaultBucketsLimit = 1000

func entityJSON(e model.Entity) []api.EntityPart {
	var out []api.EntityPart
	add := func(typ string, n model.Name) {
		if !n.IsSet() {
			return
		}
		p := api.EntityPart{Type: typ}
		if n.IsDefault() {
			p.Default = true
		} else {
			v := n.Value()
			p.Name = &v
		}
		out = append(out, p)
	}
	add("user", e.User)
	if e.Client.IsPrefix() {
		add("client-id-prefix", model.Exact(e.Client.Value()))
	} else {
		add("client-id", e.Client)
	}
	if e.Topic.IsPrefix() {
		add("topic-prefix", model.Exact(e.Topic.Value()))
	} else {
		add("topic", e.Topic)
	}
	return out
}

func (s Sources) resolve(w http.ResponseWriter, r *http.Request) {
	if s.Engine == nil {
		fail(w, http.StatusServiceUnavailable, "no quota engine")
		return
	}
	q := r.URL.Query()
	user, cid := q.Get("user"), q.Get("client_id")
	if !q.Has("user") {
		fail(w, http.StatusBadRequest, "user is required (the principal name; ANONYMOUS on PLAINTEXT)")
		return
	}
	now := s.Now()
	resp := api.Resolve{User: user, ClientID: cid}
	for _, k := range model.Keys() {
		resp.Quotas = append(resp.Quotas, resolvedJSON(s.Engine.Resolve(k, user, cid, now)))
	}
	if name, ok := s.Engine.TenantOf(user); ok {
		// The tenant whose ceilings bound the user too (the tightest wins).
		tn := tenants{eng: s.Engine, now: func() time.Time { return now }}
		resp.Tenant = &api.ResolveTenant{Name: name,
			Usage: tn.view(control.TenantInfo{TenantSpec: api.TenantSpec{Name: name}}, nil).Usage}
	}
	if q.Has("topic") {
		// The per-topic quotas of the client on the topic, beside its
		// client quotas: the request is held by the largest throttle.
		topic := q.Get("topic")
		resp.Topic, resp.TopicQuotas = &topic, s.resolveTopic(user, cid, topic, now)
	}
	if ipS := q.Get("ip"); ipS != "" {
		ip, err := netip.ParseAddr(ipS)
		if err != nil {
			fail(w, http.StatusBadRequest, "ip: "+err.Error())
			return
		}
		resp.IP = s.resolveIP(ip, now)
	}
	writeJSON(w, http.StatusOK, resp)
}

// resolvedJSON is the answer of one resolution.
func resolvedJSON(res model.Resolution) api.Resolved {
	rv := api.Resolved{Quota: res.Key.String(), Level: res.Level.String(), Value: num(res.Quota),
		BucketUser: res.UserTag, BucketCID: res.ClientTag, QuotaMode: modeJSON(res.Options.Shadow, res.Shadowed, res.Options),
		BucketRate: api.BucketRate{Rate: res.Rate, InstanceRate: res.InstanceRate, Utilization: res.Utilization}}
	if res.ClientPrefix {
		rv.BucketCID, rv.BucketPrefix = "", res.ClientTag
	}
	if res.Limited() {
		rv.Entity = entityJSON(res.Entity)
	}
	return rv
}

// resolveTopic is the per-topic quotas of a client on a topic.
func (s Sources) resolveTopic(user, cid, topic string, now time.Time) []api.Resolved {
	var tq []api.Resolved
	for _, k := range []model.Key{model.ProducerByteRate, model.ConsumerByteRate} {
		res := s.Engine.ResolveTopic(k, user, cid, topic, now)
		rv := resolvedJSON(res)
		if res.TopicPrefix {
			rv.BucketTopicPrefix = res.TopicTag
		} else {
			rv.BucketTopic = res.TopicTag
		}
		tq = append(tq, rv)
	}
	return tq
}

// resolveIP is the connection_creation_rate of an address.
func (s Sources) resolveIP(ip netip.Addr, now time.Time) *api.ResolvedIP {
	ipr := &api.ResolvedIP{IP: ip.String(), Quota: "connection_creation_rate"}
	if s.IPRate != nil {
		if rate, ent, ok := s.IPRate(ip); ok {
			part := api.EntityPart{Type: "ip", Default: ent == ""}
			if ent != "" {
				part.Name = &ent
			}
			ipr.Value, ipr.Entity = &rate, []api.EntityPart{part}
		}
	}
	if s.Admission != nil {
		if r, ok := s.Admission.IPConnectionAcceptRate(ip, now); ok {
			ipr.Rate = &r
		}
		n := s.Admission.IPConnections(ip)
		ipr.Connections = &n
	}
	return ipr
}

func limit(v int) *float64 {
	if v >= admission.Unlimited {
		return nil
	}
	f := float64(v)
	return &f
}

func (s Sources) connections(w http.ResponseWriter, r *http.Request) {
	if s.Admission == nil {
		fail(w, http.StatusServiceUnavailable, "no admission")
		return
	}
	st := s.Admission.Stats(s.Now())
	var sessions map[string]int
	if s.Sessions != nil {
		sessions = s.Sessions()
	}
	var ls []api.Listener
	for _, l := range st.Listeners {
		ls = append(ls, api.Listener{
			Name: l.Name, Exempt: l.Exempt, Sessions: sessions[l.Name], Active: l.Active,
			MaxConnections: limit(l.MaxConnections), MaxCreationRate: limit(l.MaxConnectionCreationRate),
			AcceptRate: l.ConnectionAcceptRate, Accepted: l.Accepted,
			Throttled: l.ThrottledByGatewayRate + l.ThrottledByListenerRate,
			Blocked:   l.BlockedByGatewayCount + l.BlockedByListenerCount,
			Parked:    l.ParkedByIPRate, Rejected: l.RejectedByIPCount,
			BlockedPercent1m: l.Blocked.OneMinuteRate,
		})
	}
	var ips []map[string]any
	for _, ip := range st.TopIPs {
		ips = append(ips, map[string]any{"ip": ip.Addr.String(), "parked": ip.Parked, "rejected": ip.Rejected})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"active": st.Active, "max_connections": limit(st.MaxConnections),
		"connection_accept_rate": st.ConnectionAcceptRate, "listeners": ls, "top_ips": ips,
	})
}

func (s Sources) audit(w http.ResponseWriter, r *http.Request) {
	if s.Audit == nil {
		writeJSON(w, http.StatusOK, map[string]any{"events": []any{}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": s.Audit(100)})
}
