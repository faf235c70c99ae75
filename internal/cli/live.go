package cli

import (
	"context"
	"net/http"
	"net/url"
	"sync"
)

// httpLive reads live rate and utilization from Tollgate's admin HTTP API
// (GET /api/v1/resolve). It asks once per (user, client-id) and serves
// every row from that answer.
type httpLive struct {
	c    *adminClient
	once sync.Once
	got  map[string][2]float64
	err  error
}

func (h *httpLive) Live(ctx context.Context, user, clientID string, row resolvedRow) (float64, float64, bool, error) {
	h.once.Do(func() { h.got, h.err = h.fetch(ctx, user, clientID) })
	if h.err != nil {
		return 0, 0, false, h.err
	}
	v, ok := h.got[row.key]
	return v[0], v[1], ok, nil
}

func (h *httpLive) fetch(ctx context.Context, user, clientID string) (map[string][2]float64, error) {
	var body struct {
		Quotas []struct {
			Quota       string  `json:"quota"`
			Rate        float64 `json:"rate"`
			Utilization float64 `json:"utilization"`
		} `json:"quotas"`
	}
	path := "/api/v1/resolve?" + url.Values{"user": {user}, "client_id": {clientID}}.Encode()
	if err := h.c.do(ctx, "GET", path, nil, http.StatusOK, &body); err != nil {
		return nil, err
	}
	out := map[string][2]float64{}
	for _, q := range body.Quotas {
		out[q.Quota] = [2]float64{q.Rate, q.Utilization}
	}
	return out, nil
}
