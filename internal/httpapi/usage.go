package httpapi

import (
	"net/http"

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
	get := func(k, def string) string {
		if x := v.Get(k); x != "" {
			return x
		}
		return def
	}
	now := s.Now()
	since, err := usage.ParseTime(get("since", "24h"), now)
	if err != nil {
		fail(w, http.StatusBadRequest, "since: "+err.Error())
		return
	}
	until := now
	if x := v.Get("until"); x != "" {
		if until, err = usage.ParseTime(x, now); err != nil {
			fail(w, http.StatusBadRequest, "until: "+err.Error())
			return
		}
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
