package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/api"
	"github.com/tollgate/tollgate/internal/quota/model"
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
	var body api.Resolve
	path := "/api/v1/resolve?" + url.Values{"user": {user}, "client_id": {clientID}}.Encode()
	if err := h.c.do(ctx, "GET", path, nil, http.StatusOK, &body); err != nil {
		return nil, err
	}
	out := map[string]liveRow{}
	for _, q := range body.Quotas {
		lr := liveRow{rate: q.Rate, instanceRate: q.InstanceRate, utilization: q.Utilization}
		if s := q.Shadowed; s != nil {
			lr.shadowed = &model.ShadowStats{Records: s.Records, Throttled: s.Throttled,
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

// Cluster returns the Tollgate cluster the admin port's instance is part
// of; nil outside one (the port answers 404).
func (h *httpLive) Cluster(ctx context.Context) (*api.ClusterStatus, error) {
	var v api.ClusterStatus
	err := h.c.do(ctx, "GET", "/api/v1/cluster", nil, http.StatusOK, &v)
	if se := (*statusError)(nil); errors.As(err, &se) && se.status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// lines says, under resolve's table, which instances the rates are of:
//
//	Tollgate cluster prod, as tg-a sees it: 2 live instances: tg-a (this instance, v1.2.0, admin 10.0.0.1:9644), tg-b (...)
//
// and what is wrong, if anything: this instance cut off from the exchange,
// the shared configuration not read yet, config files that declare
// different quotas.
func clusterLines(v *api.ClusterStatus) []string {
	var ms []string
	for _, m := range v.Members {
		var about []string
		if m.Self {
			about = append(about, "this instance")
		}
		if m.Version != "" {
			about = append(about, m.Version)
		}
		if m.Addr != "" {
			about = append(about, "admin "+m.Addr)
		}
		s := m.ID
		if len(about) > 0 {
			s += " (" + strings.Join(about, ", ") + ")"
		}
		ms = append(ms, s)
	}
	plural := "s"
	if v.Live == 1 {
		plural = ""
	}
	out := []string{fmt.Sprintf("Tollgate cluster %s, as %s sees it: %d live instance%s: %s",
		v.ClusterID, v.InstanceID, v.Live, plural, strings.Join(ms, ", "))}
	if !v.Connected {
		out = append(out, "warning: "+v.InstanceID+" does not hear the usage exchange (cut off): the others' part of each rate is an estimate")
	}
	if !v.ConfigLog.Ready {
		msg := "warning: " + v.InstanceID + " has not read the shared configuration topic yet"
		if v.ConfigLog.Error != "" {
			msg += ": " + v.ConfigLog.Error
		}
		out = append(out, msg)
	}
	if v.DigestsDiffer {
		out = append(out, "warning: the instances' config files declare different quotas: a client's quota can depend on the instance it connects to")
	}
	return out
}
