package httpapi

import (
	"encoding/json"
	"math"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/cluster"

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
	// Cluster returns the Tollgate cluster's state; ok false (or a nil
	// func) outside one (/api/v1/cluster, cluster.go).
	Cluster func() (cluster.Status, bool)
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

// apiError is the one error shape of the API.
type apiError struct {
	Error string `json:"error"`
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

func fail(w http.ResponseWriter, code int, msg string) { writeJSON(w, code, apiError{msg}) }

// num renders Kafka's "unlimited" (Long.MAX_VALUE) as null.
func num(v float64) *float64 {
	if v >= quota.Unlimited || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

// Bucket is one live quota bucket: Kafka's tags user and client_id, or a
// client-id prefix group (client_id_prefix set, user and client_id ""); a
// per-topic quota's bucket also has its topic, or its topic prefix.
type Bucket struct {
	Quota          string       `json:"quota"`
	User           string       `json:"user"`
	ClientID       string       `json:"client_id"`
	ClientIDPrefix string       `json:"client_id_prefix,omitempty"`
	Topic          string       `json:"topic,omitempty"`
	TopicPrefix    string       `json:"topic_prefix,omitempty"`
	Level          string       `json:"level"`
	Entity         []EntityPart `json:"entity,omitempty"`
	Limit          *float64     `json:"limit"`
	// Rate is the bucket's rate per second; in a Tollgate cluster the
	// whole cluster's as this instance knows it (tollgate_quota_rate), and
	// Utilization is of it. InstanceRate is this instance's own part
	// (tollgate_quota_instance_rate): Rate outside a cluster.
	Rate         float64 `json:"rate"`
	InstanceRate float64 `json:"instance_rate"`
	Utilization  float64 `json:"utilization"`
	Throttled    int64   `json:"throttled"`
	ThrottleMs   int64   `json:"throttle_ms_total"`
	LastActive   string  `json:"last_active"`
	// Shadow is set for a bucket whose quota is in shadow mode (measured,
	// not enforced): Throttled and ThrottleMs stay 0, Shadowed says what
	// it would have done.
	Shadow   bool    `json:"shadow,omitempty"`
	Shadowed *Shadow `json:"shadowed,omitempty"`
	// BurstSeconds is the entity's start-up burst in seconds of quota,
	// when it sets one (absent: Kafka's).
	BurstSeconds *float64 `json:"burst_seconds,omitempty"`
}

// Shadow is what a shadow quota's bucket would have throttled (since it
// was created or last switched to shadow): of its records (produce
// requests, fetch responses, partition mutations), how many, what share,
// by how much in all and at most.
type Shadow struct {
	Records          int64   `json:"records"`
	Throttled        int64   `json:"throttled"`
	ThrottledPercent float64 `json:"throttled_percent"`
	ThrottleMsTotal  int64   `json:"throttle_ms_total"`
	ThrottleMsMax    int64   `json:"throttle_ms_max"`
}

func burstJSON(o quota.Options) *float64 {
	if !o.HasBurst {
		return nil
	}
	v := o.Burst
	return &v
}

func shadowJSON(on bool, s quota.ShadowStats) *Shadow {
	if !on {
		return nil
	}
	return &Shadow{Records: s.Records, Throttled: s.Throttled, ThrottledPercent: s.Percent(),
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
	out := []Bucket{}
	for _, u := range usage {
		b := Bucket{
			Quota: u.Key.String(), User: u.User, ClientID: u.ClientID, Level: u.Level.String(),
			Limit: num(u.Quota), Rate: u.Rate, InstanceRate: u.InstanceRate, Utilization: u.Utilization,
			Throttled: u.Throttles, ThrottleMs: u.ThrottleTotal.Milliseconds(),
			LastActive: u.LastActive.UTC().Format(time.RFC3339Nano),
		}
		if u.ClientIDPrefix {
			b.ClientID, b.ClientIDPrefix = "", u.ClientID
		}
		if u.TopicPrefix {
			b.TopicPrefix = u.Topic
		} else {
			b.Topic = u.Topic
		}
		b.Shadow, b.Shadowed = u.Shadow, shadowJSON(u.Shadow, u.Shadowed)
		b.BurstSeconds = burstJSON(u.Options)
		if u.Level != quota.LevelNone {
			b.Entity = entityJSON(u.Entity)
		}
		out = append(out, b)
	}
	writeJSON(w, http.StatusOK, map[string]any{"buckets": out, "total": total})
}

// DefaultBucketsLimit is how many buckets GET /api/v1/buckets lists
// without a limit parameter.
const DefaultBucketsLimit = 1000

// EntityPart is one (type, name) pair of a quota entity, as in Kafka's
// DescribeClientQuotas: Default marks the default entity (name absent), so
// a literal name "<default>" stays distinct.
type EntityPart struct {
	Type    string  `json:"type"`
	Name    *string `json:"name"`
	Default bool    `json:"default,omitempty"`
}

func entityJSON(e quota.Entity) []EntityPart {
	var out []EntityPart
	add := func(typ string, n quota.Name) {
		if !n.IsSet() {
			return
		}
		p := EntityPart{Type: typ}
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
		add("client-id-prefix", quota.Exact(e.Client.Value()))
	} else {
		add("client-id", e.Client)
	}
	if e.Topic.IsPrefix() {
		add("topic-prefix", quota.Exact(e.Topic.Value()))
	} else {
		add("topic", e.Topic)
	}
	return out
}

// Resolved is the answer for one quota key.
type Resolved struct {
	Quota      string       `json:"quota"`
	Level      string       `json:"level"`
	Entity     []EntityPart `json:"entity,omitempty"`
	Value      *float64     `json:"value"`
	BucketUser string       `json:"bucket_user"`
	BucketCID  string       `json:"bucket_client_id"`
	// BucketPrefix is set when the bucket is a client-id prefix group:
	// every client-id starting with it shares it (BucketCID is then "").
	BucketPrefix string `json:"bucket_client_id_prefix,omitempty"`
	// BucketTopic and BucketTopicPrefix name a per-topic quota's bucket
	// (the answer for a topic asked with topic=).
	BucketTopic       string `json:"bucket_topic,omitempty"`
	BucketTopicPrefix string `json:"bucket_topic_prefix,omitempty"`
	// Shadow is set when the quota that applies is in shadow mode;
	// Shadowed is then what its bucket would have throttled.
	Shadow   bool    `json:"shadow,omitempty"`
	Shadowed *Shadow `json:"shadowed,omitempty"`
	// BurstSeconds is the entity's start-up burst, when it sets one.
	BurstSeconds *float64 `json:"burst_seconds,omitempty"`
	// Rate, InstanceRate and Utilization are the bucket's, as in Bucket
	// (0 while it does not exist).
	Rate         float64 `json:"rate"`
	InstanceRate float64 `json:"instance_rate"`
	Utilization  float64 `json:"utilization"`
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
	var out []Resolved
	for _, k := range quota.Keys() {
		res := s.Engine.Resolve(k, user, cid, now)
		rv := Resolved{Quota: k.String(), Level: res.Level.String(), Value: num(res.Quota),
			BucketUser: res.UserTag, BucketCID: res.ClientTag, Rate: res.Rate, InstanceRate: res.InstanceRate,
			Utilization: res.Utilization}
		if res.ClientPrefix {
			rv.BucketCID, rv.BucketPrefix = "", res.ClientTag
		}
		rv.Shadow, rv.Shadowed = res.Options.Shadow, shadowJSON(res.Options.Shadow, res.Shadowed)
		rv.BurstSeconds = burstJSON(res.Options)
		if res.Level != quota.LevelNone {
			rv.Entity = entityJSON(res.Entity)
		}
		out = append(out, rv)
	}
	resp := map[string]any{"user": user, "client_id": cid, "quotas": out}
	if name, ok := s.Engine.TenantOf(user); ok {
		// The tenant whose ceilings bound the user too (the tightest wins).
		tn := tenants{eng: s.Engine, now: func() time.Time { return now }}
		resp["tenant"] = map[string]any{"name": name,
			"usage": tn.view(control.TenantInfo{TenantSpec: control.TenantSpec{Name: name}}, nil).Usage}
	}
	if q.Has("topic") {
		// The per-topic quotas of the client on the topic, beside its
		// client quotas: the request is held by the largest throttle.
		topic := q.Get("topic")
		var tq []Resolved
		for _, k := range []quota.Key{quota.ProducerByteRate, quota.ConsumerByteRate} {
			res := s.Engine.ResolveTopic(k, user, cid, topic, now)
			rv := Resolved{Quota: k.String(), Level: res.Level.String(), Value: num(res.Quota),
				BucketUser: res.UserTag, BucketCID: res.ClientTag, Rate: res.Rate, Utilization: res.Utilization}
			if res.ClientPrefix {
				rv.BucketCID, rv.BucketPrefix = "", res.ClientTag
			}
			if res.TopicPrefix {
				rv.BucketTopicPrefix = res.TopicTag
			} else {
				rv.BucketTopic = res.TopicTag
			}
			rv.Shadow, rv.Shadowed = res.Options.Shadow, shadowJSON(res.Options.Shadow, res.Shadowed)
			rv.BurstSeconds = burstJSON(res.Options)
			if res.Limited() {
				rv.Entity = entityJSON(res.Entity)
			}
			tq = append(tq, rv)
		}
		resp["topic"], resp["topic_quotas"] = topic, tq
	}
	if ipS := q.Get("ip"); ipS != "" {
		ip, err := netip.ParseAddr(ipS)
		if err != nil {
			fail(w, http.StatusBadRequest, "ip: "+err.Error())
			return
		}
		ipr := map[string]any{"ip": ip.String(), "quota": "connection_creation_rate", "value": nil}
		if s.IPRate != nil {
			if rate, ent, ok := s.IPRate(ip); ok {
				part := EntityPart{Type: "ip", Default: ent == ""}
				if ent != "" {
					part.Name = &ent
				}
				ipr["value"], ipr["entity"] = rate, []EntityPart{part}
			}
		}
		if s.Admission != nil {
			if r, ok := s.Admission.IPConnectionAcceptRate(ip, now); ok {
				ipr["rate"] = r
			}
			ipr["connections"] = s.Admission.IPConnections(ip)
		}
		resp["ip"] = ipr
	}
	writeJSON(w, http.StatusOK, resp)
}

// Listener is one listener's connections and limits.
type Listener struct {
	Name             string   `json:"name"`
	Exempt           bool     `json:"exempt"`
	Sessions         int      `json:"sessions"`
	Active           int      `json:"active"`
	MaxConnections   *float64 `json:"max_connections"`
	MaxCreationRate  *float64 `json:"max_connection_creation_rate"`
	AcceptRate       float64  `json:"connection_accept_rate"`
	Accepted         uint64   `json:"accepted"`
	Throttled        uint64   `json:"throttled"`
	Blocked          uint64   `json:"blocked"`
	Parked           uint64   `json:"parked"`
	Rejected         uint64   `json:"rejected"`
	BlockedPercent1m float64  `json:"acceptor_blocked_percent"`
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
	var ls []Listener
	for _, l := range st.Listeners {
		ls = append(ls, Listener{
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
