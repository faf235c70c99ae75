package cli

import (
	"context"
	"fmt"
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
	c      *adminClient
	once   sync.Once
	got    map[string]liveRow
	tenant []string // what the user's tenant says, one line per ceiling
	err    error
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
		Tenant *struct {
			Name  string `json:"name"`
			Usage []struct {
				Quota     string  `json:"quota"`
				Ceiling   float64 `json:"ceiling"`
				Rate      float64 `json:"rate"`
				Active    int     `json:"active_principals"`
				FairShare float64 `json:"fair_share"`
				Shadow    bool    `json:"shadow"`
			} `json:"usage"`
		} `json:"tenant"`
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
	if t := body.Tenant; t != nil {
		for _, u := range t.Usage {
			line := fmt.Sprintf("%s is bounded by tenant %s too (the tightest wins): %s ceiling %s, %.0f/s now, %d active principal(s), fair share %.0f/s",
				user, t.Name, u.Quota, formatValue(u.Ceiling), u.Rate, u.Active, u.FairShare)
			if u.Shadow {
				line += " (shadow: not enforced)"
			}
			h.tenant = append(h.tenant, line)
		}
		if len(t.Usage) == 0 {
			h.tenant = append(h.tenant, fmt.Sprintf("%s belongs to tenant %s, which has no ceiling", user, t.Name))
		}
	}
	return out, nil
}
