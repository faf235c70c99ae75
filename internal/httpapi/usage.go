package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/usage"
)

// usage answers GET /api/v1/usage from the usage ledger:
//
//	since   a time ago (24h, 90m, 7d) or a time (RFC 3339, 2025-06-01); default 24h
//	until   likewise; default now
//	by      user (default), client-id, user,client-id; tenant is refused until tenants exist
//	format  json (default), csv or table
//
// It needs the read right, as every /api/v1 read does.
func (s Sources) usage(w http.ResponseWriter, r *http.Request) {
	if s.Usage == nil {
		fail(w, http.StatusServiceUnavailable, "the usage ledger is off (usage.enabled: false)")
		return
	}
	v := r.URL.Query()
	get := func(k, def string) string { return getOr(v, k, def) }
	since, until, ok := ledgerWindow(w, v, "24h", s.Now())
	if !ok {
		return
	}
	format := get("format", usage.FormatJSON)
	if err := usage.ValidFormat(format); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	q := usage.Query{Since: since, Until: until, By: get("by", usage.ByUser)}
	if err := q.Validate(); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	rep, err := s.Usage(q)
	if err != nil {
		fail(w, http.StatusInternalServerError, "reading the usage ledger: "+err.Error())
		return
	}
	switch format {
	case usage.FormatJSON:
		writeJSON(w, http.StatusOK, rep)
	default:
		ct := "text/csv; charset=utf-8"
		if format == usage.FormatTable {
			ct = "text/plain; charset=utf-8"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		rep.Write(w, format)
	}
}

// SuggestAnswer is GET /api/v1/quotas/suggest's answer.
type SuggestAnswer struct {
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	By         string    `json:"by"`
	Percentile float64   `json:"percentile"`
	Headroom   float64   `json:"headroom"`
	// InstanceOnly: the instance is one of a Tollgate cluster and its
	// ledger holds its own part of the traffic only; the whole cluster's
	// proposals come from tollgate quotas suggest --usage-topic.
	InstanceOnly bool              `json:"instance_only"`
	Proposals    []SuggestProposal `json:"proposals"`
}

// SuggestProposal is one proposal (usage.Proposal).
type SuggestProposal struct {
	Tenant           *string `json:"tenant,omitempty"`
	User             *string `json:"user,omitempty"`
	ClientID         *string `json:"client_id,omitempty"`
	Quota            string  `json:"quota"`
	Value            float64 `json:"value"`
	Minutes          int     `json:"minutes"`
	AtPercentile     float64 `json:"at_percentile"`
	Peak             float64 `json:"peak"`
	ThrottledMinutes int     `json:"throttled_minutes"`
}

// suggest answers GET /api/v1/quotas/suggest: byte-rate quotas proposed
// from this instance's usage ledger (tollgate quotas suggest):
//
//	since, until  as /api/v1/usage's; default 7d and now
//	by            user (default), client-id, user,client-id or tenant
//	percentile    of each one's active minutes; default 99
//	headroom      percent above it; default 20
//
// It needs the read right, as every /api/v1 read does.
func (s Sources) suggest(w http.ResponseWriter, r *http.Request) {
	if s.Suggest == nil {
		fail(w, http.StatusServiceUnavailable, "the usage ledger is off (usage.enabled: false)")
		return
	}
	v := r.URL.Query()
	get := func(k, def string) string { return getOr(v, k, def) }
	q := usage.SuggestQuery{By: get("by", usage.ByUser)}
	var ok bool
	if q.Since, q.Until, ok = ledgerWindow(w, v, "7d", s.Now()); !ok {
		return
	}
	for _, f := range []struct {
		name, def string
		to        *float64
		scale     float64
	}{{"percentile", "99", &q.Percentile, 1}, {"headroom", "20", &q.Headroom, 0.01}} {
		x, err := strconv.ParseFloat(get(f.name, f.def), 64)
		if err != nil {
			fail(w, http.StatusBadRequest, f.name+": not a number")
			return
		}
		*f.to = x * f.scale
	}
	if err := q.Validate(); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	ps, err := s.Suggest(q)
	if err != nil {
		fail(w, http.StatusInternalServerError, "reading the usage ledger: "+err.Error())
		return
	}
	inCluster := false
	if s.Cluster != nil {
		_, inCluster = s.Cluster()
	}
	ans := SuggestAnswer{Since: q.Since.UTC(), Until: q.Until.UTC(), By: q.By, Percentile: q.Percentile, Headroom: q.Headroom * 100,
		InstanceOnly: inCluster, Proposals: make([]SuggestProposal, 0, len(ps))}
	for _, p := range ps {
		ans.Proposals = append(ans.Proposals, SuggestProposal{Tenant: p.Tenant, User: p.User, ClientID: p.ClientID, Quota: p.Key,
			Value: p.Quota, Minutes: p.Minutes, AtPercentile: p.AtPercentile, Peak: p.Peak, ThrottledMinutes: p.ThrottledMinutes})
	}
	writeJSON(w, http.StatusOK, ans)
}

// ledgerWindow reads a ledger query's since (default def) and until
// (default now) parameters; ok false: the error is answered.
func ledgerWindow(w http.ResponseWriter, v url.Values, def string, now time.Time) (since, until time.Time, ok bool) {
	s := v.Get("since")
	if s == "" {
		s = def
	}
	since, err := usage.ParseTime(s, now)
	if err != nil {
		fail(w, http.StatusBadRequest, "since: "+err.Error())
		return since, until, false
	}
	until = now
	if x := v.Get("until"); x != "" {
		if until, err = usage.ParseTime(x, now); err != nil {
			fail(w, http.StatusBadRequest, "until: "+err.Error())
			return since, until, false
		}
	}
	return since, until, true
}

// getOr is the query parameter k, or def.
func getOr(v url.Values, k, def string) string {
	if x := v.Get(k); x != "" {
		return x
	}
	return def
}
