package cli

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
)

// httpLive reads live rate and utilization from Tollgate's admin HTTP API
// (GET /api/v1/resolve). It asks once per (user, client-id) and serves
// every row from that answer.
type httpLive struct {
	c    *adminClient
	once sync.Once
	got  map[string]liveRow
	err  error
}

func (h *httpLive) Live(ctx context.Context, user, clientID string, row resolvedRow) (liveRow, bool, error) {
	h.once.Do(func() { h.got, h.err = h.fetch(ctx, user, clientID) })
	if h.err != nil {
		return liveRow{}, false, h.err
	}
	v, ok := h.got[row.key]
	return v, ok, nil
}

func (h *httpLive) fetch(ctx context.Context, user, clientID string) (map[string]liveRow, error) {
	var body struct {
		Quotas []struct {
			Quota       string  `json:"quota"`
			Rate        float64 `json:"rate"`
			Utilization float64 `json:"utilization"`
			Shadowed    *struct {
				Records         int64 `json:"records"`
				Throttled       int64 `json:"throttled"`
				ThrottleMsTotal int64 `json:"throttle_ms_total"`
				ThrottleMsMax   int64 `json:"throttle_ms_max"`
			} `json:"shadowed"`
		} `json:"quotas"`
	}
	path := "/api/v1/resolve?" + url.Values{"user": {user}, "client_id": {clientID}}.Encode()
	if err := h.c.do(ctx, "GET", path, nil, http.StatusOK, &body); err != nil {
		return nil, err
	}
	out := map[string]liveRow{}
	for _, q := range body.Quotas {
		lr := liveRow{rate: q.Rate, utilization: q.Utilization}
		if s := q.Shadowed; s != nil {
			lr.shadowed = &quota.ShadowStats{Records: s.Records, Throttled: s.Throttled,
				Total: time.Duration(s.ThrottleMsTotal) * time.Millisecond, Max: time.Duration(s.ThrottleMsMax) * time.Millisecond}
		}
		out[q.Quota] = lr
	}
	return out, nil
}
