package quota

import (
	"cmp"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/quota/model"
)

// TenantUsage is one tenant's ceiling for one key, for metrics and the
// admin API.
type TenantUsage struct {
	Tenant string
	Key    model.Key
	// Ceiling is the tenant's quota for Key; Rate its principals' rate
	// together (Kafka's sampled rate), Utilization Rate ÷ Ceiling. In a
	// Tollgate cluster, the whole cluster's, as this instance knows it.
	Ceiling, Rate, Utilization float64
	// Active is the number of principals with a record in the last
	// (N−1)·W and FairShare the ceiling ÷ Active, what each is
	// guaranteed while the ceiling binds (or its own quota if smaller).
	Active    int
	FairShare float64
	// Tokens is the ceiling's token bucket: below 0, the ceiling binds.
	Tokens float64
	// Throttles and ThrottleTotal are the records the tenant throttled
	// (its principals' shares or the ceiling itself) and for how long.
	Throttles     int64
	ThrottleTotal time.Duration
	// Shadow: the tenant is in shadow mode; Shadowed is what it would
	// have throttled.
	Shadow   bool
	Shadowed model.ShadowStats
	Options  model.Options
}

// MemberUsage is one principal's part of a tenant's ceiling for one key.
type MemberUsage struct {
	Principal string
	Key       model.Key
	// Charged is the rate charged to the principal's fair share (what it
	// sent while the ceiling bound), per second.
	Charged float64
	// Active: a record in the last (N−1)·W.
	Active        bool
	Throttles     int64
	ThrottleTotal time.Duration
}

// TenantUsage returns every tenant's ceilings at now, by tenant and key.
func (e *Engine) TenantUsage(now time.Time) []TenantUsage {
	nowMs := now.UnixMilli()
	tb := e.tn.table.Load()
	if tb == nil {
		return nil
	}
	var out []TenantUsage
	for _, ts := range tb.byName {
		active := max(int(ts.active.Load()), 0)
		for _, k := range TenantKeys {
			b := ts.ceil[k]
			b.mu.Lock()
			if b.quota >= model.Unlimited {
				b.mu.Unlock()
				continue
			}
			u := TenantUsage{Tenant: ts.name, Key: k, Ceiling: b.quota, Active: active,
				FairShare: b.quota / float64(max(active, 1)), Tokens: b.tokens.Peek(nowMs),
				Throttles: b.throttles, ThrottleTotal: ms(b.throttleMs), Shadow: b.shadow, Shadowed: b.sh.stats(),
				Options: model.Options{Shadow: b.shadow, HasBurst: b.hasBurst, Burst: b.burst}}
			u.Rate, _ = b.rate.Peek(nowMs)
			u.Utilization = u.Rate / b.quota
			b.mu.Unlock()
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b TenantUsage) int { return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Key, b.Key)) })
	return out
}

// TenantMembers returns the principals of tenant name the engine holds
// state for (those seen in the last hour), by principal and key.
func (e *Engine) TenantMembers(name string, now time.Time) []MemberUsage {
	nowMs := now.UnixMilli()
	tb := e.tn.table.Load()
	if tb == nil || tb.byName[name] == nil {
		return nil
	}
	ts := tb.byName[name]
	ts.mu.Lock()
	ms := make([]*member, 0, len(ts.members))
	for _, m := range ts.members {
		ms = append(ms, m)
	}
	ts.mu.Unlock()
	var out []MemberUsage
	for _, m := range ms {
		active := nowMs-m.lastMs.Load() < ts.windowMs
		for _, k := range TenantKeys {
			s := m.share[k]
			if s == nil {
				continue
			}
			s.mu.Lock()
			u := MemberUsage{Principal: m.user, Key: k, Active: active, Throttles: s.throttles, ThrottleTotal: time.Duration(s.throttleMs) * time.Millisecond}
			u.Charged, _ = s.rate.Peek(nowMs)
			s.mu.Unlock()
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b MemberUsage) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Key, b.Key))
	})
	return out
}
